// `proxyd admin usage`: an account's metered usage (SPEC 11) by proxy user (whitelist traffic under
// `ip:A.B.C.D`) or by minute, hour or day, as JSON, CSV or a table.
import { PERIOD_MS } from '../store/usage-sql.js';
import type { Store, UsagePeriod, UsageRow } from '../store/index.js';
import { AdminError } from './commands.js';

export interface UsageOptions {
  email?: string;
  by?: string;
  from?: string;
  to?: string;
  format?: string;
}

interface Totals {
  bytes_up: number;
  bytes_down: number;
  connections: number;
}

export type UsageReport = { rows: Array<({ user: string } | { time: string }) & Totals>; total: Totals };

const DEFAULT_SPAN_MS: Record<string, number> = { minute: 3_600_000, hour: 86_400_000, day: 30 * 86_400_000, user: 30 * 86_400_000 };
/** Kept by default (--usage-retention): the finest period that still covers a range's start. */
const FINEST: Array<[UsagePeriod, number]> = [
  ['minute', 48 * 3_600_000],
  ['hour', 90 * 86_400_000],
  ['day', Number.POSITIVE_INFINITY],
];

function parseTime(s: string, what: string): number {
  const t = Date.parse(s);
  if (!/^\d{4}-\d{2}-\d{2}/.test(s) || Number.isNaN(t)) throw new AdminError(`${what}: expected an ISO time such as 2026-11-25T00:00:00Z, got "${s}"`);
  return t;
}

/** `user:alice` → `alice`; whitelist traffic stays `ip:A.B.C.D`. */
const userOf = (subject: string | null) => (subject?.startsWith('user:') ? subject.slice(5) : (subject ?? ''));

export async function usageReport(store: Store, o: UsageOptions, nowMs = Date.now()): Promise<UsageReport> {
  if (!o.email) throw new AdminError('--email is required');
  const account = await store.accounts.findByEmail(o.email);
  if (!account) throw new AdminError(`no account with email ${o.email}`);
  const by = o.by ?? 'user';
  if (!['user', 'minute', 'hour', 'day'].includes(by)) throw new AdminError('--by: expected user, minute, hour or day');
  const toMs = o.to !== undefined ? parseTime(o.to, '--to') : nowMs;
  const fromMs = o.from !== undefined ? parseTime(o.from, '--from') : toMs - DEFAULT_SPAN_MS[by]!;
  if (fromMs >= toMs) throw new AdminError('--from must be before --to');
  let rows: UsageRow[];
  if (by === 'user') {
    const period = FINEST.find(([, keep]) => fromMs >= nowMs - keep)![0];
    rows = await store.usage.query({ accountId: account.id, period, fromMs: Math.floor(fromMs / PERIOD_MS[period]) * PERIOD_MS[period], toMs, by: 'subject' });
  } else {
    const period = by as UsagePeriod;
    rows = await store.usage.query({ accountId: account.id, period, fromMs: Math.floor(fromMs / PERIOD_MS[period]) * PERIOD_MS[period], toMs, by: 'time' });
  }
  const total: Totals = { bytes_up: 0, bytes_down: 0, connections: 0 };
  const out = rows.map((r) => {
    total.bytes_up += r.bytesUp;
    total.bytes_down += r.bytesDown;
    total.connections += r.connections;
    const t: Totals = { bytes_up: r.bytesUp, bytes_down: r.bytesDown, connections: r.connections };
    return by === 'user' ? { user: userOf(r.subject), ...t } : { time: new Date(r.startMs).toISOString(), ...t };
  });
  return { rows: out, total };
}

/** The report in the format asked for (`json` default, `csv`, `table`). */
export function renderUsage(r: UsageReport, format = 'json'): string {
  if (format === 'json') return `${JSON.stringify(r)}\n`;
  if (format !== 'csv' && format !== 'table') throw new AdminError('--format: expected json, csv or table');
  const keyName = r.rows[0] && 'time' in r.rows[0] ? 'time' : 'user';
  const lines: string[][] = [[keyName, 'bytes_up', 'bytes_down', 'connections']];
  for (const row of r.rows) lines.push([String((row as unknown as Record<string, unknown>)[keyName]), String(row.bytes_up), String(row.bytes_down), String(row.connections)]);
  lines.push(['total', String(r.total.bytes_up), String(r.total.bytes_down), String(r.total.connections)]);
  if (format === 'csv') {
    // RFC 4180: quote a field with a comma, quote or line break; a leading = + - @ is prefixed so a spreadsheet does not run it.
    const cell = (s: string) => {
      const safe = /^[=+\-@]/.test(s) ? `'${s}` : s;
      return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
    };
    return `${lines.map((l) => l.map(cell).join(',')).join('\r\n')}\r\n`;
  }
  const widths = lines[0]!.map((_, i) => Math.max(...lines.map((l) => l[i]!.length)));
  return `${lines.map((l) => l.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ')).join('\n')}\n`;
}
