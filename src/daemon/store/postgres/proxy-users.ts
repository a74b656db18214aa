// Proxy users (PostgreSQL).
import type { AuditDraft, ProxyUser, ProxyUserStore } from '../types.js';
import { audited } from './audit.js';
import { guard } from './db.js';
import { PgFamily } from './family.js';

export class PgProxyUserStore extends PgFamily implements ProxyUserStore {
  async create(accountId: number, username: string, passwordHash: string, audit?: AuditDraft): Promise<ProxyUser | 'exists'> {
    const now = this.nowSec();
    const [u] = await audited(
      this.sql,
      this.nowMs,
      accountId,
      audit,
      (q) => q<ProxyUser[]>`
        INSERT INTO proxy_users (account_id, username, password_hash, status, created_at, updated_at)
        VALUES (${accountId}, ${username}, ${passwordHash}, 'active', ${now}, ${now})
        ON CONFLICT (username) DO NOTHING
        RETURNING id, account_id, username, status, created_at`,
      (r) => (r.length ? audit! : null),
    );
    return u ?? 'exists';
  }

  async get(id: number): Promise<ProxyUser | null> {
    const [u] = await guard(() => this.sql<ProxyUser[]>`SELECT id, account_id, username, status, created_at FROM proxy_users WHERE id = ${id}`);
    return u ?? null;
  }

  async listForAccount(accountId: number): Promise<ProxyUser[]> {
    const rows = await guard(
      () => this.sql<ProxyUser[]>`SELECT id, account_id, username, status, created_at FROM proxy_users WHERE account_id = ${accountId} ORDER BY id DESC`,
    );
    return [...rows];
  }

  async setPassword(accountId: number, id: number, passwordHash: string, audit?: AuditDraft): Promise<boolean> {
    const r = await audited(
      this.sql,
      this.nowMs,
      accountId,
      audit,
      (q) => q`UPDATE proxy_users SET password_hash = ${passwordHash}, updated_at = ${this.nowSec()} WHERE id = ${id} AND account_id = ${accountId}`,
      (r) => (r.count === 1 ? audit! : null),
    );
    return r.count === 1;
  }

  async delete(accountId: number, id: number, audit?: AuditDraft): Promise<boolean> {
    const r = await audited(this.sql, this.nowMs, accountId, audit, (q) => q`DELETE FROM proxy_users WHERE id = ${id} AND account_id = ${accountId}`, (r) => (r.count === 1 ? audit! : null));
    return r.count === 1;
  }
}
