// `proxyctl login [--with-token]`: its arguments, flags and help, and the actions that call its run functions in
// login.ts (imported only when a command runs: main.ts builds the whole tree on every invocation, so this file stays
// light).
import type { Command } from 'commander';
import type { Kit } from './kit.js';

export function registerLogin(program: Command, kit: Kit): void {
  const { run } = kit;
  program
    .command('login')
    .description('store an API token (hidden prompt on a TTY, else read from stdin) after the API accepts it')
    .option('--with-token', 'read the token from stdin')
    .action(async (opts: { withToken?: boolean }, cmd: Command) =>
      run(cmd, async (ctx, deps) =>
        (await import('./login.js')).runLogin({ ctx, withToken: opts.withToken === true }, deps),
      ),
    );
}
