// A proxy user with its settings (user_limits) as both backends read it: one mapping from a row to the domain type.
import { joinItems, splitItems } from './target-rules-sql.js';
import type { ProxyUserDetail, ProxyUserPatch, ProxyUserSettings } from './types.js';

export interface DetailRow {
  id: number;
  account_id: number;
  username: string;
  status: 'active' | 'disabled';
  created_at: number;
  traffic_limit: number | string | null;
  max_connections: number | null;
  rate_limit: number | string | null;
  expires_at_ms: number | string | null;
  allow: string | null;
  deny: string | null;
}

/** `u`: proxy_users, `l`: user_limits (a LEFT JOIN: a user without settings has none). */
export const DETAIL_COLUMNS =
  'u.id, u.account_id, u.username, u.status, u.created_at, l.traffic_limit, l.max_connections, l.rate_limit, l.expires_at_ms, l.allow, l.deny';

const num = (v: number | string | null): number | null => (v === null ? null : Number(v));

export function toDetail(r: DetailRow): ProxyUserDetail {
  return {
    id: Number(r.id),
    account_id: Number(r.account_id),
    username: r.username,
    status: r.status,
    created_at: Number(r.created_at),
    trafficLimit: num(r.traffic_limit),
    maxConnections: num(r.max_connections),
    rateLimit: num(r.rate_limit),
    expiresAt: num(r.expires_at_ms),
    allow: splitItems(r.allow ?? ''),
    deny: splitItems(r.deny ?? ''),
  };
}

/** The settings a patch leaves (absent fields keep `was`'s). */
export function patched(was: ProxyUserSettings, p: ProxyUserPatch): ProxyUserSettings {
  return {
    trafficLimit: p.trafficLimit !== undefined ? p.trafficLimit : was.trafficLimit,
    maxConnections: p.maxConnections !== undefined ? p.maxConnections : was.maxConnections,
    rateLimit: p.rateLimit !== undefined ? p.rateLimit : was.rateLimit,
    expiresAt: p.expiresAt !== undefined ? p.expiresAt : was.expiresAt,
    allow: p.allow ?? was.allow,
    deny: p.deny ?? was.deny,
  };
}

/** Whether the settings say anything (a user_limits row is written only then). */
export function hasSettings(s: ProxyUserSettings): boolean {
  return (
    s.trafficLimit !== null ||
    s.maxConnections !== null ||
    s.rateLimit !== null ||
    s.expiresAt !== null ||
    s.allow.length > 0 ||
    s.deny.length > 0
  );
}

/** The user_limits values of settings, in column order (traffic_limit, max_connections, rate_limit, expires_at_ms, allow, deny). */
export function limitValues(
  s: ProxyUserSettings,
): [number | null, number | null, number | null, number | null, string, string] {
  return [s.trafficLimit, s.maxConnections, s.rateLimit, s.expiresAt, joinItems(s.allow), joinItems(s.deny)];
}

/** Whether a patch changes any setting (a status change alone leaves user_limits, and the plan version, alone). */
export function touchesSettings(p: ProxyUserPatch): boolean {
  return (
    p.trafficLimit !== undefined ||
    p.maxConnections !== undefined ||
    p.rateLimit !== undefined ||
    p.expiresAt !== undefined ||
    p.allow !== undefined ||
    p.deny !== undefined
  );
}
