// Proxy users (PostgreSQL).
import type { ProxyUser, ProxyUserStore } from '../types.js';
import { guard } from './db.js';
import { PgFamily } from './family.js';

export class PgProxyUserStore extends PgFamily implements ProxyUserStore {
  async create(accountId: number, username: string, passwordHash: string): Promise<ProxyUser | 'exists'> {
    const now = this.nowSec();
    const [u] = await guard(
      () => this.sql<ProxyUser[]>`
        INSERT INTO proxy_users (account_id, username, password_hash, status, created_at, updated_at)
        VALUES (${accountId}, ${username}, ${passwordHash}, 'active', ${now}, ${now})
        ON CONFLICT (username) DO NOTHING
        RETURNING id, account_id, username, status, created_at`,
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

  async setPassword(accountId: number, id: number, passwordHash: string): Promise<boolean> {
    const r = await guard(
      () => this.sql`UPDATE proxy_users SET password_hash = ${passwordHash}, updated_at = ${this.nowSec()} WHERE id = ${id} AND account_id = ${accountId}`,
    );
    return r.count === 1;
  }

  async delete(accountId: number, id: number): Promise<boolean> {
    const r = await guard(() => this.sql`DELETE FROM proxy_users WHERE id = ${id} AND account_id = ${accountId}`);
    return r.count === 1;
  }
}
