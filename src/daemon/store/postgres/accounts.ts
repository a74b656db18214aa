// Accounts (PostgreSQL).
import type { Account, AccountStatus, AccountStore, AuditDraft } from '../types.js';
import { appendAudit, audited } from './audit.js';
import { guard, type Sql } from './db.js';
import { PgFamily } from './family.js';

export class PgAccountStore extends PgFamily implements AccountStore {
  async create(
    email: string,
    passwordHash: string,
    verified: boolean,
    audit?: AuditDraft,
  ): Promise<Account | 'exists'> {
    const now = this.nowSec();
    // The unique index on lower(email) decides, not a look-up first: two racing creates give one account.
    const insert = (q: Sql) => q<Account[]>`
        INSERT INTO accounts (email, password_hash, status, verified, created_at, updated_at)
        VALUES (${email}, ${passwordHash}, 'active', ${verified}, ${now}, ${now})
        ON CONFLICT ((lower(email))) DO NOTHING
        RETURNING id, email, status, verified, created_at`;
    if (!audit) return (await guard(() => insert(this.sql)))[0] ?? 'exists';
    return guard(() =>
      this.sql.begin(async (tx) => {
        const [a] = await insert(tx as unknown as Sql);
        if (!a) return 'exists' as const;
        await appendAudit(tx as unknown as Sql, this.nowMs(), { ...audit, accountId: a.id });
        return a;
      }),
    );
  }

  async get(id: number): Promise<Account | null> {
    const [a] = await guard(
      () => this.sql<Account[]>`SELECT id, email, status, verified, created_at FROM accounts WHERE id = ${id}`,
    );
    return a ?? null;
  }

  async findByEmail(email: string): Promise<Account | null> {
    // PostgreSQL's text holds no NUL, so no email has one; sent, the query would fail instead of finding nobody.
    if (email.includes('\u0000')) return null;
    const [a] = await guard(
      () =>
        this.sql<
          Account[]
        >`SELECT id, email, status, verified, created_at FROM accounts WHERE lower(email) = lower(${email})`,
    );
    return a ?? null;
  }

  async passwordHash(id: number): Promise<string | null> {
    const [r] = await guard(
      () => this.sql<{ password_hash: string }[]>`SELECT password_hash FROM accounts WHERE id = ${id}`,
    );
    return r?.password_hash ?? null;
  }

  async setVerified(id: number, verified: boolean, audit?: AuditDraft): Promise<void> {
    await audited(
      this.sql,
      this.nowMs,
      id,
      audit,
      (q) => q`UPDATE accounts SET verified = ${verified}, updated_at = ${this.nowSec()} WHERE id = ${id}`,
    );
  }

  async setPasswordHash(id: number, hash: string, audit?: AuditDraft): Promise<void> {
    await audited(
      this.sql,
      this.nowMs,
      id,
      audit,
      (q) => q`UPDATE accounts SET password_hash = ${hash}, updated_at = ${this.nowSec()} WHERE id = ${id}`,
    );
  }

  async setEmail(id: number, email: string, audit?: AuditDraft): Promise<'ok' | 'exists'> {
    if (email.includes('\u0000')) return 'exists';
    return guard(() =>
      this.sql.begin(async (tx) => {
        // The unique index on lower(email) decides: taken by another account → nothing changes.
        const [r] = await tx<{ id: number }[]>`
          UPDATE accounts SET email = ${email}, updated_at = ${this.nowSec()} WHERE id = ${id}
             AND NOT EXISTS (SELECT 1 FROM accounts o WHERE lower(o.email) = lower(${email}) AND o.id <> ${id})
          RETURNING id`;
        if (!r) return 'exists' as const;
        if (audit) await appendAudit(tx as unknown as Sql, this.nowMs(), { ...audit, accountId: id });
        return 'ok' as const;
      }),
    ).catch((e: unknown) => {
      if ((e as { code?: string }).code === '23505') return 'exists' as const; // a concurrent change took it
      throw e;
    });
  }

  async setStatus(id: number, status: AccountStatus, audit?: AuditDraft): Promise<void> {
    const now = this.nowSec();
    await guard(() =>
      this.sql.begin(async (tx) => {
        await tx`UPDATE accounts SET status = ${status}, updated_at = ${now} WHERE id = ${id}`;
        if (status === 'closed') {
          await tx`UPDATE ip_claims SET state = 'releasing', releasing_since = ${now}, version = version + 1 WHERE account_id = ${id} AND state = 'held'`;
          await tx`UPDATE whitelist_entries SET deleted_at = ${now} WHERE account_id = ${id} AND deleted_at IS NULL`;
        }
        // The chain's head last, as every writer takes it: after the change's own rows (no lock-order deadlock).
        if (audit) await appendAudit(tx as unknown as Sql, this.nowMs(), { ...audit, accountId: id });
      }),
    );
  }
}
