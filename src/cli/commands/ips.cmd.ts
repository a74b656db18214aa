// `proxyctl ips list|replace`: its arguments, flags and help, and the actions that call its run functions in ips.ts
// (imported only when a command runs: main.ts builds the whole tree on every invocation, so this file stays light).
import type { Command } from 'commander';
import type { Kit } from './kit.js';

export function registerIps(program: Command, kit: Kit): void {
  const { run } = kit;
  const ips = program
    .command('ips')
    .description('your dedicated egress addresses (API key with users:read / users:write)');
  ips
    .command('list')
    .description('the addresses your account holds alone: country, city, since, bytes this period; replacements left')
    .action(async (_o: unknown, cmd: Command) =>
      run(cmd, async (ctx, deps) => (await import('./ips.js')).runIpsList({ ctx }, deps)),
    );
  ips
    .command('replace')
    .description('swap one of your addresses for a free one (a monthly allowance); connections open from it end')
    .argument('<address>')
    .option('-y, --yes', 'no question; needed when not on a terminal')
    .action(async (address: string, opts: { yes?: boolean }, cmd: Command) =>
      run(cmd, async (ctx, deps) =>
        (await import('./ips.js')).runIpsReplace({ ctx, address, yes: opts.yes === true }, deps),
      ),
    );
}
