// README's `proxyd serve` flag table is what a new user reads, docs/operations.md's the operator's: every option of
// the command must be in both (README once lacked --egress-pool), with the env var it reads and its default, as
// src/daemon/process/serve-options.ts (the one table the command is built from) has them. The meaning column is
// each document's own (README's short, operations.md's full). Hidden (test-only) options aside.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/daemon/process/main.js';
import { SERVE_DEFAULTS, SERVE_FLAGS, docCells } from '../../src/daemon/process/serve-options.js';
import { ROOT } from '../helpers/daemon.js';

/** The `| \`--flag …\` | env | default | meaning |` rows of the table after `heading`, as cells (`\|` stays inside a cell). */
function flagRows(file: string, heading: string): string[][] {
  const text = readFileSync(path.join(ROOT, file), 'utf8');
  const from = text.indexOf(heading);
  expect(from, `${file} has no "${heading}"`).toBeGreaterThan(-1);
  const rest = text.slice(from + heading.length);
  const table = rest.slice(0, rest.search(/\n#+ /) === -1 ? undefined : rest.search(/\n#+ /));
  return table
    .split('\n')
    .filter((l) => l.startsWith('| `--'))
    .map((l) =>
      l
        .slice(1, -1)
        .split(/(?<!\\)\|/)
        .map((c) => c.trim()),
    );
}

const documented = SERVE_FLAGS.filter((f) => !f.hidden);

describe('proxyd serve flags: one table for the options, the defaults and the docs', () => {
  it('builds `proxyd serve` from SERVE_FLAGS, each default and env var as the table has it', () => {
    const serve = buildProgram().commands.find((c) => c.name() === 'serve')!;
    expect(serve.options.map((o) => o.flags)).toEqual(SERVE_FLAGS.map((f) => f.flags));
    for (const f of SERVE_FLAGS) {
      const o = serve.options.find((x) => x.flags === f.flags)!;
      expect(o.defaultValue, f.flags).toBe(f.default ? SERVE_DEFAULTS[f.default] : undefined);
      // Boolean flags read their env var in config.ts (1/0), not through commander.
      expect(o.envVar, f.flags).toBe(f.boolean ? undefined : f.env);
      expect(o.hidden, f.flags).toBe(f.hidden === true);
    }
    // Every default has its flag.
    expect(new Set(SERVE_FLAGS.flatMap((f) => (f.default ? [f.default] : [])))).toEqual(
      new Set(Object.keys(SERVE_DEFAULTS)),
    );
  });

  for (const [file, heading] of [
    ['README.md', '## `proxyd serve` flags'],
    ['docs/operations.md', '## Flags and environment'],
  ] as const) {
    it(`${file} lists every option with its env var and default, and no other`, () => {
      const rows = flagRows(file, heading);
      for (const f of documented) {
        const [flag, env, def] = docCells(f);
        const row = rows.find((r) => r[0] === flag);
        expect(row, `${f.flags} is missing from ${file}'s flag table (or its cell is not ${flag})`).toBeDefined();
        expect(row!.slice(1, 3), `${flag} in ${file}`).toEqual([env, def]);
      }
      expect(rows.map((r) => r[0]).sort()).toEqual(documented.map((f) => docCells(f)[0]).sort());
    });
  }
});
