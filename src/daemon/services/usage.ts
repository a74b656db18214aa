// Usage as people read it (docs/admin.md, "usage"): an account's metered usage by proxy user (whitelist traffic under
// `ip:A.B.C.D`) or by minute, hour or day, as JSON, CSV or a table. `proxyd admin usage` and the console's
// Usage page both use it.
import { alignedLine, columnWidths } from './text-table.js';
import { subjectIp, subjectUser, userSubject } from '../../rules/usage-key.js';
import { MAX_SERIES_POINTS } from '../../contract/paths.js';
import { parseDurationMs } from '../../contract/time.js';
import {
  formatIsoTime,
  type UsageDomainsData,
  type UsageDomainsQuery,
  type UsageSeriesData,
  type UsageSeriesQuery,
  type UsageSummaryData,
  type UsageSummaryQuery,
} from '../../contract/schemas.js';
import { shownPeriodStart } from '../metering/plans.js';
import {
  DEFAULT_USAGE_RETENTION,
  DEFAULT_USAGE_RETENTION_MS,
  OTHER_DOMAIN,
  PERIOD_MS,
  bucketStart,
} from '../store/usage-sql.js';
import type { Plan, Store, UsagePeriod, UsageRow } from '../store/index.js';

const UNIT_WORDS: Record<string, string> = { s: 'second', m: 'minute', h: 'hour', d: 'day', y: 'year' };
const PERIODS: readonly UsagePeriod[] = ['minute', 'hour', 'day'];

/** `48h` → "48 hours": what an operator's duration means, said back in words (`1m` is a minute, not a month). */
function inWords(v: string): string {
  const m = /^(\d+)([a-z])$/.exec(v)!;
  return `${m[1]} ${UNIT_WORDS[m[2]!]}${m[1] === '1' ? '' : 's'}`;
}

/**
 * `--usage-retention` (serve, and admin usage, which must read the buckets the daemon keeps): the kept spans, or
 * what is wrong, saying the unit it read. Refused: a number without a unit (`minute=48`), a span that keeps not
 * even one bucket (`hour=1m`: one minute, as `m` is minutes; `minute=0`), and spans out of order (minutes kept
 * longer than hours, hours longer than days: the coarser buckets are what remains of the finer ones).
 */
export function readUsageRetention(s: string): Record<UsagePeriod, number> | string {
  const out = { ...DEFAULT_USAGE_RETENTION_MS };
  const given: Partial<Record<UsagePeriod, string>> = {};
  const flag = '--usage-retention';
  for (const part of s
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean)) {
    const [k, v, extra] = part.split('=').map((x) => x.trim());
    if ((k !== 'minute' && k !== 'hour' && k !== 'day') || v === undefined || extra !== undefined) {
      return `${flag}: expected minute=DURATION,hour=DURATION,day=DURATION (e.g. ${DEFAULT_USAGE_RETENTION}), got "${part}"`;
    }
    if (given[k] !== undefined) return `${flag}: ${k} is given twice ("${k}=${given[k]}" and "${part}")`;
    const least = 'keep each period at least one bucket (minute=1m, hour=1h, day=1d)';
    if (/^0+[a-z]?$/.test(v)) return `${flag}: "${part}" keeps nothing: ${least}`;
    if (/^\d+$/.test(v))
      return `${flag}: "${part}" has no unit: write ${v}h for ${v} hours, ${v}d for ${v} days, ${v}m for ${v} minutes (units: s, m, h, d, y)`;
    const ms = parseDurationMs(v);
    if (ms === null)
      return `${flag}: "${part}": expected a duration such as 2y, 90d, 48h, 30m or 90s (m is minutes; there is no month unit: write 30d), got "${v}"`;
    if (ms < PERIOD_MS[k]) {
      const months = v.endsWith('m') && k !== 'minute' ? ' (m is minutes; there is no month unit: write 30d)' : '';
      return `${flag}: "${part}" keeps ${k} buckets ${inWords(v)}${months}, less than one ${k}: ${least}`;
    }
    given[k] = v;
    out[k] = ms;
  }
  // Finer buckets kept longer than coarser ones would be read in place of them and then vanish first.
  for (let i = 0; i + 1 < PERIODS.length; i++) {
    const [fine, coarse] = [PERIODS[i]!, PERIODS[i + 1]!];
    if (out[fine] > out[coarse]) {
      const say = (p: UsagePeriod) =>
        `${p} buckets ${given[p] !== undefined ? `${inWords(given[p])} (${p}=${given[p]})` : `${inWords(defaultOf(p))} (the default, ${p}=${defaultOf(p)})`}`;
      return `${flag}: ${say(fine)} would be kept longer than ${say(coarse)}: keep minutes no longer than hours, and hours no longer than days`;
    }
  }
  return out;
}

/** The default span of one period as written in DEFAULT_USAGE_RETENTION (`48h`). */
function defaultOf(p: UsagePeriod): string {
  return new RegExp(`${p}=(\\w+)`).exec(DEFAULT_USAGE_RETENTION)![1]!;
}

