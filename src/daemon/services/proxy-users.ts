// Proxy users: the rules for making one and for setting its password, the same from `proxyd admin` and the
// console. The username rule lives in the contract (src/contract/proxy-username.ts); the password is hashed
// here and shown to the caller once, never stored in the clear.
import { newProxyUsernameProblem } from '../../contract/proxy-username.js';
import { generatePassword, hashPassword } from '../secrets.js';
import type { ProxyUser, Store } from '../store/index.js';

export type CreateOutcome =
  | { ok: true; user: ProxyUser; password: string }
  | { ok: false; problem: 'invalid'; detail: string }
  | { ok: false; problem: 'exists' };

/** Creates a proxy user with the given password, or a generated one; the password is returned once. */
export async function createProxyUser(store: Store, accountId: number, username: string, password?: string | null): Promise<CreateOutcome> {
  const problem = newProxyUsernameProblem(username);
  if (problem) return { ok: false, problem: 'invalid', detail: problem };
  const clear = password ?? generatePassword();
  const created = await store.proxyUsers.create(accountId, username, await hashPassword(clear));
  if (created === 'exists') return { ok: false, problem: 'exists' };
  return { ok: true, user: created, password: clear };
}

/** A new generated password for an existing proxy user; returned once. */
export async function resetProxyUserPassword(store: Store, accountId: number, userId: number): Promise<string> {
  const password = generatePassword();
  await store.proxyUsers.setPassword(accountId, userId, await hashPassword(password));
  return password;
}
