// `proxyd admin token reset|disable` (docs/admin.md, "token"): an account's API token.
import { operatorContext } from '../services/audit.js';
import { disableToken, resetToken } from '../services/tokens.js';
import { AdminError, requireAccount, type AdminDeps } from './admin-kit.js';

export async function tokenReset(deps: AdminDeps, o: { email: string }) {
  const a = await requireAccount(deps.store, o.email);
  return { token: (await resetToken(deps.store, a.id, operatorContext())).token };
}

export async function tokenDisable(deps: AdminDeps, o: { email: string }) {
  const a = await requireAccount(deps.store, o.email);
  const key = await disableToken(deps.store, a.id, operatorContext());
  if (!key) throw new AdminError(`account ${o.email} has no active token`);
  return { access_key: key, status: 'disabled' };
}
