// `proxyd admin policy set|show`: its flags and help, and the action that calls policy.ts (imported only when the
// command runs: main.ts builds the whole tree on every invocation, so this file stays light).
import type { Command } from 'commander';
import { dataDirOption, databaseUrlOption, storeAction } from '../process/command-kit.js';

export function registerPolicy(admin: Command): void {
  const policy = admin
    .command('policy')
    .description('target rules: domains and CIDRs an account (or the whole service) may not reach (docs/admin.md)');
  policy
    .command('set')
    .description('replace the lists given (none empties one; a list not given is kept); prints the rules')
    .option('--email <email>', 'the account whose rules change')
    .option('--global', "the service's rules (checked first, for every account)")
    .option('--deny <list|none>', 'comma-separated domain patterns (example.com, *.example.com) and CIDRs refused')
    .option('--allow <list|none>', 'the only domain patterns and CIDRs reachable (an account only)')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(storeAction(() => import('./policy.js').then((m) => m.policySet)));
  policy
    .command('show')
    .description("an account's target rules (--email) or the service's (--global)")
    .option('--email <email>')
    .option('--global')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(storeAction(() => import('./policy.js').then((m) => m.policyShow), { read: true }));
}
