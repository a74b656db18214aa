// `proxyd admin account create|set|reset-2fa` (docs/admin.md, "account"): accounts made and changed by the operator.
import { isEmailAddress } from '../../contract/email.js';
import { isoSeconds } from '../../contract/schemas.js';
import type { Account, AccountStatus } from '../store/index.js';
import { createAccount, setAccountStatus, setVerification } from '../services/account.js';
import { auditDraft, operatorContext } from '../services/audit.js';
import { AdminError, AdminUsageError, readPassword, requireAccount, type AdminDeps } from './admin-kit.js';

function accountJson(a: Account) {
  return {
    account_id: a.id,
    email: a.email,
    status: a.status,
    verified: a.verified,
    created_at: isoSeconds(a.created_at),
  };
}

export async function accountCreate(
  deps: AdminDeps,
  o: { email: string; password?: string; passwordStdin?: boolean; verified?: boolean },
) {
  if (!isEmailAddress(o.email)) throw new AdminError(`not an email address: ${o.email}`);
  const pw = (await readPassword(deps, o, true))!;
  const created = await createAccount(deps.store, o.email, pw, o.verified === true, operatorContext());
  if (created === 'exists') throw new AdminError(`an account with email ${o.email} already exists`);
  return { account_id: created.id, email: created.email };
}

function parseBool(s: string, what: string): boolean {
  if (s === 'true' || s === '1' || s === 'yes') return true;
  if (s === 'false' || s === '0' || s === 'no') return false;
  throw new AdminError(`${what}: expected true or false, got "${s}"`);
}

export async function accountSet(deps: AdminDeps, o: { email: string; status?: string; verified?: string }) {
  const a = await requireAccount(deps.store, o.email);
  if (o.status === undefined && o.verified === undefined)
    throw new AdminUsageError('nothing to set: give --status and/or --verified');
  const ctx = operatorContext();
  if (o.status !== undefined) {
    if (!['active', 'suspended', 'closed'].includes(o.status))
      throw new AdminError(`--status: expected active, suspended or closed, got "${o.status}"`);
    await setAccountStatus(deps.store, a, o.status as AccountStatus, ctx);
  }
  if (o.verified !== undefined) await setVerification(deps.store, a, parseBool(o.verified, '--verified'), ctx);
  return accountJson((await deps.store.accounts.get(a.id))!);
}

/** Turns the account's second factor off (a customer who lost every factor and recovery code); recorded. */
export async function accountReset2fa(deps: AdminDeps, o: { email: string }) {
  const a = await requireAccount(deps.store, o.email);
  const was = await deps.store.secondFactors.disable(a.id, auditDraft(operatorContext(), '2fa.reset'));
  return { email: a.email, second_factor: 'off', was_on: was };
}
