// `proxyctl logout`: its arguments, flags and help, and the actions that call its run functions in logout.ts (imported
// only when a command runs: main.ts builds the whole tree on every invocation, so this file stays light).
import type { Command } from 'commander';
import type { Kit } from './kit.js';

export function registerLogout(program: Command, kit: Kit): void {
  const { run } = kit;
  program
    .command('logout')
    .description('remove the stored API token for the base URL')
    .action(async (_opts: unknown, cmd: Command) =>
      run(cmd, async (ctx, deps) => (await import('./logout.js')).runLogout({ ctx }, deps)),
    );
}
