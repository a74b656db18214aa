// Plans and user limits as rows, shared by both backends: one mapping from a row to the domain type.
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
}

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
});
