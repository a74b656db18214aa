// proxy_users: gateway credentials of an account.
import type { Db } from './db.js';
import { stmt } from './statements.js';

export interface ProxyUser {
  id: number;
  account_id: number;
  username: string;
  status: 'active' | 'disabled';
  created_at: number;
}

export interface ProxyUserAuthRow {
  account_id: number;
  password_hash: string;
  status: 'active' | 'disabled';
  account_status: string;
}

export class ProxyUserStore {
  private readonly authRow;
  constructor(
    private readonly db: Db,
    private readonly nowSec: () => number,
  ) {
    this.authRow = stmt<[string], ProxyUserAuthRow>(db,
      'SELECT p.account_id, p.password_hash, p.status, a.status AS account_status FROM proxy_users p JOIN accounts a ON a.id = p.account_id WHERE p.username = ?',
    );
  }

  forAuth(username: string): ProxyUserAuthRow | null {
    return this.authRow.get(username) ?? null;
  }

  create(accountId: number, username: string, passwordHash: string): ProxyUser | 'exists' {
    const now = this.nowSec();
    try {
      const info = stmt(this.db, "INSERT INTO proxy_users (account_id, username, password_hash, status, created_at, updated_at) VALUES (?, ?, ?, 'active', ?, ?)")
        .run(accountId, username, passwordHash, now, now);
      return this.get(Number(info.lastInsertRowid))!;
    } catch (e) {
      if ((e as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE') return 'exists';
      throw e;
    }
  }

  get(id: number): ProxyUser | null {
    return (
      stmt<[number], ProxyUser>(this.db, 'SELECT id, account_id, username, status, created_at FROM proxy_users WHERE id = ?').get(id) ?? null
    );
  }

  listForAccount(accountId: number): ProxyUser[] {
    return stmt<[number], ProxyUser>(this.db, 'SELECT id, account_id, username, status, created_at FROM proxy_users WHERE account_id = ? ORDER BY id DESC')
      .all(accountId);
  }

  setPassword(accountId: number, id: number, passwordHash: string): boolean {
    return (
      stmt(this.db, 'UPDATE proxy_users SET password_hash = ?, updated_at = ? WHERE id = ? AND account_id = ?').run(passwordHash, this.nowSec(), id, accountId)
        .changes === 1
    );
  }

  delete(accountId: number, id: number): boolean {
    return stmt(this.db, 'DELETE FROM proxy_users WHERE id = ? AND account_id = ?').run(id, accountId).changes === 1;
  }
}
