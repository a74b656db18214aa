// Usage as people read it (docs/admin.md, "usage"): an account's metered usage by proxy user (whitelist traffic under
// `ip:A.B.C.D`) or by minute, hour or day, as JSON, CSV or a table. `proxyd admin usage` and the console's
// Usage page both use it.
import { DEFAULT_USAGE_RETENTION_MS, bucketStart } from '../store/usage-sql.js';
import type { Store, UsagePeriod, UsageRow } from '../store/index.js';

export interface UsageTotals {
  bytes_up: number;
  bytes_down: number;
  connections: number;
}

export type UsageBy = 'user' | UsagePeriod;
export type UsageReport = { rows: Array<({ user: string } | { time: string }) & UsageTotals>; total: UsageTotals };

/** Kept by default (--usage-retention): the finest period that still covers a range's start. */
const FINEST: Array<[UsagePeriod, number]> = [
  ['minute', DEFAULT_USAGE_RETENTION_MS.minute],
  ['hour', DEFAULT_USAGE_RETENTION_MS.hour],
  ['day', Number.POSITIVE_INFINITY],
];

/** `user:alice` → `alice`; whitelist traffic stays `ip:A.B.C.D`. */
export const userOf = (subject: string | null) => (subject?.startsWith('user:') ? subject.slice(5) : (subject ?? ''));

/** Usage of one account in [fromMs, toMs): per user (from the finest buckets that cover it) or per bucket. */
export async function usageReport(store: Store, accountId: number, by: UsageBy, fromMs: number, toMs: number, nowMs = Date.now()): Promise<UsageReport> {
  let rows: UsageRow[];
  if (by === 'user') {
    const period = FINEST.find(([, keep]) => fromMs >= nowMs - keep)![0];
    rows = await store.usage.query({ accountId, period, fromMs: bucketStart(period, fromMs), toMs, by: 'subject' });
  } else {
    rows = await store.usage.query({ accountId, period: by, fromMs: bucketStart(by, fromMs), toMs, by: 'time' });
  }
  const total: UsageTotals = { bytes_up: 0, bytes_down: 0, connections: 0 };
  const out = rows.map((r) => {
    total.bytes_up += r.bytesUp;
    total.bytes_down += r.bytesDown;
    total.connections += r.connections;
    const t: UsageTotals = { bytes_up: r.bytesUp, bytes_down: r.bytesDown, connections: r.connections };
    return by === 'user' ? { user: userOf(r.subject), ...t } : { time: new Date(r.startMs).toISOString(), ...t };
  });
  return { rows: out, total };
}

/** The report as CSV (RFC 4180; a header line and a `total` line) or aligned columns. */
export function usageText(r: UsageReport, format: 'csv' | 'table'): string {
  const keyName = r.rows[0] && 'time' in r.rows[0] ? 'time' : 'user';
  const lines: string[][] = [[keyName, 'bytes_up', 'bytes_down', 'connections']];
  for (const row of r.rows) lines.push([String((row as unknown as Record<string, unknown>)[keyName]), String(row.bytes_up), String(row.bytes_down), String(row.connections)]);
  lines.push(['total', String(r.total.bytes_up), String(r.total.bytes_down), String(r.total.connections)]);
  if (format === 'csv') {
    // A field with a comma, quote or line break is quoted; a leading = + - @ is prefixed so a spreadsheet does not run it.
    const cell = (s: string) => {
      const safe = /^[=+\-@]/.test(s) ? `'${s}` : s;
      return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
    };
    return `${lines.map((l) => l.map(cell).join(',')).join('\r\n')}\r\n`;
  }
  const widths = lines[0]!.map((_, i) => Math.max(...lines.map((l) => l[i]!.length)));
  return `${lines.map((l) => l.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ')).join('\n')}\n`;
}