export interface UsageTotals {
  bytes_up: number;
  bytes_down: number;
  connections: number;
}

export type UsageBy = 'user' | UsagePeriod;
export type UsageReport = { rows: Array<({ user: string } | { time: string }) & UsageTotals>; total: UsageTotals };

/**
 * The finest period whose buckets, kept `retentionMs` (the daemons' --usage-retention), still hold the bucket
 * of `fromMs`: an older one has been pruned, and reading it would count nothing.
 */
function finestKept(fromMs: number, nowMs: number, retentionMs: Record<UsagePeriod, number>): UsagePeriod {
  for (const p of ['minute', 'hour'] as const) if (bucketStart(p, fromMs) >= nowMs - retentionMs[p]) return p;
  return 'day';
}

/** `user:alice` → `alice`; whitelist traffic stays `ip:A.B.C.D`. */
export const userOf = (subject: string | null) => subjectUser(subject) ?? subject ?? '';

/** Usage of one account in [fromMs, toMs): per user (from the finest buckets that cover it) or per bucket. */
export async function usageReport(
  store: Store,
  accountId: number,
  by: UsageBy,
  fromMs: number,
  toMs: number,
  nowMs = Date.now(),
  retentionMs: Record<UsagePeriod, number> = DEFAULT_USAGE_RETENTION_MS,
): Promise<UsageReport> {
  let rows: UsageRow[];
  if (by === 'user') {
    const period = finestKept(fromMs, nowMs, retentionMs);
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
    return by === 'user' ? { user: userOf(r.subject), ...t } : { time: formatIsoTime(r.startMs), ...t };
  });
  return { rows: out, total };
}

/** The report as CSV (RFC 4180; a header line and a `total` line) or aligned columns. */
export function usageText(r: UsageReport, format: 'csv' | 'table'): string {
  const keyName = r.rows[0] && 'time' in r.rows[0] ? 'time' : 'user';
  const lines: string[][] = [[keyName, 'bytes_up', 'bytes_down', 'connections']];
  for (const row of r.rows)
    lines.push([
      String((row as unknown as Record<string, unknown>)[keyName]),
      String(row.bytes_up),
      String(row.bytes_down),
      String(row.connections),
    ]);
  lines.push(['total', String(r.total.bytes_up), String(r.total.bytes_down), String(r.total.connections)]);
  if (format === 'csv') {
    // A field with a comma, quote or line break is quoted; a leading = + - @ is prefixed so a spreadsheet does not run it.
    const cell = (s: string) => {
      const safe = /^[=+\-@]/.test(s) ? `'${s}` : s;
      return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
    };
    return `${lines.map((l) => l.map(cell).join(',')).join('\r\n')}\r\n`;
  }
  const widths = columnWidths(lines);
  return `${lines.map((l) => alignedLine(l, widths, (i) => i > 0)).join('\n')}\n`;
}

// ---- the customer's view: the API's /usage endpoints (docs/api.md, "Usage") ----

/** `alice` → `user:alice`; whitelist traffic is asked for as `ip:A.B.C.D`, its own subject. */
export const subjectOf = (user: string): string => (subjectIp(user) !== null ? user : userSubject(user));

/** A usage query the API refuses: 10400 naming the field. */
export class UsageQueryError extends Error {
  constructor(
    readonly field: string,
    detail: string,
  ) {
    super(`${field}: ${detail}`);
    this.name = 'UsageQueryError';
  }
}

/**
 * The range a usage call covers, [from, to): what was asked, else the account's current period (its plan's,
 * else the calendar month, UTC; a lifetime plan's from the account's first usage or creation) up to now. `from`
 * after `to` is refused.
 */
export async function usageRange(
  store: Store,
  accountId: number,
  q: { from?: number | undefined; to?: number | undefined },
  nowMs: number,
): Promise<{ plan: Plan | null; from: number; to: number }> {
  const plan = await store.plans.get(accountId);
  const from = q.from ?? (await shownPeriodStart(store, accountId, plan, nowMs));
  // Up to the end of the current second, so what was relayed "now" is inside.
  const to = q.to ?? Math.floor(nowMs / 1000) * 1000 + 1000;
  if (from > to) throw new UsageQueryError('from', 'after to');
  return { plan, from, to };
}

export async function usageSummary(
  store: Store,
  accountId: number,
  q: UsageSummaryQuery,
  nowMs: number,
  retentionMs: Record<UsagePeriod, number> = DEFAULT_USAGE_RETENTION_MS,
): Promise<UsageSummaryData> {
  const { plan, from, to } = await usageRange(store, accountId, q, nowMs);
  const report = await usageReport(store, accountId, 'user', from, to, nowMs, retentionMs);
  const ips = await usageByAddress(store, accountId, from, to);
  return {
    from: formatIsoTime(from),
    to: formatIsoTime(to),
    plan: plan && {
      traffic_limit: plan.trafficLimit,
      period: plan.period,
      max_connections: plan.maxConnections,
      expires_at: plan.expiresAt === null ? null : formatIsoTime(plan.expiresAt),
    },
    ...report.total,
    users: report.rows.map((r) => ({
      user: (r as { user: string }).user,
      bytes_up: r.bytes_up,
      bytes_down: r.bytes_down,
      connections: r.connections,
    })),
    ...(ips === null ? {} : { ips }),
  };
}

