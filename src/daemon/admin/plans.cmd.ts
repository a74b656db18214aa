// `proxyd admin plan set|show`: its flags and help, and the action that calls plans.ts (imported only when the command
// runs: main.ts builds the whole tree on every invocation, so this file stays light).
import { Option, type Command } from 'commander';
import { dataDirOption, databaseUrlOption, storeAction } from '../process/command-kit.js';

export function registerPlan(admin: Command): void {
  const plan = admin.command('plan').description('plans: traffic per period, connections, expiry (docs/admin.md)');
  plan
    .command('set')
    .description("create or change the account's plan; prints it")
    .requiredOption('--email <email>')
    .option('--traffic-limit <size|none>', 'bytes per period: 50GiB, 500MB, plain bytes, or none')
    .addOption(new Option('--period <period>', 'what the traffic limit is per').choices(['day', 'month', 'lifetime']))
    .option('--max-connections <n|none>', 'concurrent connections of the account')
    .option('--expires <iso|never>', 'when the plan ends')
    .option(
      '--rate-limit <rate|none>',
      "bits per second each way for the account's connections on each node: 10mbit, 1gbit, 500kbit, or none",
    )
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(storeAction(() => import('./plans.js').then((m) => m.planSet)));
  plan
    .command('show')
    .description('the plan, what the period has used, and its state')
    .requiredOption('--email <email>')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(storeAction(() => import('./plans.js').then((m) => m.planShow), { read: true }));
}
