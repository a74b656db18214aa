// Console sessions (PostgreSQL).
import { withCount } from '../audit-sql.js';
import type { AuditDraft, ConsoleSessionStore, SessionListing, SessionRecord } from '../types.js';
import { appendAudit, audited } from './audit.js';
import { guard, type Sql } from './db.js';
import { PgFamily } from './family.js';

export class PgConsoleSessionStore extends PgFamily implements ConsoleSessionStore {
  async get(sid: string): Promise<SessionRecord | null> {
    const [r] = await guard(
      () => this.sql<{ account_id: number | null; data: string; expires_at: number }[]>`
      SELECT account_id, data, expires_at FROM console_sessions WHERE sid = ${sid}`,
    );
    if (!r) return null;
    if (r.expires_at <= this.nowSec()) {
      await this.destroy(sid);
      return null;
    }
    return { accountId: r.account_id, data: r.data, expiresAtSec: r.expires_at };
  }

  async set(sid: string, rec: SessionRecord, audit?: AuditDraft): Promise<void> {
    await audited(
      this.sql,
      this.nowMs,
      rec.accountId ?? 0,
      rec.accountId === null ? undefined : audit,
      (q) => q`
      INSERT INTO console_sessions (sid, account_id, data, expires_at) VALUES (${sid}, ${rec.accountId}, ${rec.data}, ${rec.expiresAtSec})
      ON CONFLICT (sid) DO UPDATE SET account_id = excluded.account_id, data = excluded.data, expires_at = excluded.expires_at`,
    );
  }

  async update(sid: string, rec: SessionRecord): Promise<boolean> {
    const r = await guard(
      () =>
        this
          .sql`UPDATE console_sessions SET account_id = ${rec.accountId}, data = ${rec.data}, expires_at = ${rec.expiresAtSec} WHERE sid = ${sid}`,
    );
    return r.count === 1;
  }

  async destroy(sid: string, audit?: AuditDraft): Promise<void> {
    if (!audit) {
      await guard(() => this.sql`DELETE FROM console_sessions WHERE sid = ${sid}`);
      return;
    }
    await guard(() =>
      this.sql.begin(async (tx) => {
        const [r] = await tx<
          { account_id: number | null }[]
        >`DELETE FROM console_sessions WHERE sid = ${sid} RETURNING account_id`;
        if (r?.account_id) await appendAudit(tx as unknown as Sql, this.nowMs(), { ...audit, accountId: r.account_id });
      }),
    );
  }

  async destroyForAccount(accountId: number, audit?: AuditDraft): Promise<number> {
    const r = await audited(
      this.sql,
      this.nowMs,
      accountId,
      audit,
      (q) => q`DELETE FROM console_sessions WHERE account_id = ${accountId}`,
      (r) => (r.count > 0 ? withCount(audit!, r.count) : null),
    );
    return r.count;
  }

  async destroyOthers(accountId: number, keepSid: string, audit?: AuditDraft): Promise<number> {
    const r = await audited(
      this.sql,
      this.nowMs,
      accountId,
      audit,
      (q) => q`DELETE FROM console_sessions WHERE account_id = ${accountId} AND sid <> ${keepSid}`,
      (r) => (r.count > 0 ? withCount(audit!, r.count) : null),
    );
    return r.count;
  }

  async listForAccount(accountId: number): Promise<SessionListing[]> {
    const rows = await guard(
      () => this.sql<{ sid: string; account_id: number; data: string; expires_at: number }[]>`
      SELECT sid, account_id, data, expires_at FROM console_sessions WHERE account_id = ${accountId} AND expires_at > ${this.nowSec()}`,
    );
    return rows.map((r) => ({ sid: r.sid, accountId: r.account_id, data: r.data, expiresAtSec: r.expires_at }));
  }

  async countForAccount(accountId: number): Promise<number> {
    const [r] = await guard(
      () => this.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM console_sessions WHERE account_id = ${accountId} AND expires_at > ${this.nowSec()}`,
    );
    return r!.n;
  }

  async pruneExpired(): Promise<number> {
    return (await guard(() => this.sql`DELETE FROM console_sessions WHERE expires_at <= ${this.nowSec()}`)).count;
  }
}
