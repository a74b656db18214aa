// Proxy users: the rules for making one and for setting its password, the same from `proxyd admin` and the
// console. The username rule lives in the contract (src/contract/proxy-username.ts); the password is hashed
// here and shown to the caller once, never stored in the clear.
import { subjectUser, userSubject } from '../../rules/usage-key.js';
import { DAY_MS } from '../../rules/time.js';
import { Code } from '../../contract/codes.js';
import { newProxyUsernameProblem } from '../../contract/proxy-username.js';
import { formatRate } from '../../contract/rate.js';
import { formatIsoTime, isoSeconds } from '../../contract/schemas.js';
import { shownPeriodStart } from '../metering/plans.js';
import { generatePassword, hashPassword } from '../secrets.js';
import {
  StoreUnavailableError,
  type ProxyUser,
  type ProxyUserDetail,
  type ProxyUserPatch,
  type ProxyUserSettings,
  type Store,
} from '../store/index.js';
import { bucketStart } from '../store/usage-sql.js';
import { auditDraft, type AuditContext } from './audit.js';
import type { NewUserInput } from './proxy-user-input.js';

export type CreateOutcome =
  | { ok: true; user: ProxyUser; password: string }
  | { ok: false; problem: 'invalid'; detail: string }
  | { ok: false; problem: 'exists' };

/** Creates a proxy user with the given password, or a generated one; the password is returned once. */
export async function createProxyUser(
  store: Store,
  accountId: number,
  username: string,
  password?: string | null,
  ctx?: AuditContext,
): Promise<CreateOutcome> {
  const problem = newProxyUsernameProblem(username);
  if (problem) return { ok: false, problem: 'invalid', detail: problem };
  const clear = password ?? generatePassword();
  const created = await store.proxyUsers.create(
    accountId,
    username,
    await hashPassword(clear),
    ctx && auditDraft(ctx, 'proxy_user.created', username, { password: password ? 'chosen' : 'generated' }),
  );
  if (created === 'exists') return { ok: false, problem: 'exists' };
  return { ok: true, user: created, password: clear };
}

/** A new generated password for an existing proxy user; returned once. */
export async function resetProxyUserPassword(
  store: Store,
  accountId: number,
  user: Pick<ProxyUser, 'id' | 'username'>,
  ctx?: AuditContext,
): Promise<string> {
  const password = generatePassword();
  await store.proxyUsers.setPassword(
    accountId,
    user.id,
    await hashPassword(password),
    ctx && auditDraft(ctx, 'proxy_user.password_rotated', user.username),
  );
  return password;
}

/** Deletes the account's proxy user; false when it is not the account's (nothing recorded). */
export function deleteProxyUser(
  store: Store,
  accountId: number,
  user: Pick<ProxyUser, 'id' | 'username'>,
  ctx?: AuditContext,
): Promise<boolean> {
  return store.proxyUsers.delete(accountId, user.id, ctx && auditDraft(ctx, 'proxy_user.deleted', user.username));
}

/** A proxy user's limits inside its account's plan (null: none); false when the account has no such user. */
export function setProxyUserLimits(
  store: Store,
  accountId: number,
  username: string,
  limits: { trafficLimit: number | null; maxConnections: number | null; rateLimit: number | null },
  ctx?: AuditContext,
): Promise<boolean> {
  const details = {
    traffic_limit: limits.trafficLimit,
    max_connections: limits.maxConnections,
    rate_limit: limits.rateLimit,
  };
  return store.plans.setUserLimits(
    accountId,
    username,
    limits,
    ctx && auditDraft(ctx, 'proxy_user.changed', username, details),
  );
}

// ---- the customer API (docs/api.md, "Proxy users") ------------------------------------------------------------

/** USER as the API answers it. */
export interface UserJson {
  username: string;
  status: 'active' | 'disabled';
  created_at: string;
  traffic_limit: number | null;
  max_connections: number | null;
  rate_limit: string | null;
  expires_at: string | null;
  allow: string[];
  deny: string[];
  used: { bytes_up: number; bytes_down: number; period_start: string };
}

export function userJson(
  u: ProxyUserDetail,
  used: { bytesUp: number; bytesDown: number },
  periodStartMs: number,
): UserJson {
  return {
    username: u.username,
    status: u.status,
    created_at: isoSeconds(u.created_at),
    traffic_limit: u.trafficLimit,
    max_connections: u.maxConnections,
    rate_limit: u.rateLimit === null ? null : formatRate(u.rateLimit),
    expires_at: u.expiresAt === null ? null : formatIsoTime(u.expiresAt),
    allow: u.allow,
    deny: u.deny,
    used: { bytes_up: used.bytesUp, bytes_down: used.bytesDown, period_start: formatIsoTime(periodStartMs) },
  };
}

