// `proxyd admin token reset|disable`: its flags and help, and the action that calls token.ts (imported only when the
// command runs: main.ts builds the whole tree on every invocation, so this file stays light).
import type { Command } from 'commander';
import { dataDirOption, databaseUrlOption, adminAction } from '../process/command-kit.js';

export function registerToken(admin: Command): void {
  const token = admin.command('token').description('API tokens');
  token
    .command('reset')
    .description('issue a new token (the old one dies at once); prints {"token"} once')
    .requiredOption('--email <email>')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(adminAction(() => import('./token.js').then((m) => m.tokenReset)));
  token
    .command('disable')
    .description('disable the active token')
    .requiredOption('--email <email>')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(adminAction(() => import('./token.js').then((m) => m.tokenDisable)));
}
