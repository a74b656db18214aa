// The gateway's Admitter over the admission view: no database query on the connection path. The view
// follows the change log, so a change made by any process (API, console, `proxyd admin`, another node)
// applies to new connections within the poll interval; only verified passwords are cached.
import { hash } from 'node:crypto';
import type { AdmitResult, Admitter } from '../../gateway/types.js';
import { verifyPassword } from '../secrets.js';
import { FailureBudget } from './failure-budget.js';
import type { AdmissionUser, AdmissionView } from './view.js';

// Room for every proxy user of a large fleet (10,000s) with one verified password each.
const CACHE_MAX = 100_000;

export class ViewAdmission implements Admitter {
  // key: username + SHA-256 of the presented password -> the stored hash it was verified against.
  // A password change alters the stored hash, so a stale entry can never match.
  private readonly verified = new Map<string, string>();
  // Checks in flight, by that key and the stored hash: connections that present one password at once (a
  // client's pool reconnecting after a restart) wait for one check instead of each drawing on the budgets.
  private readonly checking = new Map<string, Promise<boolean | 'skipped'>>();

  constructor(
    private readonly view: AdmissionView,
    /** What checking passwords that are not in the cache may cost (failure-budget.ts). */
    readonly budget = new FailureBudget(),
  ) {}

  /** At once for credentials verified before (the cache); a promise only when a password is hashed. */
  admitByCredentials(
    written: string,
    password: string,
    baseUsername?: string,
    sourceIp?: string | null,
  ): AdmitResult | Promise<AdmitResult> {
    this.view.assertAdmitting();
    // A user named exactly as written wins over the base user its session parameters name.
    let username = written;
    let row = this.view.userForAuth(username);
    if (!row && baseUsername) row = this.view.userForAuth((username = baseUsername));
    // One-shot hash: no Hash object per connection.
    const key = `${username}\0${hash('sha256', password, 'base64')}`;
    if (row && this.verified.get(key) === row.password_hash) return statusOf(row, username);
    return this.verify(row, username, key, password, sourceIp ?? null);
  }

  private async verify(
    row: AdmissionUser | null,
    username: string,
    key: string,
    password: string,
    sourceIp: string | null,
  ): Promise<AdmitResult> {
    const stored = row?.password_hash ?? null;
    const same = `${key}\0${stored ?? ''}`;
    let check = this.checking.get(same);
    if (!check) {
      check = this.budget
        .run(sourceIp, username, () => verifyPassword(password, stored))
        .finally(() => this.checking.delete(same));
      this.checking.set(same, check);
    }
    const ok = await check;
    // The client hears the same 407 for all three; the connection log tells them apart. A refusal whose
    // password was never compared (the failure budget is spent) is not called a wrong password.
    if (ok === 'skipped')
      return { ok: false, reason: 'login_throttled', ...(row ? { accountId: row.account_id } : {}) };
    if (!row) return { ok: false, reason: 'unknown_user' };
    if (!ok) return { ok: false, reason: 'wrong_password', accountId: row.account_id };
    // Cached against the hash just verified: a password change meanwhile leaves the entry unmatched.
    if (this.verified.size >= CACHE_MAX) this.verified.clear();
    this.verified.set(key, row.password_hash);
    return statusOf(row, username);
  }

  admitBySourceIp(ipv4: string): AdmitResult {
    this.view.assertAdmitting();
    const r = this.view.admissionByIp(ipv4);
    if (!r) return { ok: false, reason: 'not_whitelisted' };
    if (!r.entryActive) return { ok: false, reason: 'whitelist_entry_disabled', accountId: r.accountId };
    if (!r.accountActive) return { ok: false, reason: 'account_inactive', accountId: r.accountId };
    return { ok: true, accountId: r.accountId };
  }
}

/** A user whose password matched: admitted unless it or its account is disabled. */
function statusOf(row: AdmissionUser, username: string): AdmitResult {
  if (row.status !== 'active') return { ok: false, reason: 'user_disabled', accountId: row.account_id };
  if (row.account_status !== 'active') return { ok: false, reason: 'account_inactive', accountId: row.account_id };
  return { ok: true, accountId: row.account_id, user: username };
}
