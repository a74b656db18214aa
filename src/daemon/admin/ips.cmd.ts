// `proxyd admin ip assign|release|list`: its flags and help, and the action that calls ips.ts (imported only when the
// command runs: main.ts builds the whole tree on every invocation, so this file stays light).
import type { Command } from 'commander';
import { dataDirOption, databaseUrlOption, withStore } from '../process/command-kit.js';

export function registerIp(admin: Command): void {
  const ip = admin
    .command('ip')
    .description(
      "dedicated egress addresses: an account's traffic leaves only from them, nobody else's does (docs/admin.md)",
    );
  ip.command('assign')
    .description('give addresses of a node to an account (all or none); prints them')
    .requiredOption('--email <email>')
    .requiredOption('--node <name>', "the node's --node-name")
    .requiredOption(
      '--addresses <list>',
      "IPv4 addresses and ranges a-b, comma-separated, each in the node's --egress-pool (or a local address)",
    )
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(
      withStore(async (store, all) => {
        const { ipAssign } = await import('./ips.js');
        process.stdout.write(`${JSON.stringify(await ipAssign(store, all as never))}\n`);
      }),
    );
  ip.command('release')
    .description('take addresses back from whoever holds them; open connections from them end within 2 s')
    .requiredOption('--addresses <list>', 'IPv4 addresses and ranges a-b, comma-separated')
    .option('--quarantine <days>', 'keep them from every account (and the shared rotation) this many days', '0')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(
      withStore(async (store, all) => {
        const { ipRelease } = await import('./ips.js');
        process.stdout.write(`${JSON.stringify(await ipRelease(store, all as never))}\n`);
      }),
    );
  ip.command('list')
    .description(
      'egress addresses nodes offer: one JSON line each (address, node, country, city, account, assigned_at, state)',
    )
    .option('--email <email>', 'the addresses this account holds')
    .option('--node <name>', 'the addresses of this node')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(
      withStore(
        async (store, all) => {
          const { ipList } = await import('./ips.js');
          await ipList(store, all as never, (line) => void process.stdout.write(`${line}\n`));
        },
        { read: true },
      ),
    );
}
