// Usage buckets, shared by both backends: which bucket a flush lands in, and the read queries.
import type { UsagePeriod, UsageRow } from './types.js';

export const PERIOD_MS: Record<UsagePeriod, number> = { minute: 60_000, hour: 3_600_000, day: 86_400_000 };
export const PERIODS = Object.keys(PERIOD_MS) as UsagePeriod[];

/** How long an applied flush's id is kept: a flush is never sent again after that long. */
export const FLUSH_ID_KEEP_MS = 86_400_000;

/** How long buckets are kept unless `--usage-retention` says otherwise. */
export const DEFAULT_USAGE_RETENTION_MS: Record<UsagePeriod, number> = {
  minute: 48 * 3_600_000,
  hour: 90 * 86_400_000,
  day: 2 * 365 * 86_400_000,
};

/** The start of the `period` bucket holding `atMs` (UTC). */
export function bucketStart(period: UsagePeriod, atMs: number): number {
  return Math.floor(atMs / PERIOD_MS[period]) * PERIOD_MS[period];
}

/** `?` placeholders: account, period, from, to. */
export function usageQueryText(by: 'time' | 'subject'): string {
  const key = by === 'time' ? 'start_ms' : 'subject';
  const other = by === 'time' ? 'NULL AS subject' : 'MIN(start_ms) AS start_ms';
  return `SELECT ${key}, ${other}, SUM(bytes_up) AS bytes_up, SUM(bytes_down) AS bytes_down, SUM(connections) AS connections
    FROM usage_buckets WHERE account_id = ? AND period = ? AND start_ms >= ? AND start_ms < ? GROUP BY ${key} ORDER BY ${key}`;
}

export function toUsageRow(r: { start_ms: number | string; subject: string | null; bytes_up: number | string; bytes_down: number | string; connections: number | string }): UsageRow {
  return { startMs: Number(r.start_ms), subject: r.subject, bytesUp: Number(r.bytes_up), bytesDown: Number(r.bytes_down), connections: Number(r.connections) };
}
