// console_sessions: server-side web console sessions, so logout, password change and suspension end them at once.
import type { AuditDraft, ConsoleSessionStore, SessionListing, SessionRecord } from '../types.js';
import { withCount } from '../audit-sql.js';
import type { SqliteAuditLog } from './audit.js';
import type { Db } from './db.js';
import { stmt } from './statements.js';

interface SessionRow {
  account_id: number | null;
  data: string;
  expires_at: number;
}

export class SqliteConsoleSessionStore implements ConsoleSessionStore {
  private readonly getStmt;
  private readonly upsertStmt;
  private readonly deleteStmt;
  private readonly deleteForAccountStmt;
  private readonly deleteOthersStmt;
  private readonly pruneStmt;
  private readonly countForAccountStmt;

  constructor(
    private readonly db: Db,
    private readonly nowSec: () => number,
    private readonly audit: SqliteAuditLog,
  ) {
    this.getStmt = stmt<[string], SessionRow>(
      db,
      'SELECT account_id, data, expires_at FROM console_sessions WHERE sid = ?',
    );
    this.upsertStmt = stmt<[string, number | null, string, number]>(
      db,
      'INSERT INTO console_sessions (sid, account_id, data, expires_at) VALUES (?, ?, ?, ?) ' +
        'ON CONFLICT(sid) DO UPDATE SET account_id = excluded.account_id, data = excluded.data, expires_at = excluded.expires_at',
    );
    this.deleteStmt = stmt<[string]>(db, 'DELETE FROM console_sessions WHERE sid = ?');
    this.deleteForAccountStmt = stmt<[number]>(db, 'DELETE FROM console_sessions WHERE account_id = ?');
    this.deleteOthersStmt = stmt<[number, string]>(
      db,
      'DELETE FROM console_sessions WHERE account_id = ? AND sid <> ?',
    );
    this.pruneStmt = stmt<[number]>(db, 'DELETE FROM console_sessions WHERE expires_at <= ?');
    this.countForAccountStmt = stmt<[number, number], { n: number }>(
      db,
      'SELECT COUNT(*) AS n FROM console_sessions WHERE account_id = ? AND expires_at > ?',
    );
  }

  async get(sid: string): Promise<SessionRecord | null> {
    const row = this.getStmt.get(sid);
    if (!row) return null;
    if (row.expires_at <= this.nowSec()) {
      this.deleteStmt.run(sid);
      return null;
    }
    return { accountId: row.account_id, data: row.data, expiresAtSec: row.expires_at };
  }

  async set(sid: string, rec: SessionRecord, audit?: AuditDraft): Promise<void> {
    if (audit && rec.accountId !== null)
      this.audit.audited(rec.accountId, audit, () =>
        this.upsertStmt.run(sid, rec.accountId, rec.data, rec.expiresAtSec),
      );
    else this.upsertStmt.run(sid, rec.accountId, rec.data, rec.expiresAtSec);
  }

  async update(sid: string, rec: SessionRecord): Promise<boolean> {
    return (
      stmt(this.db, 'UPDATE console_sessions SET account_id = ?, data = ?, expires_at = ? WHERE sid = ?').run(
        rec.accountId,
        rec.data,
        rec.expiresAtSec,
        sid,
      ).changes === 1
    );
  }

  async destroy(sid: string, audit?: AuditDraft): Promise<void> {
    if (!audit) {
      this.deleteStmt.run(sid);
      return;
    }
    this.db
      .transaction(() => {
        const row = this.getStmt.get(sid);
        this.deleteStmt.run(sid);
        if (row?.account_id) this.audit.write({ ...audit, accountId: row.account_id });
      })
      .immediate();
  }

  async destroyForAccount(accountId: number, audit?: AuditDraft): Promise<number> {
    return this.audit.audited(
      accountId,
      audit,
      () => this.deleteForAccountStmt.run(accountId).changes,
      (n) => (n > 0 ? withCount(audit!, n) : null),
    );
  }

  async destroyOthers(accountId: number, keepSid: string, audit?: AuditDraft): Promise<number> {
    return this.audit.audited(
      accountId,
      audit,
      () => this.deleteOthersStmt.run(accountId, keepSid).changes,
      (n) => (n > 0 ? withCount(audit!, n) : null),
    );
  }

  async listForAccount(accountId: number): Promise<SessionListing[]> {
    return stmt<[number, number], { sid: string; account_id: number; data: string; expires_at: number }>(
      this.db,
      'SELECT sid, account_id, data, expires_at FROM console_sessions WHERE account_id = ? AND expires_at > ?',
    )
      .all(accountId, this.nowSec())
      .map((r) => ({ sid: r.sid, accountId: r.account_id, data: r.data, expiresAtSec: r.expires_at }));
  }

  async countForAccount(accountId: number): Promise<number> {
    return this.countForAccountStmt.get(accountId, this.nowSec())!.n;
  }

  async pruneExpired(): Promise<number> {
    return this.pruneStmt.run(this.nowSec()).changes;
  }
}
