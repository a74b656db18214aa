// Usage buckets, shared by both backends: which bucket a flush lands in, and the read queries.
import { usageKey, usageTargetKey } from '../../rules/usage-key.js';
import { DAY_MS, HOUR_MS, MINUTE_MS } from '../../rules/time.js';
import { parseDurationMs } from '../../contract/time.js';
import type { DomainUsageRow, UsageDelta, UsagePeriod, UsageQuery, UsageRow } from './types.js';

export const PERIOD_MS: Record<UsagePeriod, number> = { minute: MINUTE_MS, hour: HOUR_MS, day: DAY_MS };
export const PERIODS = Object.keys(PERIOD_MS) as UsagePeriod[];

/** How long an applied flush's id is kept: a flush is never sent again after that long. */
export const FLUSH_ID_KEEP_MS = DAY_MS;

/** How long buckets are kept per period unless `--usage-retention` says otherwise, as the flag writes it. */
const DEFAULT_SPANS: Record<UsagePeriod, string> = { minute: '48h', hour: '90d', day: '2y' };

/** The default of `--usage-retention` as the flag's text (`minute=48h,hour=90d,day=2y`). */
export const DEFAULT_USAGE_RETENTION = PERIODS.map((p) => `${p}=${DEFAULT_SPANS[p]}`).join(',');

/** How long buckets are kept unless `--usage-retention` says otherwise: DEFAULT_USAGE_RETENTION in ms. */
export const DEFAULT_USAGE_RETENTION_MS = Object.fromEntries(
  PERIODS.map((p) => [p, parseDurationMs(DEFAULT_SPANS[p])!]),
) as Record<UsagePeriod, number>;

/** The start of the `period` bucket holding `atMs` (UTC). */
export function bucketStart(period: UsagePeriod, atMs: number): number {
  return Math.floor(atMs / PERIOD_MS[period]) * PERIOD_MS[period];
}

/** The unfolded part of a minute bucket (PostgreSQL's roll-up: migration 19); this exact text is the partial index's predicate. */
export const UNROLLED = "period = 'minute' AND unrolled";

/**
 * An account's buckets of one period in [from, to), by time or by subject. Hours and days are their buckets plus
 * what the minutes hold that was not folded into them yet (roll_*: on PostgreSQL flushes write minutes only), so a
 * total is the same before and after a roll-up; both are read in one statement (one snapshot). `?` placeholders.
 */
export function usageQuery(q: UsageQuery): { text: string; params: Array<string | number> } {
  const key = q.by === 'time' ? 'start_ms' : 'subject';
  const other = q.by === 'time' ? 'NULL AS subject' : 'MIN(start_ms) AS start_ms';
  const one = q.subject !== undefined ? ' AND subject = ?' : '';
  const bucketParams: Array<string | number> = [
    q.accountId,
    q.period,
    q.fromMs,
    q.toMs,
    ...(q.subject !== undefined ? [q.subject] : []),
  ];
  const sums = 'SUM(bytes_up) AS bytes_up, SUM(bytes_down) AS bytes_down, SUM(connections) AS connections';
  if (q.period === 'minute') {
    return {
      text: `SELECT ${key}, ${other}, ${sums} FROM usage_buckets WHERE account_id = ? AND period = ? AND start_ms >= ? AND start_ms < ?${one} GROUP BY ${key} ORDER BY ${key}`,
      params: bucketParams,
    };
  }
  const p = PERIOD_MS[q.period];
  // The minutes whose hour (day) bucket starts in [from, to).
  const fromMinute = Math.ceil(q.fromMs / p) * p;
  const toMinute = Math.ceil(q.toMs / p) * p;
  const text = `SELECT ${key}, ${other}, ${sums} FROM (
      SELECT start_ms, subject, bytes_up, bytes_down, connections FROM usage_buckets WHERE account_id = ? AND period = ? AND start_ms >= ? AND start_ms < ?${one}
      UNION ALL
      SELECT (start_ms / ${p}) * ${p} AS start_ms, subject, roll_up AS bytes_up, roll_down AS bytes_down, roll_conn AS connections FROM usage_buckets
        WHERE account_id = ? AND ${UNROLLED} AND start_ms >= ? AND start_ms < ?${one}
    ) b GROUP BY ${key} ORDER BY ${key}`;
  return {
    text,
    params: [...bucketParams, q.accountId, fromMinute, toMinute, ...(q.subject !== undefined ? [q.subject] : [])],
  };
}

