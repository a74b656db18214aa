// `proxyd admin proxy-user create|set` (docs/admin.md, "proxy-user", "proxy-user set"): gateway credentials, and a
// proxy user's own limits, expiry and target rules inside the account's plan.
import { formatIsoTime } from '../../contract/schemas.js';
import { parseIsoTime, timeFlagProblem } from '../../contract/time.js';
import { parseRuleList } from '../../gateway/index.js';
import type { ProxyUserSettingFlags } from '../../contract/proxy-schemas.js';
import type { Store } from '../store/index.js';
import { auditDraft, operatorContext } from '../services/audit.js';
import { createProxyUser, setProxyUserLimits } from '../services/proxy-users.js';
import { describeProblems } from '../services/target-rules.js';
import {
  AdminError,
  AdminUsageError,
  readPassword,
  requireAccount,
  requiredEmail,
  type AdminDeps,
} from './admin-kit.js';
import { countOrNone, rateOrNone, sizeOrNone } from './plans.js';

export async function proxyUserCreate(
  deps: AdminDeps,
  o: { email: string; username: string; passwordStdin?: boolean },
) {
  const a = await requireAccount(deps.store, o.email);
  const given = await readPassword(deps, { passwordStdin: o.passwordStdin }, false);
  const r = await createProxyUser(deps.store, a.id, o.username, given, operatorContext());
  if (!r.ok)
    throw new AdminError(r.problem === 'exists' ? `proxy user ${o.username} already exists` : `username: ${r.detail}`);
  return { username: o.username, password: r.password };
}

export async function proxyUserSet(store: Store, o: ProxyUserSettingFlags & { email?: string; username?: string }) {
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
