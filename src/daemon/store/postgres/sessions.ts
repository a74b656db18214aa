// Console sessions (PostgreSQL).
import type { ConsoleSessionStore, SessionRecord } from '../types.js';
import { guard } from './db.js';
import { PgFamily } from './family.js';

export class PgConsoleSessionStore extends PgFamily implements ConsoleSessionStore {
  async get(sid: string): Promise<SessionRecord | null> {
    const [r] = await guard(() => this.sql<{ account_id: number | null; data: string; expires_at: number }[]>`
      SELECT account_id, data, expires_at FROM console_sessions WHERE sid = ${sid}`);
    if (!r) return null;
    if (r.expires_at <= this.nowSec()) {
      await this.destroy(sid);
      return null;
    }
    return { accountId: r.account_id, data: r.data, expiresAtSec: r.expires_at };
  }

  async set(sid: string, rec: SessionRecord): Promise<void> {
    await guard(() => this.sql`
      INSERT INTO console_sessions (sid, account_id, data, expires_at) VALUES (${sid}, ${rec.accountId}, ${rec.data}, ${rec.expiresAtSec})
      ON CONFLICT (sid) DO UPDATE SET account_id = excluded.account_id, data = excluded.data, expires_at = excluded.expires_at`);
  }

  async destroy(sid: string): Promise<void> {
    await guard(() => this.sql`DELETE FROM console_sessions WHERE sid = ${sid}`);
  }

  async destroyForAccount(accountId: number): Promise<number> {
    return (await guard(() => this.sql`DELETE FROM console_sessions WHERE account_id = ${accountId}`)).count;
  }

  async destroyOthers(accountId: number, keepSid: string): Promise<number> {
    return (await guard(() => this.sql`DELETE FROM console_sessions WHERE account_id = ${accountId} AND sid <> ${keepSid}`)).count;
  }

  async countForAccount(accountId: number): Promise<number> {
    const [r] = await guard(() => this.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM console_sessions WHERE account_id = ${accountId} AND expires_at > ${this.nowSec()}`);
    return r!.n;
  }

  async pruneExpired(): Promise<number> {
    return (await guard(() => this.sql`DELETE FROM console_sessions WHERE expires_at <= ${this.nowSec()}`)).count;
  }
}
