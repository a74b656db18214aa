// Guards the rule in src/daemon/store/sqlite/statements.ts: a better-sqlite3 Statement that becomes garbage can
// abort the process under Node 24 (~ObjectWrap -> RemoveEnvironmentCleanupHook with no env), so SQL goes
// through the per-database statement cache only.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../helpers/daemon.js';

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : [],
  );
}

describe('statement cache rule', () => {
  it('no source or test file but statements.ts calls .prepare( or .pragma( on a database', () => {
    const offenders = [...sources(path.join(ROOT, 'src')), ...sources(path.join(ROOT, 'test'))]
      .filter(
        (f) => !f.endsWith(path.join('store', 'sqlite', 'statements.ts')) && !f.endsWith('store-statements.test.ts'),
      )
      .filter((f) =>
        /\b(db|database)\s*\.\s*(prepare|pragma)\s*[<(]|new Database\(/i.test(
          readFileSync(f, 'utf8').replace(/pin\(new Database\(/g, ''),
        ),
      );
    expect(offenders.map((f) => path.relative(ROOT, f))).toEqual([]);
  });

  it('no SQL outside src/daemon/store', () => {
    const offenders = sources(path.join(ROOT, 'src'))
      .filter((f) => !f.includes(`${path.sep}store${path.sep}`))
      .filter((f) =>
        /\b(SELECT\s+[\w*]|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM)\b/.test(readFileSync(f, 'utf8')),
      );
    expect(offenders.map((f) => path.relative(ROOT, f))).toEqual([]);
  });
});