/**
 * Day totals (bytes both ways) of some accounts since `sinceMs` (a day's start), per subject and day: day buckets plus
 * unfolded minutes. `?` placeholders: since, the account ids (a JSON array: `ids` reads it), since again, ids again.
 */
export function dailyTotalsText(ids: string): string {
  return `SELECT account_id, subject, start_ms, SUM(bytes) AS bytes FROM (
      SELECT account_id, subject, start_ms, bytes_up + bytes_down AS bytes FROM usage_buckets WHERE period = 'day' AND start_ms >= ? AND account_id IN (${ids})
      UNION ALL
      SELECT account_id, subject, (start_ms / ${PERIOD_MS.day}) * ${PERIOD_MS.day} AS start_ms, roll_up + roll_down AS bytes FROM usage_buckets
        WHERE ${UNROLLED} AND start_ms >= ? AND account_id IN (${ids})
    ) b GROUP BY account_id, subject, start_ms`;
}

/**
 * Where an account's kept usage starts: its earliest day bucket, or an earlier minute one (on PostgreSQL a minute
 * not folded into its day yet); each a seek of the primary key. One parameter, the account id, twice.
 */
export const FIRST_USAGE_TEXT = `SELECT MIN(m) AS first_ms FROM (
    SELECT MIN(start_ms) AS m FROM usage_buckets WHERE account_id = ? AND period = 'day'
    UNION ALL
    SELECT MIN(start_ms) AS m FROM usage_buckets WHERE account_id = ? AND period = 'minute'
  ) f`;

export function toUsageRow(r: {
  start_ms: number | string;
  subject: string | null;
  bytes_up: number | string;
  bytes_down: number | string;
  connections: number | string;
}): UsageRow {
  return {
    startMs: Number(r.start_ms),
    subject: r.subject,
    bytesUp: Number(r.bytes_up),
    bytesDown: Number(r.bytes_down),
    connections: Number(r.connections),
  };
}

// ---- usage per registrable domain, per day, proxy user and node ----

/** The stored domain of usage under no named domain: past the names kept per user and day, or before any target. */
export const OTHER_DOMAIN = '';

/** Named domains a node keeps per account, subject and day; later ones are added to OTHER_DOMAIN. */
export const DOMAINS_PER_USER_DAY = 1_000;

/** The deltas summed per account and subject (a flush carries one delta per domain; a bucket row is per subject). */
export function perSubject(deltas: readonly UsageDelta[]): UsageDelta[] {
  const out = new Map<string, UsageDelta>();
  for (const d of deltas) {
    const key = usageKey(d.accountId, d.subject);
    const o = out.get(key);
    if (!o)
      out.set(key, {
        accountId: d.accountId,
        subject: d.subject,
        bytesUp: d.bytesUp,
        bytesDown: d.bytesDown,
        connections: d.connections,
      });
    else {
      o.bytesUp += d.bytesUp;
      o.bytesDown += d.bytesDown;
      o.connections += d.connections;
    }
  }
  return [...out.values()];
}

/** How many named domains each account and subject of a flush brings (the cap needs no lookup while they fit). */
export function namedPerSubject(deltas: readonly UsageDelta[]): Map<string, number> {
  const n = new Map<string, number>();
  for (const d of deltas)
    if (d.target) n.set(usageKey(d.accountId, d.subject), (n.get(usageKey(d.accountId, d.subject)) ?? 0) + 1);
  return n;
}

