// An account's own settings, the same from the console and `proxyd admin`: password, email, status, verification,
// each written with its audit record.
import { isEmailAddress } from '../../contract/email.js';
import { hashPassword } from '../secrets.js';
import type { Account, AccountStatus, Store } from '../store/index.js';
import { auditDraft, type AuditAction, type AuditContext } from './audit.js';

export async function createAccount(
  store: Store,
  email: string,
  password: string,
  verified: boolean,
  ctx?: AuditContext,
): Promise<Account | 'exists'> {
  return store.accounts.create(
    email,
    await hashPassword(password),
    verified,
    ctx && auditDraft(ctx, 'account.created', email, { verified }),
  );
}

/** Sets the console password (already checked against the password rule). */
export async function changePassword(
  store: Store,
  accountId: number,
  password: string,
  ctx?: AuditContext,
): Promise<void> {
  await store.accounts.setPasswordHash(
    accountId,
    await hashPassword(password),
    ctx && auditDraft(ctx, 'account.password_changed'),
  );
}

export type EmailChange = { ok: true } | { ok: false; problem: 'invalid' | 'exists' | 'same' };

/** A new sign-in email; refused when it is not an address, unchanged, or another account's. */
export async function changeEmail(
  store: Store,
  account: Account,
  email: string,
  ctx?: AuditContext,
): Promise<EmailChange> {
  if (!isEmailAddress(email)) return { ok: false, problem: 'invalid' };
  if (email.toLowerCase() === account.email.toLowerCase()) return { ok: false, problem: 'same' };
  const r = await store.accounts.setEmail(
    account.id,
    email,
    ctx && auditDraft(ctx, 'account.email_changed', email, { from: account.email, to: email }),
  );
  return r === 'ok' ? { ok: true } : { ok: false, problem: 'exists' };
}

const STATUS_ACTION: Record<AccountStatus, AuditAction> = {
  active: 'account.reactivated',
  suspended: 'account.suspended',
  closed: 'account.closed',
};

/** A new account status (unchanged: nothing written, nothing recorded). */
export async function setAccountStatus(
  store: Store,
  account: Account,
  status: AccountStatus,
  ctx?: AuditContext,
): Promise<void> {
  if (account.status === status) return;
  await store.accounts.setStatus(
    account.id,
    status,
    ctx && auditDraft(ctx, STATUS_ACTION[status], null, { from: account.status, to: status }),
  );
}

export async function setVerification(
  store: Store,
  account: Account,
  verified: boolean,
  ctx?: AuditContext,
): Promise<void> {
  if (account.verified === verified) return;
  await store.accounts.setVerified(
    account.id,
    verified,
    ctx && auditDraft(ctx, 'account.verification_changed', null, { verified }),
  );
}
