// Proxy users: the rules for making one and for setting its password, the same from `proxyd admin` and the
// console. The username rule lives in the contract (src/contract/proxy-username.ts); the password is hashed
// here and shown to the caller once, never stored in the clear.
import { newProxyUsernameProblem } from '../../contract/proxy-username.js';
import { generatePassword, hashPassword } from '../secrets.js';
import type { ProxyUser, Store } from '../store/index.js';
import { auditDraft, type AuditContext } from './audit.js';

export type CreateOutcome =
  | { ok: true; user: ProxyUser; password: string }
  | { ok: false; problem: 'invalid'; detail: string }
  | { ok: false; problem: 'exists' };

/** Creates a proxy user with the given password, or a generated one; the password is returned once. */
export async function createProxyUser(store: Store, accountId: number, username: string, password?: string | null, ctx?: AuditContext): Promise<CreateOutcome> {
  const problem = newProxyUsernameProblem(username);
  if (problem) return { ok: false, problem: 'invalid', detail: problem };
  const clear = password ?? generatePassword();
  const created = await store.proxyUsers.create(accountId, username, await hashPassword(clear), ctx && auditDraft(ctx, 'proxy_user.created', username, { password: password ? 'chosen' : 'generated' }));
  if (created === 'exists') return { ok: false, problem: 'exists' };
  return { ok: true, user: created, password: clear };
}

/** A new generated password for an existing proxy user; returned once. */
export async function resetProxyUserPassword(store: Store, accountId: number, user: Pick<ProxyUser, 'id' | 'username'>, ctx?: AuditContext): Promise<string> {
  const password = generatePassword();
  await store.proxyUsers.setPassword(accountId, user.id, await hashPassword(password), ctx && auditDraft(ctx, 'proxy_user.password_rotated', user.username));
  return password;
}

/** Deletes the account's proxy user; false when it is not the account's (nothing recorded). */
export function deleteProxyUser(store: Store, accountId: number, user: Pick<ProxyUser, 'id' | 'username'>, ctx?: AuditContext): Promise<boolean> {
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
  const details = { traffic_limit: limits.trafficLimit, max_connections: limits.maxConnections, rate_limit: limits.rateLimit };
  return store.plans.setUserLimits(accountId, username, limits, ctx && auditDraft(ctx, 'proxy_user.changed', username, details));
}
