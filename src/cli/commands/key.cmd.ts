// `proxyctl key set|status|forget`: its arguments, flags and help, and the actions that call its run functions in
// key.ts (imported only when a command runs: main.ts builds the whole tree on every invocation, so this file stays
// light).
import type { Command } from 'commander';
import type { Kit } from './kit.js';

export function registerKey(program: Command, kit: Kit): void {
  const { run } = kit;
  const key = program
    .command('key')
    .description(
      'the API key (pxk_…) that opens proxy users, proxy lists and usage (the token opens only the whitelist)',
    );
  key
    .command('set')
    .description('store an API key (hidden prompt on a TTY, else read from stdin) after the API accepts it')
    .option('--stdin', 'read the key from stdin (also the default when stdin is not a terminal)')
    .action(async (opts: { stdin?: boolean }, cmd: Command) =>
      run(cmd, async (ctx, deps) => (await import('./key.js')).runKeySet({ ctx, stdin: opts.stdin === true }, deps)),
    );
  key
    .command('status')
    .description(
      'where the API key comes from, its id, and whether the API accepts it (exit 4 if not); never prints the key',
    )
    .action(async (_opts: unknown, cmd: Command) =>
      run(cmd, async (ctx, deps) => (await import('./key.js')).runKeyStatus({ ctx }, deps)),
    );
  key
    .command('forget')
    .description('remove the stored API key for the base URL')
    .action(async (_opts: unknown, cmd: Command) =>
      run(cmd, async (ctx, deps) => (await import('./key.js')).runKeyForget({ ctx }, deps)),
    );
}
