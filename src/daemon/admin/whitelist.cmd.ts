// `proxyd admin whitelist set-status`: its flags and help, and the action that calls whitelist.ts (imported only when
// the command runs: main.ts builds the whole tree on every invocation, so this file stays light).
import { Option, type Command } from 'commander';
import { dataDirOption, databaseUrlOption, adminAction } from '../process/command-kit.js';

export function registerWhitelist(admin: Command): void {
  admin
    .command('whitelist')
    .description('whitelist entries')
    .command('set-status')
    .description('enable or disable an entry; prints the entry')
    .requiredOption('--email <email>')
    .requiredOption('--ip <ip>')
    .addOption(new Option('--status <status>').choices(['active', 'disabled']).makeOptionMandatory())
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(adminAction(() => import('./whitelist.js').then((m) => m.whitelistSetStatus)));
}
