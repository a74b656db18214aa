// `proxyctl auth status`: its arguments, flags and help, and the actions that call its run functions in auth-status.ts
// (imported only when a command runs: main.ts builds the whole tree on every invocation, so this file stays light).
import type { Command } from 'commander';
import type { Kit } from './kit.js';

export function registerAuth(program: Command, kit: Kit): void {
  const { run } = kit;
  const auth = program.command('auth').description('API token status');
  auth
    .command('status')
    .description('where the token comes from, its access key, and whether the API accepts it (exit 4 if not)')
    .action(async (_opts: unknown, cmd: Command) =>
      run(cmd, async (ctx, deps) => (await import('./auth-status.js')).runAuthStatus({ ctx }, deps)),
    );
}