/**
 * Usage by dedicated egress address over [from, to) (whole UTC days), when the account holds any addresses (null
 * otherwise): every address it holds (zeros when unused) and any other it used in the period, largest first.
 */
export async function usageByAddress(
  store: Store,
  accountId: number,
  from: number,
  to: number,
): Promise<Array<{ address: string } & UsageTotals> | null> {
  const held = (await store.egress.list({ accountId })).filter((r) => r.state === 'assigned');
  if (held.length === 0) return null;
  const used = await store.egress.usageByAddress(accountId, from, to);
  const out = used.map((u) => ({
    address: u.address,
    bytes_up: u.bytesUp,
    bytes_down: u.bytesDown,
    connections: u.connections,
  }));
  for (const h of held)
    if (!out.some((o) => o.address === h.address))
      out.push({ address: h.address, bytes_up: 0, bytes_down: 0, connections: 0 });
  return out;
}

/**
 * Every hour or day bucket from `from`'s to `to`, oldest first, those without traffic as zeros; at most
 * MAX_SERIES_POINTS. Without `from`, the current period's buckets, or the last MAX_SERIES_POINTS of them when it
 * holds more (a lifetime plan by hour); a `from` that asks for more is refused, saying what would fit.
 */
export async function usageSeries(
  store: Store,
  accountId: number,
  q: UsageSeriesQuery,
  nowMs: number,
): Promise<UsageSeriesData> {
  const { from, to } = await usageRange(store, accountId, q, nowMs);
  const g = q.granularity;
  const step = PERIOD_MS[g];
  let first = bucketStart(g, from);
  let count = Math.max(0, Math.ceil((to - first) / step));
  if (count > MAX_SERIES_POINTS && q.from === undefined) {
    first = bucketStart(g, to - 1) - (MAX_SERIES_POINTS - 1) * step;
    count = MAX_SERIES_POINTS;
  }
  if (count > MAX_SERIES_POINTS) {
    const latest = formatIsoTime(bucketStart(g, to - 1) - (MAX_SERIES_POINTS - 1) * step);
    const coarser = g === 'hour' ? ', or granularity day' : '';
    throw new UsageQueryError(
      'from',
      `the range holds ${count} ${g}s, at most ${MAX_SERIES_POINTS} points: give a from of ${latest} or later (or an earlier to)${coarser}`,
    );
  }
  const rows = await store.usage.query({
    accountId,
    period: q.granularity,
    fromMs: first,
    toMs: to,
    by: 'time',
    ...(q.user !== undefined ? { subject: subjectOf(q.user) } : {}),
  });
  const byStart = new Map(rows.map((r) => [r.startMs, r]));
  const points = Array.from({ length: count }, (_, i) => {
    const start = first + i * step;
    const r = byStart.get(start);
    return {
      time: formatIsoTime(start),
      bytes_up: r?.bytesUp ?? 0,
      bytes_down: r?.bytesDown ?? 0,
      connections: r?.connections ?? 0,
    };
  });
  return { granularity: q.granularity, points };
}

/**
 * Usage per registrable domain over whole days (both inclusive; by default those of the current period),
 * largest first: the `limit` largest by name, the rest summed in `other`, so the two always add up to the totals.
 */
export async function usageDomains(
  store: Store,
  accountId: number,
  q: UsageDomainsQuery,
  nowMs: number,
): Promise<UsageDomainsData> {
  const day = PERIOD_MS.day;
  const { from, to } = await usageRange(
    store,
    accountId,
    { from: q.from, to: q.to === undefined ? undefined : q.to + day - 1 },
    nowMs,
  );
  const rows = await store.usage.domains({
    accountId,
    fromMs: bucketStart('day', from),
    toMs: bucketStart('day', to) + day,
    ...(q.user !== undefined ? { subject: subjectOf(q.user) } : {}),
  });
  const other: UsageTotals = { bytes_up: 0, bytes_down: 0, connections: 0 };
  const named = [];
  for (const r of rows) {
    if (r.domain === OTHER_DOMAIN) {
      other.bytes_up += r.bytesUp;
      other.bytes_down += r.bytesDown;
      other.connections += r.connections;
    } else named.push({ domain: r.domain, bytes_up: r.bytesUp, bytes_down: r.bytesDown, connections: r.connections });
  }
  named.sort((a, b) => b.bytes_up + b.bytes_down - (a.bytes_up + a.bytes_down) || (a.domain < b.domain ? -1 : 1));
  for (const r of named.slice(q.limit)) {
    other.bytes_up += r.bytes_up;
    other.bytes_down += r.bytes_down;
    other.connections += r.connections;
  }
  return { domains: named.slice(0, q.limit), other };
}
