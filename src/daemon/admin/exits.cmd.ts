// `proxyd admin exits`: its flags and help, and the action that calls exits.ts (imported only when the command runs:
// main.ts builds the whole tree on every invocation, so this file stays light).
import { Option, type Command } from 'commander';
import { dataDirOption, databaseUrlOption, withStore } from '../process/command-kit.js';

/** `proxyd admin exits`: the exit-node registry, one JSON line per exit, or a table. */
const exitsAction = withStore(
  async (store, all) => {
    const { exitList } = await import('./exits.js');
    await exitList(store, all, (line) => void process.stdout.write(`${line}\n`));
  },
  { read: true },
);

export function registerExits(admin: Command): void {
  admin
    .command('exits')
    .description('exit nodes registered in the fleet database: one JSON line each (live: heartbeat within 2.5 s)')
    .addOption(new Option('--format <format>').choices(['json', 'table']).default('json'))
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(exitsAction);
}
