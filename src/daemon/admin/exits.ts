// `proxyd admin exits` (docs/operations.md, "Entry and exit nodes"): the exit-node registry of the fleet database,
// one JSON line per exit, or a table.
import { DAY_MS } from '../../rules/time.js';
import { STALE_MS } from '../fleet/exits.js';
import { alignedLine, columnWidths } from '../services/text-table.js';
import type { Store } from '../store/index.js';
import { AdminError } from './admin-kit.js';

/** Every registered exit, live or stale (those past STALE_MS get no traffic), written a line at a time. */
export async function exitList(store: Store, o: { format?: string }, write: (line: string) => void): Promise<void> {
  if (!store.exits) throw new AdminError('exit nodes need a fleet database: give --database-url postgres://…');
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
  if (o.format === 'table') {
    const cols = ['node', 'hop', 'country', 'city', 'heartbeat_age_ms', 'state'] as const;
    const rows = [[...cols], ...out.map((r) => cols.map((c) => String(r[c] ?? '-')))];
    const widths = columnWidths(rows);
    for (const row of rows) write(alignedLine(row, widths));
  } else for (const r of out) write(JSON.stringify(r));
}