/** What each user of the account used in its current period (the plan's, or the calendar month's), by username. */
async function usedInPeriod(
  store: Store,
  accountId: number,
  nowMs: number,
  only?: string,
): Promise<{ start: number; used: Map<string, { bytesUp: number; bytesDown: number }> }> {
  const plan = await store.plans.get(accountId);
  const start = await shownPeriodStart(store, accountId, plan, nowMs);
  const rows = await store.usage.query({
    accountId,
    period: 'day',
    fromMs: bucketStart('day', start),
    toMs: bucketStart('day', nowMs) + DAY_MS,
    by: 'subject',
    ...(only !== undefined ? { subject: userSubject(only) } : {}),
  });
  const used = new Map<string, { bytesUp: number; bytesDown: number }>();
  for (const r of rows) {
    const user = subjectUser(r.subject);
    if (user !== null) used.set(user, { bytesUp: r.bytesUp, bytesDown: r.bytesDown });
  }
  return { start, used };
}

const NONE_USED = { bytesUp: 0, bytesDown: 0 };

export async function listUsers(
  store: Store,
  accountId: number,
  q: { page: number; pageSize: number; status?: 'active' | 'disabled' | undefined; prefix?: string | undefined },
  nowMs: number,
): Promise<{ items: UserJson[]; page: number; page_size: number; total: number }> {
  const [{ items, total }, usage] = await Promise.all([
    store.proxyUsers.page(accountId, {
      status: q.status,
      prefix: q.prefix,
      limit: q.pageSize,
      offset: (q.page - 1) * q.pageSize,
    }),
    usedInPeriod(store, accountId, nowMs),
  ]);
  return {
    items: items.map((u) => userJson(u, usage.used.get(u.username) ?? NONE_USED, usage.start)),
    page: q.page,
    page_size: q.pageSize,
    total,
  };
}

/** The account's user, or null when absent or another account's (the same answer). */
export async function showUser(
  store: Store,
  accountId: number,
  username: string,
  nowMs: number,
): Promise<UserJson | null> {
  const u = await store.proxyUsers.detail(accountId, username);
  if (!u) return null;
  const usage = await usedInPeriod(store, accountId, nowMs, username);
  return userJson(u, usage.used.get(username) ?? NONE_USED, usage.start);
}

async function withUsage(store: Store, u: ProxyUserDetail, nowMs: number): Promise<UserJson> {
  const usage = await usedInPeriod(store, u.account_id, nowMs, u.username);
  return userJson(u, usage.used.get(u.username) ?? NONE_USED, usage.start);
}

/** The settings a record names (never a password). */
function settingsDetails(s: Partial<ProxyUserSettings> & { status?: string }): Record<string, unknown> {
  const d: Record<string, unknown> = {};
  if (s.status !== undefined) d.status = s.status;
  if (s.trafficLimit !== undefined) d.traffic_limit = s.trafficLimit;
  if (s.maxConnections !== undefined) d.max_connections = s.maxConnections;
  if (s.rateLimit !== undefined) d.rate_limit = s.rateLimit;
  if (s.expiresAt !== undefined) d.expires_at = s.expiresAt === null ? null : formatIsoTime(s.expiresAt);
  if (s.allow !== undefined) d.allow = s.allow;
  if (s.deny !== undefined) d.deny = s.deny;
  return d;
}

export type ApiCreateOutcome = { ok: true; user: UserJson; password: string } | { ok: false; problem: 'exists' };

/** A user with its status and settings (input checked by proxy-user-input.ts); the password is returned once. */
export async function createUserWithSettings(
  store: Store,
  accountId: number,
  input: NewUserInput,
  nowMs: number,
  ctx?: AuditContext,
  hashed?: string,
): Promise<ApiCreateOutcome> {
  const clear = input.password ?? generatePassword();
  const details = {
    password: input.password ? 'chosen' : 'generated',
    ...settingsDetails({ ...input.settings, status: input.status }),
  };
  const created = await store.proxyUsers.createDetailed(
    accountId,
    input.username,
    hashed ?? (await hashPassword(clear)),
    input.status,
    input.settings,
    ctx && auditDraft(ctx, 'proxy_user.created', input.username, details),
  );
  if (created === 'exists') return { ok: false, problem: 'exists' };
  return {
    ok: true,
    user: userJson(created, NONE_USED, (await usedInPeriod(store, accountId, nowMs, input.username)).start),
    password: clear,
  };
}

