// Accounts (PostgreSQL).
import type { Account, AccountStatus, AccountStore } from '../types.js';
import { guard } from './db.js';
import { PgFamily } from './family.js';

export class PgAccountStore extends PgFamily implements AccountStore {
  async create(email: string, passwordHash: string, verified: boolean): Promise<Account | 'exists'> {
    const now = this.nowSec();
    // The unique index on lower(email) decides, not a look-up first: two racing creates give one account.
    const [a] = await guard(
      () => this.sql<Account[]>`
        INSERT INTO accounts (email, password_hash, status, verified, created_at, updated_at)
        VALUES (${email}, ${passwordHash}, 'active', ${verified}, ${now}, ${now})
        ON CONFLICT ((lower(email))) DO NOTHING
        RETURNING id, email, status, verified, created_at`,
    );
    return a ?? 'exists';
  }

  async get(id: number): Promise<Account | null> {
    const [a] = await guard(() => this.sql<Account[]>`SELECT id, email, status, verified, created_at FROM accounts WHERE id = ${id}`);
    return a ?? null;
  }

  async findByEmail(email: string): Promise<Account | null> {
    // PostgreSQL's text holds no NUL, so no email has one; sent, the query would fail instead of finding nobody.
    if (email.includes('\u0000')) return null;
    const [a] = await guard(() => this.sql<Account[]>`SELECT id, email, status, verified, created_at FROM accounts WHERE lower(email) = lower(${email})`);
    return a ?? null;
  }

  async passwordHash(id: number): Promise<string | null> {
    const [r] = await guard(() => this.sql<{ password_hash: string }[]>`SELECT password_hash FROM accounts WHERE id = ${id}`);
    return r?.password_hash ?? null;
  }

  async setVerified(id: number, verified: boolean): Promise<void> {
    await guard(() => this.sql`UPDATE accounts SET verified = ${verified}, updated_at = ${this.nowSec()} WHERE id = ${id}`);
  }

  async setPasswordHash(id: number, hash: string): Promise<void> {
    await guard(() => this.sql`UPDATE accounts SET password_hash = ${hash}, updated_at = ${this.nowSec()} WHERE id = ${id}`);
  }

  async setStatus(id: number, status: AccountStatus): Promise<void> {
    const now = this.nowSec();
    await guard(() =>
      this.sql.begin(async (tx) => {
        await tx`UPDATE accounts SET status = ${status}, updated_at = ${now} WHERE id = ${id}`;
        if (status === 'closed') {
          await tx`UPDATE ip_claims SET state = 'releasing', releasing_since = ${now}, version = version + 1 WHERE account_id = ${id} AND state = 'held'`;
          await tx`UPDATE whitelist_entries SET deleted_at = ${now} WHERE account_id = ${id} AND deleted_at IS NULL`;
        }
      }),
    );
  }
}