/** Subjects whose named domains might not all fit under the cap: only for these is each domain looked up. */
export function nearCap(named: Map<string, number>, kept: Map<string, number>): Set<string> {
  return new Set([...named].filter(([k, n]) => (kept.get(k) ?? 0) + n > DOMAINS_PER_USER_DAY).map(([k]) => k));
}

/**
 * The domain cap, decided for a whole flush: per account and subject, with `kept` named domains this node keeps
 * already for that day, a flush's domains stay named while they fit; past DOMAINS_PER_USER_DAY, the ones kept
 * already (`present`, asked only then) stay named, new ones are named largest first while room is left, the rest
 * go to OTHER_DOMAIN. Summed per final domain (one row per key, as one multi-row upsert needs).
 */
export function capDomains(
  deltas: readonly UsageDelta[],
  kept: Map<string, number>,
  present: (d: UsageDelta) => boolean,
): UsageDelta[] {
  const out = new Map<string, UsageDelta>();
  const add = (d: UsageDelta, domain: string) => {
    const key = usageTargetKey(d.accountId, d.subject, domain);
    const o = out.get(key);
    if (!o) out.set(key, { ...d, target: domain });
    else {
      o.bytesUp += d.bytesUp;
      o.bytesDown += d.bytesDown;
      o.connections += d.connections;
    }
  };
  const near = nearCap(namedPerSubject(deltas), kept);
  const fresh: UsageDelta[] = [];
  for (const d of deltas) {
    if (!d.target) add(d, OTHER_DOMAIN);
    else if (!near.has(usageKey(d.accountId, d.subject)) || present(d)) add(d, d.target);
    else fresh.push(d);
  }
  fresh.sort((x, y) => y.bytesUp + y.bytesDown - (x.bytesUp + x.bytesDown));
  const room = new Map<string, number>();
  for (const d of fresh) {
    const k = usageKey(d.accountId, d.subject);
    const left = room.get(k) ?? DOMAINS_PER_USER_DAY - (kept.get(k) ?? 0);
    room.set(k, left - 1);
    add(d, left > 0 ? d.target! : OTHER_DOMAIN);
  }
  return [...out.values()];
}

/**
 * An account's usage per domain over days [from, to), optionally of one subject: per subject and day the
 * DOMAINS_PER_USER_DAY largest by bytes keep their name, the rest (and OTHER_DOMAIN) are summed as OTHER_DOMAIN.
 * `?` placeholders: account, from, to, and the subject when `oneSubject`.
 */
export function domainQueryText(oneSubject: boolean): string {
  return `SELECT CASE WHEN domain = '' OR rank > ${DOMAINS_PER_USER_DAY} THEN '' ELSE domain END AS domain,
      SUM(bytes_up) AS bytes_up, SUM(bytes_down) AS bytes_down, SUM(connections) AS connections
    FROM (SELECT domain, SUM(bytes_up) AS bytes_up, SUM(bytes_down) AS bytes_down, SUM(connections) AS connections,
        ROW_NUMBER() OVER (PARTITION BY subject, day_ms ORDER BY CASE WHEN domain = '' THEN 1 ELSE 0 END, SUM(bytes_up + bytes_down) DESC, domain) AS rank
      FROM usage_domains WHERE account_id = ? AND day_ms >= ? AND day_ms < ?${oneSubject ? ' AND subject = ?' : ''}
      GROUP BY subject, day_ms, domain) per_day
    GROUP BY CASE WHEN domain = '' OR rank > ${DOMAINS_PER_USER_DAY} THEN '' ELSE domain END`;
}

export function toDomainRow(r: {
  domain: string;
  bytes_up: number | string;
  bytes_down: number | string;
  connections: number | string;
}): DomainUsageRow {
  return {
    domain: r.domain,
    bytesUp: Number(r.bytes_up),
    bytesDown: Number(r.bytes_down),
    connections: Number(r.connections),
  };
}
