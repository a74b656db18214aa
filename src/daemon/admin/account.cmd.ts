// `proxyd admin account create|set|reset-2fa`: its flags and help, and the action that calls account.ts (imported only
// when the command runs: main.ts builds the whole tree on every invocation, so this file stays light).
import { Option, type Command } from 'commander';
import { dataDirOption, databaseUrlOption, adminAction } from '../process/command-kit.js';

export function registerAccount(admin: Command): void {
  const account = admin.command('account').description('accounts');
  account
    .command('create')
    .description('create an account; prints {"account_id","email"}')
    .requiredOption('--email <email>')
    .option('--password <password>', 'console password (prefer --password-stdin: argv is visible to other users)')
    .option('--password-stdin', 'read the console password from the first line of stdin')
    .option('--verified', 'mark the account real-name verified')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(adminAction(() => import('./account.js').then((m) => m.accountCreate)));
  account
    .command('set')
    .description('change status and/or verification; prints the account')
    .requiredOption('--email <email>')
    .addOption(new Option('--status <status>').choices(['active', 'suspended', 'closed']))
    .option('--verified <bool>', 'true or false')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(adminAction(() => import('./account.js').then((m) => m.accountSet)));

  account
    .command('reset-2fa')
    .description(
      "turn the account's second factor off (TOTP, passkeys, recovery codes) for a customer who lost them; recorded",
    )
    .requiredOption('--email <email>')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(adminAction(() => import('./account.js').then((m) => m.accountReset2fa)));
}
