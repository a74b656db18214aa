// `proxyd admin exits`: its flags and help, and the action that reads the store's exit registry (with fleet/exits.ts,
// imported only when the command runs: main.ts builds the whole tree on every invocation, so this file stays light).
import { Option, type Command } from 'commander';
import { DAY_MS } from '../../rules/time.js';
import { dataDirOption, databaseUrlOption, withStore } from '../process/command-kit.js';

/** `proxyd admin exits`: the exit-node registry (docs/operations.md, "Entry and exit nodes"), one JSON line per exit, or a table. */
const exitsAction = withStore(
  async (store, all) => {
    const { AdminError } = await import('./admin-kit.js');
    if (!store.exits) throw new AdminError('exit nodes need a fleet database: give --database-url postgres://…');
    const { STALE_MS } = await import('../fleet/exits.js');
    const rows = await store.exits.list(365 * DAY_MS); // every row; those past STALE_MS get no traffic
    const out = rows.map((r) => ({
      node: r.node,
      hop: r.hop,
      country: r.country,
      city: r.city,
      heartbeat_age_ms: r.ageMs,
      state: r.ageMs <= STALE_MS ? 'live' : 'stale',
      fingerprints: r.fingerprints,
    }));
    if (all.format === 'table') {
      const { alignedLine, columnWidths } = await import('../services/text-table.js');
      const cols = ['node', 'hop', 'country', 'city', 'heartbeat_age_ms', 'state'] as const;
      const rows = [[...cols], ...out.map((r) => cols.map((c) => String(r[c] ?? '-')))];
      const widths = columnWidths(rows);
      for (const row of rows) process.stdout.write(`${alignedLine(row, widths)}\n`);
    } else for (const r of out) process.stdout.write(`${JSON.stringify(r)}\n`);
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
