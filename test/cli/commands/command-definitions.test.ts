// Each proxyctl command is defined (arguments, flags, help) in src/cli/commands/<name>.cmd.ts beside its run functions
// in <name>.ts. main.ts imports every definition on every invocation, so the definitions must stay light: a run file
// (and what it loads: the API client, output, the keychain) is imported only when its command runs.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../helpers/daemon.js';

const COMMANDS = path.join(ROOT, 'src/cli/commands');
const DEFINITIONS = readdirSync(COMMANDS).filter((f) => f.endsWith('.cmd.ts'));
/** What a definition may load when main.ts starts: commander types, exit statuses, limits, the kit's parsers. */
const LIGHT = new Set([
  '../exit-codes.js',
  '../../contract/paths.js',
  './kit.js',
  '../errors.js',
  '../key-format.js',
  '../../rules/ipv4-syntax.js',
]);

describe('proxyctl command definitions', () => {
  it('every definition and the kit import only light modules (types aside)', () => {
    expect(DEFINITIONS.length).toBeGreaterThanOrEqual(12);
    for (const f of [...DEFINITIONS, 'kit.ts']) {
      const src = readFileSync(path.join(COMMANDS, f), 'utf8');
      for (const m of src.matchAll(/^import (?!type )[^;]*? from '([^']+)';/gm))
        expect(LIGHT.has(m[1]!), `${f} imports ${m[1]} when main.ts starts`).toBe(true);
    }
  });

  it('main.ts imports every definition and no run file', () => {
    const main = readFileSync(path.join(ROOT, 'src/cli/main.ts'), 'utf8');
    for (const f of DEFINITIONS) expect(main, f).toContain(`from './commands/${f.replace(/\.ts$/, '.js')}'`);
    const staticImports = [...main.matchAll(/^import (?!type )[^;]*? from '([^']+)';/gm)].map((m) => m[1]!);
    for (const i of staticImports)
      expect(i.startsWith('./commands/') ? i.endsWith('.cmd.js') || i === './commands/kit.js' : true, i).toBe(true);
  });

  it.skipIf(!existsSync(path.join(ROOT, 'dist/cli/main.js')))(
    'the built `proxyctl --help` loads no command run file',
    () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'proxyctl-loads-'));
      const hook = path.join(dir, 'hook.mjs');
      const out = path.join(dir, 'loaded.json');
      writeFileSync(
        hook,
        `import { registerHooks } from 'node:module';
import { writeFileSync } from 'node:fs';
const seen = [];
registerHooks({ load(url, context, next) { seen.push(url); return next(url, context); } });
process.on('exit', () => writeFileSync(${JSON.stringify(out)}, JSON.stringify(seen)));
`,
      );
      const r = spawnSync(
        process.execPath,
        ['--import', pathToFileURL(hook).href, path.join(ROOT, 'bin/proxyctl'), '--help'],
        {
          env: { ...process.env, NODE_DISABLE_COMPILE_CACHE: '1', NO_COLOR: '1' },
          encoding: 'utf8',
          timeout: 30_000,
        },
      );
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toContain('Usage: proxyctl');
      const loaded = (JSON.parse(readFileSync(out, 'utf8')) as string[]).filter((u) =>
        u.includes('/dist/cli/commands/'),
      );
      expect(loaded.length).toBeGreaterThanOrEqual(12);
      expect(loaded.filter((u) => !/\/(\w|-)+\.cmd\.js$|\/kit\.js$/.test(u))).toEqual([]);
    },
  );
});
