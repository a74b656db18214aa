// The gateway's Admission over the store. Every decision reads the database, so a change made by any
// process (API, console, `proxyd admin`) applies to the next connection; only verified passwords are cached.
import { createHash } from 'node:crypto';
import type { Admission, AdmitResult } from '../gateway/types.js';
import { verifyPassword } from './secrets.js';
import type { Store } from './store/index.js';

const CACHE_MAX = 10_000;

export class StoreAdmission implements Admission {
  // key: username + SHA-256 of the presented password -> the stored hash it was verified against.
  // A password change alters the stored hash, so a stale entry can never match.
  private readonly verified = new Map<string, string>();

  constructor(private readonly store: Store) {}

  async admitByCredentials(username: string, password: string): Promise<AdmitResult> {
    const row = await this.store.proxyUsers.forAuth(username);
    const key = `${username}\0${createHash('sha256').update(password).digest('base64')}`;
    if (!row || this.verified.get(key) !== row.password_hash) {
      const ok = await verifyPassword(password, row?.password_hash ?? null);
      if (!ok || !row) return { ok: false, reason: 'bad_credentials' };
      if (this.verified.size >= CACHE_MAX) this.verified.clear();
      this.verified.set(key, row.password_hash);
    }
    if (row.status !== 'active') return { ok: false, reason: 'bad_credentials' };
    if (row.account_status !== 'active') return { ok: false, reason: 'account_inactive' };
    return { ok: true, accountId: row.account_id };
  }

  async admitBySourceIp(ipv4: string): Promise<AdmitResult> {
    const r = await this.store.whitelist.admissionByIp(ipv4);
    if (!r || !r.entryActive) return { ok: false, reason: 'not_whitelisted' };
    if (!r.accountActive) return { ok: false, reason: 'account_inactive' };
    return { ok: true, accountId: r.accountId };
  }
}
