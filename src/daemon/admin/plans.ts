// `proxyd admin plan set|show` and `proxyd admin proxy-user set` (docs/admin.md, "plan"): an account's plan and its proxy
// users' limits inside it. Sizes as `50GiB`, `500MB` or bytes; `none` removes a limit.
import { formatIsoTime } from '../../contract/schemas.js';
import { parseIsoTime, timeFlagProblem } from '../../contract/time.js';
import { countLimit, rateLimit, sizeLimit } from '../services/limits.js';
import { NO_PLAN_PERIOD, periodUsed, planState, shownPeriodStart } from '../metering/plans.js';
import type { Plan, PlanPeriod, Store } from '../store/index.js';
import { auditDraft, operatorContext } from '../services/audit.js';
import { setProxyUserLimits } from '../services/proxy-users.js';
import { describeProblems } from '../services/target-rules.js';
import { parseRuleList } from '../../gateway/index.js';
import { AdminError, AdminUsageError, requireAccount, requiredEmail } from './commands.js';

function sizeOrNone(v: string, what: string): number | null {
  const r = sizeLimit(v);
  if (!r.ok) throw new AdminError(`${what}: ${r.problem}`);
  return r.value;
}

function countOrNone(v: string, what: string): number | null {
  const r = countLimit(v);
  if (!r.ok) throw new AdminError(`${what}: ${r.problem}`);
  return r.value;
}

function rateOrNone(v: string, what: string): number | null {
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

export async function proxyUserSet(
  store: Store,
  o: {
    email?: string;
    username?: string;
    trafficLimit?: string;
    maxConnections?: string;
    rateLimit?: string;
    expires?: string;
    allow?: string;
    deny?: string;
  },
) {
  const a = await requireAccount(store, requiredEmail(o.email));
  if (!o.username) throw new AdminUsageError('--username is required');
  const current = (await store.plans.userLimits(a.id)).find((u) => u.username === o.username);
  const limits = {
    trafficLimit:
      o.trafficLimit !== undefined ? sizeOrNone(o.trafficLimit, '--traffic-limit') : (current?.trafficLimit ?? null),
    maxConnections:
      o.maxConnections !== undefined
        ? countOrNone(o.maxConnections, '--max-connections')
        : (current?.maxConnections ?? null),
    rateLimit: o.rateLimit !== undefined ? rateOrNone(o.rateLimit, '--rate-limit') : (current?.rateLimit ?? null),
  };
  // The user's own expiry and target rules (docs/api.md, "Proxy users"), each checked before anything is written.
  const own: { expiresAt?: number | null; allow?: string[]; deny?: string[] } = {};
  if (o.expires !== undefined) {
    const t = o.expires === 'never' ? null : parseIsoTime(o.expires);
    if (t === null && o.expires !== 'never')
      throw new AdminError(timeFlagProblem('--expires', o.expires, 'an ISO 8601 time, or never'));
    own.expiresAt = t;
  }
  for (const list of ['allow', 'deny'] as const) {
    const v = o[list];
    if (v === undefined) continue;
    const r = parseRuleList(v);
    if (!r.ok) throw new AdminError(`--${list}: ${describeProblems(r.problems)}`);
    own[list] = r.items;
  }
  if (Object.keys(own).length === 0) {
    if (!(await setProxyUserLimits(store, a.id, o.username, limits, operatorContext())))
      throw new AdminError(`account ${o.email} has no proxy user ${o.username}`);
  } else {
    const patch = { ...limits, ...own };
    const details = {
      traffic_limit: limits.trafficLimit,
      max_connections: limits.maxConnections,
      rate_limit: limits.rateLimit,
      ...(own.expiresAt !== undefined
        ? { expires_at: own.expiresAt === null ? null : formatIsoTime(own.expiresAt) }
        : {}),
      ...(own.allow ? { allow: own.allow } : {}),
      ...(own.deny ? { deny: own.deny } : {}),
    };
    if (
      !(await store.proxyUsers.update(
        a.id,
        o.username,
        patch,
        auditDraft(operatorContext(), 'proxy_user.changed', o.username, details),
      ))
    )
      throw new AdminError(`account ${o.email} has no proxy user ${o.username}`);
  }
  const now = (await store.plans.userLimits(a.id)).find((u) => u.username === o.username);
  return {
    username: o.username,
    traffic_limit: limits.trafficLimit,
    max_connections: limits.maxConnections,
    rate_limit: limits.rateLimit,
    expires_at: now?.expiresAt != null ? formatIsoTime(now.expiresAt) : null,
    allow: now?.allow ?? [],
    deny: now?.deny ?? [],
  };
}
