// Each proxyd command is defined (flags, help) in a <name>.cmd.ts beside the module that runs it: process/ for serve
// and health, admin/ for `proxyd admin …`. main.ts imports every definition on every invocation, so they import only
// commander, the shared kit (process/command-kit.ts) and serve's flag table; what runs a command loads when it runs.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/daemon/process/main.js';
import { ROOT } from '../helpers/daemon.js';

const DAEMON = path.join(ROOT, 'src/daemon');
const DEFINITIONS = ['process', 'admin'].flatMap((dir) =>
  readdirSync(path.join(DAEMON, dir))
    .filter((f) => f.endsWith('.cmd.ts'))
    .map((f) => `${dir}/${f}`),
);
// The leaf of pure rules (src/rules/: no I/O, nothing of ours outside it) is light too.
const LIGHT = new Set([
  'commander',
  './command-kit.js',
  '../process/command-kit.js',
  './serve-options.js',
  '../../rules/time.js',
]);
const staticImports = (src: string) => [...src.matchAll(/^import (?!type )[^;]*? from '([^']+)';/gm)].map((m) => m[1]!);

describe('proxyd command definitions', () => {
  it('import only commander, the kit, serve-options and the leaf of rules (types aside); main.ts imports each of them', () => {
    expect(DEFINITIONS.length).toBeGreaterThanOrEqual(16);
    const main = readFileSync(path.join(DAEMON, 'process/main.ts'), 'utf8');
    for (const f of DEFINITIONS) {
      for (const i of staticImports(readFileSync(path.join(DAEMON, f), 'utf8')))
        expect(LIGHT.has(i), `${f} imports ${i} when proxyd starts`).toBe(true);
      const spec = f.startsWith('process/') ? `./${path.basename(f, '.ts')}.js` : `../${f.replace(/\.ts$/, '.js')}`;
      expect(main, f).toContain(`from '${spec}'`);
    }
  });

  it('every command of the tree either runs something or holds subcommands', () => {
    const walk = (c: ReturnType<typeof buildProgram>): void => {
      for (const sub of c.commands) {
        // commander keeps the action handler on a private field; a leaf without one would print help and exit 0.
        const hasAction = (sub as unknown as { _actionHandler: unknown })._actionHandler != null;
        expect(hasAction || sub.commands.length > 0, sub.name()).toBe(true);
        walk(sub);
      }
    };
    walk(buildProgram());
  });
});
