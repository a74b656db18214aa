// console_sessions: server-side web console sessions, so logout, password change and suspension end them at once.
import type { ConsoleSessionStore, SessionRecord } from '../types.js';
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
    db: Db,
    private readonly nowSec: () => number = () => Math.floor(Date.now() / 1000),
  ) {
    this.getStmt = stmt<[string], SessionRow>(db, 'SELECT account_id, data, expires_at FROM console_sessions WHERE sid = ?');
    this.upsertStmt = stmt<[string, number | null, string, number]>(db,
      'INSERT INTO console_sessions (sid, account_id, data, expires_at) VALUES (?, ?, ?, ?) ' +
        'ON CONFLICT(sid) DO UPDATE SET account_id = excluded.account_id, data = excluded.data, expires_at = excluded.expires_at',
    );
    this.deleteStmt = stmt<[string]>(db, 'DELETE FROM console_sessions WHERE sid = ?');
    this.deleteForAccountStmt = stmt<[number]>(db, 'DELETE FROM console_sessions WHERE account_id = ?');
    this.deleteOthersStmt = stmt<[number, string]>(db, 'DELETE FROM console_sessions WHERE account_id = ? AND sid <> ?');
    this.pruneStmt = stmt<[number]>(db, 'DELETE FROM console_sessions WHERE expires_at <= ?');
    this.countForAccountStmt = stmt<[number, number], { n: number }>(db,
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

  async set(sid: string, rec: SessionRecord): Promise<void> {
    this.upsertStmt.run(sid, rec.accountId, rec.data, rec.expiresAtSec);
  }

  async destroy(sid: string): Promise<void> {
    this.deleteStmt.run(sid);
  }

  async destroyForAccount(accountId: number): Promise<number> {
    return this.deleteForAccountStmt.run(accountId).changes;
  }

  async destroyOthers(accountId: number, keepSid: string): Promise<number> {
    return this.deleteOthersStmt.run(accountId, keepSid).changes;
  }

  async countForAccount(accountId: number): Promise<number> {
    return this.countForAccountStmt.get(accountId, this.nowSec())!.n;
  }

  async pruneExpired(): Promise<number> {
    return this.pruneStmt.run(this.nowSec()).changes;
  }
}
