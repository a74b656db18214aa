// Plans and user limits as rows, shared by both backends: one mapping from a row to the domain type.
import { splitItems } from './target-rules-sql.js';
import type { Plan, PlanPeriod, UserLimits } from './types.js';

export interface PlanRow {
  account_id: number;
  traffic_limit: number | null;
  period: PlanPeriod;
  anchor_day: number;
  max_connections: number | null;
  expires_at_ms: number | null;
  rate_limit: number | null;
}
export interface UserRow {
  account_id: number;
  username: string;
  traffic_limit: number | null;
  max_connections: number | null;
  rate_limit: number | null;
  expires_at_ms: number | null;
  allow: string | null;
  deny: string | null;
}

/** The user_limits columns a user's limits are read from (`l`: user_limits, `u`: proxy_users). */
export const USER_LIMIT_COLUMNS =
  'u.account_id, u.username, l.traffic_limit, l.max_connections, l.rate_limit, l.expires_at_ms, l.allow, l.deny';
/** A user_limits row that says something (the others are what no row says). */
export const USER_LIMITED =
  "(l.traffic_limit IS NOT NULL OR l.max_connections IS NOT NULL OR l.rate_limit IS NOT NULL OR l.expires_at_ms IS NOT NULL OR l.allow <> '' OR l.deny <> '')";

export const toPlan = (r: PlanRow): Plan => ({
  accountId: Number(r.account_id),
  trafficLimit: r.traffic_limit === null ? null : Number(r.traffic_limit),
  period: r.period,
  anchorDay: Number(r.anchor_day),
  maxConnections: r.max_connections === null ? null : Number(r.max_connections),
  expiresAt: r.expires_at_ms === null ? null : Number(r.expires_at_ms),
  rateLimit: r.rate_limit === null ? null : Number(r.rate_limit),
});
export const toUserLimits = (r: UserRow): UserLimits => ({
  accountId: Number(r.account_id),
  username: r.username,
  trafficLimit: r.traffic_limit === null ? null : Number(r.traffic_limit),
  maxConnections: r.max_connections === null ? null : Number(r.max_connections),
  rateLimit: r.rate_limit === null ? null : Number(r.rate_limit),
  expiresAt: r.expires_at_ms == null ? null : Number(r.expires_at_ms),
  allow: splitItems(r.allow ?? ''),
  deny: splitItems(r.deny ?? ''),
});
