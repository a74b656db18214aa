// `proxyd admin proxy-user set|create`: its flags and help, and the action that calls proxy-user.ts (imported only when
// the command runs: main.ts builds the whole tree on every invocation, so this file stays light).
import type { Command } from 'commander';
import { dataDirOption, databaseUrlOption, adminAction, storeAction } from '../process/command-kit.js';

export function registerProxyUser(admin: Command): void {
  const proxyUser = admin.command('proxy-user').description('gateway credentials');
  proxyUser
    .command('set')
    .description("a proxy user's limits inside the account's plan; prints them")
    .requiredOption('--email <email>')
    .requiredOption('--username <username>')
    .option('--traffic-limit <size|none>', "bytes per the account's period")
    .option('--max-connections <n|none>', 'concurrent connections of this user')
    .option(
      '--rate-limit <rate|none>',
      "bits per second each way for this user's connections on each node: 10mbit, 1gbit, 500kbit, or none",
    )
    .option('--expires <iso|never>', "the user's own expiry: refused like an expired plan past it")
    .option('--allow <list|none>', "the user's own allowed targets (domain patterns, CIDRs), after the account's rules")
    .option('--deny <list|none>', "the user's own denied targets (domain patterns, CIDRs), after the account's rules")
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(storeAction(() => import('./proxy-user.js').then((m) => m.proxyUserSet)));
  proxyUser
    .command('create')
    .description('create a proxy user; prints {"username","password"} (generated unless --password-stdin)')
    .requiredOption('--email <email>')
    .requiredOption('--username <username>')
    .option('--password-stdin', 'read the password from the first line of stdin')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(adminAction(() => import('./proxy-user.js').then((m) => m.proxyUserCreate)));
}