export interface UserBatchResult {
  success_count: number;
  failed_count: number;
  failed_items: Array<{ username: string | null; code: number; reason: string }>;
  created: Array<{ username: string; password: string }>;
}

/**
 * A batch of new users, each on its own (docs/api.md, "Create many"): a refused item (a bad value: 10400 naming
 * the field; taken, or twice in the batch: 10409; the database busy: 10500) undoes nothing before it. Passwords are
 * hashed for the whole batch at once (the thread pool's work), then the users written in order.
 */
export async function createUsersBatch(
  store: Store,
  accountId: number,
  items: ReadonlyArray<
    { ok: true; value: NewUserInput } | { ok: false; username: string | null; field: string; problem: string }
  >,
  nowMs: number,
  ctx?: AuditContext,
): Promise<UserBatchResult> {
  const out: UserBatchResult = { success_count: 0, failed_count: 0, failed_items: [], created: [] };
  const clear = items.map((i) => (i.ok ? (i.value.password ?? generatePassword()) : ''));
  const hashes = await Promise.all(items.map((i, n) => (i.ok ? hashPassword(clear[n]!) : Promise.resolve(''))));
  const seen = new Set<string>();
  const fail = (username: string | null, code: number, reason: string): void => {
    out.failed_count++;
    out.failed_items.push({ username, code, reason });
  };
  for (let n = 0; n < items.length; n++) {
    const item = items[n]!;
    if (!item.ok) {
      fail(item.username, Code.INVALID_PARAMS, `invalid parameters: ${item.field} (${item.problem})`);
      continue;
    }
    const input = item.value;
    if (seen.has(input.username)) {
      fail(input.username, Code.CONFLICT, 'username taken (twice in this request)');
      continue;
    }
    seen.add(input.username);
    try {
      const details = {
        password: input.password ? 'chosen' : 'generated',
        ...settingsDetails({ ...input.settings, status: input.status }),
      };
      const created = await store.proxyUsers.createDetailed(
        accountId,
        input.username,
        hashes[n]!,
        input.status,
        input.settings,
        ctx && auditDraft(ctx, 'proxy_user.created', input.username, details),
      );
      if (created === 'exists') {
        fail(input.username, Code.CONFLICT, 'username taken');
        continue;
      }
      out.success_count++;
      out.created.push({ username: input.username, password: clear[n]! });
    } catch (e) {
      if (!(e instanceof StoreUnavailableError) && !isBusy(e)) throw e;
      fail(input.username, Code.SYSTEM, 'temporary failure: send this item again');
    }
  }
  return out;
}

function isBusy(e: unknown): boolean {
  const code = (e as { code?: string }).code ?? '';
  return code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED');
}

/** Applies a change; null when the account has no such user (nothing recorded). */
export async function updateUser(
  store: Store,
  accountId: number,
  username: string,
  patch: ProxyUserPatch,
  nowMs: number,
  ctx?: AuditContext,
): Promise<UserJson | null> {
  const u = await store.proxyUsers.update(
    accountId,
    username,
    patch,
    ctx && auditDraft(ctx, 'proxy_user.changed', username, settingsDetails(patch)),
  );
  return u && withUsage(store, u, nowMs);
}

/** A new password (given, or generated) for the account's user; null when it has none of that name. */
export async function rotateUserPassword(
  store: Store,
  accountId: number,
  username: string,
  password: string | null,
  ctx?: AuditContext,
): Promise<string | null> {
  const u = await store.proxyUsers.detail(accountId, username);
  if (!u) return null;
  const clear = password ?? generatePassword();
  const ok = await store.proxyUsers.setPassword(
    accountId,
    u.id,
    await hashPassword(clear),
    ctx && auditDraft(ctx, 'proxy_user.password_rotated', username, { password: password ? 'chosen' : 'generated' }),
  );
  return ok ? clear : null;
}

/** Deletes the account's user by name; false when it has none of that name. */
export async function deleteUserByName(
  store: Store,
  accountId: number,
  username: string,
  ctx?: AuditContext,
): Promise<boolean> {
  const u = await store.proxyUsers.detail(accountId, username);
  return !!u && deleteProxyUser(store, accountId, u, ctx);
}
