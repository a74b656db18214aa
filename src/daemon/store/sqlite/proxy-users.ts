// proxy_users: gateway credentials of an account.
import type { AuditDraft, ProxyUser, ProxyUserStore } from '../types.js';
import type { SqliteAuditLog } from './audit.js';
import type { Db } from './db.js';
import { stmt } from './statements.js';

export class SqliteProxyUserStore implements ProxyUserStore {
  constructor(
    private readonly db: Db,
    private readonly nowSec: () => number,
    private readonly audit: SqliteAuditLog,
  ) {}

  async create(accountId: number, username: string, passwordHash: string, audit?: AuditDraft): Promise<ProxyUser | 'exists'> {
    const now = this.nowSec();
    try {
      return this.audit.audited(accountId, audit, () => {
        const info = stmt(this.db, "INSERT INTO proxy_users (account_id, username, password_hash, status, created_at, updated_at) VALUES (?, ?, ?, 'active', ?, ?)")
          .run(accountId, username, passwordHash, now, now);
        return this.byId(Number(info.lastInsertRowid))!;
      });
    } catch (e) {
      if ((e as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE') return 'exists';
      throw e;
    }
  }

  async get(id: number): Promise<ProxyUser | null> {
    return this.byId(id);
  }

  private byId(id: number): ProxyUser | null {
    return (
      stmt<[number], ProxyUser>(this.db, 'SELECT id, account_id, username, status, created_at FROM proxy_users WHERE id = ?').get(id) ?? null
    );
  }

  async listForAccount(accountId: number): Promise<ProxyUser[]> {
    return stmt<[number], ProxyUser>(this.db, 'SELECT id, account_id, username, status, created_at FROM proxy_users WHERE account_id = ? ORDER BY id DESC')
      .all(accountId);
  }

  async setPassword(accountId: number, id: number, passwordHash: string, audit?: AuditDraft): Promise<boolean> {
    return this.audit.audited(
      accountId,
      audit,
      () => stmt(this.db, 'UPDATE proxy_users SET password_hash = ?, updated_at = ? WHERE id = ? AND account_id = ?').run(passwordHash, this.nowSec(), id, accountId).changes === 1,
      (changed) => (changed ? audit! : null),
    );
  }

  async delete(accountId: number, id: number, audit?: AuditDraft): Promise<boolean> {
    return this.audit.audited(
      accountId,
      audit,
      () => stmt(this.db, 'DELETE FROM proxy_users WHERE id = ? AND account_id = ?').run(id, accountId).changes === 1,
      (changed) => (changed ? audit! : null),
    );
  }
}
