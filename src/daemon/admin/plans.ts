// `proxyd admin plan set|show` (docs/admin.md, "plan"): an account's plan, and the limit flags it shares with
// `proxy-user set` (proxy-user.ts). Sizes as `50GiB`, `500MB` or bytes; `none` removes a limit.
import { formatIsoTime } from '../../contract/schemas.js';
import { parseIsoTime, timeFlagProblem } from '../../contract/time.js';
import { countLimit, rateLimit, sizeLimit } from '../services/limits.js';
import { NO_PLAN_PERIOD, periodUsed, planState, shownPeriodStart } from '../metering/plans.js';
import type { Plan, PlanPeriod, Store } from '../store/index.js';
import { auditDraft, operatorContext } from '../services/audit.js';
import { AdminError, requireAccount, requiredEmail } from './admin-kit.js';

export function sizeOrNone(v: string, what: string): number | null {
  const r = sizeLimit(v);
  if (!r.ok) throw new AdminError(`${what}: ${r.problem}`);
  return r.value;
}

export function countOrNone(v: string, what: string): number | null {
  const r = countLimit(v);
  if (!r.ok) throw new AdminError(`${what}: ${r.problem}`);
  return r.value;
}

export function rateOrNone(v: string, what: string): number | null {
  const r = rateLimit(v);
  if (!r.ok) throw new AdminError(`${what}: ${r.problem}`);
  return r.value;
}

const iso = (ms: number | null) => (ms === null ? null : formatIsoTime(ms));

/** The plan as printed by both commands; an account without one has no limits and a calendar month. */
async function planJson(store: Store, accountId: number) {
  const now = Date.now();
  const plan = (await store.plans.get(accountId)) ?? {
    accountId,
    trafficLimit: null,
    ...NO_PLAN_PERIOD,
    maxConnections: null,
    expiresAt: null,
  };
  const { used } = await periodUsed(store, plan, now);
  return {
    traffic_limit: plan.trafficLimit,
    period: plan.period,
    period_start: iso(await shownPeriodStart(store, accountId, plan, now)),
    used,
    max_connections: plan.maxConnections,
    expires_at: iso(plan.expiresAt),
    rate_limit: plan.rateLimit ?? null,
    state: planState(plan, used, now),
  };
}

export interface PlanSetOptions {
  email?: string;
  trafficLimit?: string;
  period?: string;
  maxConnections?: string;
  expires?: string;
  rateLimit?: string;
}

export async function planSet(store: Store, o: PlanSetOptions) {
  const a = await requireAccount(store, requiredEmail(o.email));
  const old = await store.plans.get(a.id);
  const day = Math.min(28, new Date(a.created_at * 1000).getUTCDate());
  const plan: Plan = old ?? {
    accountId: a.id,
    trafficLimit: null,
    period: 'month',
    anchorDay: day,
    maxConnections: null,
    expiresAt: null,
  };
  if (o.trafficLimit !== undefined) plan.trafficLimit = sizeOrNone(o.trafficLimit, '--traffic-limit');
  if (o.period !== undefined) {
    if (!['day', 'month', 'lifetime'].includes(o.period))
      throw new AdminError('--period: expected day, month or lifetime');
    plan.period = o.period as PlanPeriod;
  }
  if (o.maxConnections !== undefined) plan.maxConnections = countOrNone(o.maxConnections, '--max-connections');
  if (o.rateLimit !== undefined) plan.rateLimit = rateOrNone(o.rateLimit, '--rate-limit');
  if (o.expires !== undefined) {
    if (o.expires === 'never') plan.expiresAt = null;
    else {
      const t = parseIsoTime(o.expires);
      if (t === null)
        throw new AdminError(
          timeFlagProblem('--expires', o.expires, 'an ISO time such as 2027-01-31 or 2027-01-31T23:59:59Z, or never'),
        );
      plan.expiresAt = t;
    }
  }
  const details = {
    traffic_limit: plan.trafficLimit,
    period: plan.period,
    max_connections: plan.maxConnections,
    expires_at: iso(plan.expiresAt),
    rate_limit: plan.rateLimit ?? null,
  };
  await store.plans.set(plan, auditDraft(operatorContext(), 'plan.changed', null, details));
  return planJson(store, a.id);
}

export async function planShow(store: Store, o: { email?: string }) {
  const a = await requireAccount(store, requiredEmail(o.email));
  return planJson(store, a.id);
}
