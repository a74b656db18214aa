// accounts: email, console password hash, status, real-name verification.
import type { Account, AccountStatus, AccountStore, AuditDraft } from '../types.js';
import type { SqliteAuditLog } from './audit.js';
import type { Db } from './db.js';
import { stmt } from './statements.js';

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

export class SqliteAccountStore implements AccountStore {
  private readonly byEmail;
  private readonly byId;
  private readonly insert;
  constructor(
    private readonly db: Db,
    private readonly nowSec: () => number,
    private readonly audit: SqliteAuditLog,
  ) {
    this.byEmail = stmt<[string], AccountRow>(db, 'SELECT * FROM accounts WHERE email = ?');
    this.byId = stmt<[number], AccountRow>(db, 'SELECT * FROM accounts WHERE id = ?');
    this.insert = stmt<[string, string, number, number, number]>(
      db,
      "INSERT INTO accounts (email, password_hash, status, verified, created_at, updated_at) VALUES (?, ?, 'active', ?, ?, ?)",
    );
  }

  async create(
    email: string,
    passwordHash: string,
    verified: boolean,
    audit?: AuditDraft,
  ): Promise<Account | 'exists'> {
    return this.db
      .transaction((): Account | 'exists' => {
        if (this.byEmail.get(email)) return 'exists';
        const now = this.nowSec();
        const info = this.insert.run(email, passwordHash, verified ? 1 : 0, now, now);
        const a = toAccount(this.byId.get(Number(info.lastInsertRowid))!);
        if (audit) this.audit.write({ ...audit, accountId: a.id });
        return a;
      })
      .immediate();
  }

  async get(id: number): Promise<Account | null> {
    const r = this.byId.get(id);
    return r ? toAccount(r) : null;
  }

  async findByEmail(email: string): Promise<Account | null> {
    const r = this.byEmail.get(email);
    return r ? toAccount(r) : null;
  }

  async passwordHash(id: number): Promise<string | null> {
    return this.byId.get(id)?.password_hash ?? null;
  }

  async setVerified(id: number, verified: boolean, audit?: AuditDraft): Promise<void> {
    this.audit.audited(id, audit, () =>
      stmt(this.db, 'UPDATE accounts SET verified = ?, updated_at = ? WHERE id = ?').run(
        verified ? 1 : 0,
        this.nowSec(),
        id,
      ),
    );
  }

  async setPasswordHash(id: number, hash: string, audit?: AuditDraft): Promise<void> {
    this.audit.audited(id, audit, () =>
      stmt(this.db, 'UPDATE accounts SET password_hash = ?, updated_at = ? WHERE id = ?').run(hash, this.nowSec(), id),
    );
  }

  async setEmail(id: number, email: string, audit?: AuditDraft): Promise<'ok' | 'exists'> {
    return this.db
      .transaction((): 'ok' | 'exists' => {
        const other = this.byEmail.get(email);
        if (other && other.id !== id) return 'exists';
        stmt(this.db, 'UPDATE accounts SET email = ?, updated_at = ? WHERE id = ?').run(email, this.nowSec(), id);
        if (audit) this.audit.write({ ...audit, accountId: id });
        return 'ok';
      })
      .immediate();
  }

  async setStatus(id: number, status: AccountStatus, audit?: AuditDraft): Promise<void> {
    const now = this.nowSec();
    this.db
      .transaction(() => {
        stmt(this.db, 'UPDATE accounts SET status = ?, updated_at = ? WHERE id = ?').run(status, now, id);
        if (status === 'closed') {
          stmt(
            this.db,
            "UPDATE ip_claims SET state = 'releasing', releasing_since = ?, version = version + 1 WHERE account_id = ? AND state = 'held'",
          ).run(now, id);
          stmt(this.db, 'UPDATE whitelist_entries SET deleted_at = ? WHERE account_id = ? AND deleted_at IS NULL').run(
            now,
            id,
          );
        }
        if (audit) this.audit.write({ ...audit, accountId: id });
      })
      .immediate();
  }
}
