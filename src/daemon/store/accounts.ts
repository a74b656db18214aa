// accounts: email, console password hash, status, real-name verification.
import type { Db } from './db.js';
import { stmt } from './statements.js';

export type AccountStatus = 'active' | 'suspended' | 'closed';

export interface Account {
  id: number;
  email: string;
  status: AccountStatus;
  verified: boolean;
  created_at: number;
}

interface AccountRow {
  id: number;
  email: string;
  password_hash: string;
  status: AccountStatus;
  verified: number;
  created_at: number;
}

const toAccount = (r: AccountRow): Account => ({
  id: r.id,
  email: r.email,
  status: r.status,
  verified: r.verified === 1,
  created_at: r.created_at,
});

export class AccountStore {
  private readonly byEmail;
  private readonly byId;
  private readonly insert;
  constructor(
    private readonly db: Db,
    private readonly nowSec: () => number,
  ) {
    this.byEmail = stmt<[string], AccountRow>(db, 'SELECT * FROM accounts WHERE email = ?');
    this.byId = stmt<[number], AccountRow>(db, 'SELECT * FROM accounts WHERE id = ?');
    this.insert = stmt<[string, string, number, number, number]>(db,
      "INSERT INTO accounts (email, password_hash, status, verified, created_at, updated_at) VALUES (?, ?, 'active', ?, ?, ?)",
    );
  }

  create(email: string, passwordHash: string, verified: boolean): Account | 'exists' {
    if (this.byEmail.get(email)) return 'exists';
    const now = this.nowSec();
    const info = this.insert.run(email, passwordHash, verified ? 1 : 0, now, now);
    return this.get(Number(info.lastInsertRowid))!;
  }

  get(id: number): Account | null {
    const r = this.byId.get(id);
    return r ? toAccount(r) : null;
  }

  findByEmail(email: string): Account | null {
    const r = this.byEmail.get(email);
    return r ? toAccount(r) : null;
  }

  passwordHash(id: number): string | null {
    return this.byId.get(id)?.password_hash ?? null;
  }

  setVerified(id: number, verified: boolean): void {
    stmt(this.db, 'UPDATE accounts SET verified = ?, updated_at = ? WHERE id = ?').run(verified ? 1 : 0, this.nowSec(), id);
  }

  setPasswordHash(id: number, hash: string): void {
    stmt(this.db, 'UPDATE accounts SET password_hash = ?, updated_at = ? WHERE id = ?').run(hash, this.nowSec(), id);
  }

  /**
   * Status change. Closing moves every IP the account holds to "being released" and ends its
   * whitelist entries, in one transaction.
   */
  setStatus(id: number, status: AccountStatus): void {
    const now = this.nowSec();
    this.db.transaction(() => {
      stmt(this.db, 'UPDATE accounts SET status = ?, updated_at = ? WHERE id = ?').run(status, now, id);
      if (status === 'closed') {
        stmt(this.db, "UPDATE ip_claims SET state = 'releasing', releasing_since = ?, version = version + 1 WHERE account_id = ? AND state = 'held'")
          .run(now, id);
        stmt(this.db, 'UPDATE whitelist_entries SET deleted_at = ? WHERE account_id = ? AND deleted_at IS NULL').run(now, id);
      }
    }).immediate();
  }
}
