// `proxyd admin connections`: its flags and help, and the action that calls connections.ts (imported only when the
// command runs: main.ts builds the whole tree on every invocation, so this file stays light).
import { Option, type Command } from 'commander';
import { dataDirOption, databaseUrlOption, withStore } from '../process/command-kit.js';

/** `admin connections`: JSON lines (or a table) on stdout; with --follow until SIGINT/SIGTERM or a closed pipe. */
const connectionsAction = withStore(
  async (store, all) => {
    const { connections } = await import('./connections.js');
    const stop = new AbortController();
    const onSignal = () => stop.abort();
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    process.stdout.on('error', onSignal); // EPIPE: the reader (head, less) went away
    try {
      await connections(
        store,
        all as import('./connections.js').ConnectionsOptions,
        (line) => void process.stdout.write(`${line}\n`),
        stop.signal,
      );
    } finally {
      process.removeListener('SIGINT', onSignal);
      process.removeListener('SIGTERM', onSignal);
    }
  },
  { read: true },
);

export function registerConnections(admin: Command): void {
  admin
    .command('connections')
    .description(
      'the connection log: one JSON line per record (docs/support.md); --follow streams new ones from every node',
    )
    .option('--email <email>', 'records of this account')
    .option('--user <username>', 'records of this proxy username (as presented)')
    .option('--ip <ip>', 'records from this source IP')
    .option('--id <request-id>', 'the record of this request id (X-Request-Id)')
    .option('--reason <reason>', 'records with this reason (docs/support.md lists them)')
    .addOption(new Option('--decision <decision>').choices(['admitted', 'refused']))
    .option('--since <duration|iso>', 'records since, e.g. 15m, 2h, 7d or 2026-11-25T10:00:00Z')
    .option('--limit <n>', 'how many of the newest matching records first (default 100)')
    .option('--follow', 'then print new records as they are written, until interrupted')
    .addOption(new Option('--format <format>').choices(['json', 'table']).default('json'))
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(connectionsAction);
}
