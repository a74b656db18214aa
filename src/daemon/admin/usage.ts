// `proxyd admin usage`: an account's metered usage (docs/admin.md), by proxy user or by minute, hour or day,
// as JSON, CSV or a table (the report itself: services/usage.ts).
import { parseIsoTime, timeFlagProblem } from '../../contract/time.js';
import { DAY_MS, HOUR_MS } from '../../rules/time.js';
import { readUsageRetention, usageReport, usageText, type UsageBy, type UsageReport } from '../services/usage.js';
import type { Store } from '../store/index.js';
import { AdminError, AdminUsageError, requireAccount, requiredEmail } from './admin-kit.js';

export interface UsageOptions {
  email?: string;
  by?: string;
  from?: string;
  to?: string;
  format?: string;
  usageRetention?: string;
}

const DEFAULT_SPAN_MS: Record<UsageBy, number> = {
  minute: HOUR_MS,
  hour: DAY_MS,
  day: 30 * DAY_MS,
  user: 30 * DAY_MS,
};

function parseTime(s: string, what: string): number {
  const t = parseIsoTime(s);
  if (t === null)
    throw new AdminError(timeFlagProblem(what, s, 'an ISO time such as 2026-11-25 or 2026-11-25T00:00:00Z'));
  return t;
}

function retentionOf(s: string): Record<'minute' | 'hour' | 'day', number> {
  const r = readUsageRetention(s);
  if (typeof r === 'string') throw new AdminUsageError(r);
  return r;
}

export async function adminUsage(store: Store, o: UsageOptions, nowMs = Date.now()): Promise<UsageReport> {
  const email = requiredEmail(o.email);
  // What the options say is checked before the account is looked up: a bad option is said as such.
  const by = (o.by ?? 'user') as UsageBy;
  if (!['user', 'minute', 'hour', 'day'].includes(by)) throw new AdminError('--by: expected user, minute, hour or day');
  const toMs = o.to !== undefined ? parseTime(o.to, '--to') : nowMs;
  const fromMs = o.from !== undefined ? parseTime(o.from, '--from') : toMs - DEFAULT_SPAN_MS[by];
  if (fromMs >= toMs) throw new AdminError('--from must be before --to');
  const retention = o.usageRetention === undefined ? undefined : retentionOf(o.usageRetention);
  const account = await requireAccount(store, email);
  return usageReport(store, account.id, by, fromMs, toMs, nowMs, retention);
}

/** The report in the format asked for (`json` default, `csv`, `table`). */
export function renderUsage(r: UsageReport, format = 'json'): string {
  if (format === 'json') return `${JSON.stringify(r)}\n`;
  if (format !== 'csv' && format !== 'table') throw new AdminError('--format: expected json, csv or table');
  return usageText(r, format);
}
