// usage_buckets / usage_flushes: metered usage per account and subject in minute, hour and day buckets,
// one flush per node and second, applied once (its id is kept a day). Writes go through the no-wait
// connection: a lock held elsewhere is `busy` (the meter keeps the flush and sends it again), never a sleep
// of the event loop that relays tunnels.
import type { UsageDelta, UsagePeriod, UsageRow, UsageStore } from '../types.js';
import { FLUSH_ID_KEEP_MS, PERIODS, bucketStart, toUsageRow, usageQueryText } from '../usage-sql.js';
import { isBusyError, type Db } from './db.js';
import { stmt } from './statements.js';


export class SqliteUsageStore implements UsageStore {
  constructor(
    private readonly db: Db,
    private readonly writer: () => Db,
  ) {}

  async addFlush(node: string, flushId: string, atMs: number, deltas: readonly UsageDelta[]): Promise<'ok' | 'duplicate' | 'busy'> {
    const db = this.writer();
    const mark = stmt(db, 'INSERT OR IGNORE INTO usage_flushes (flush_id, at_ms) VALUES (?, ?)');
    const add = stmt(db,
      `INSERT INTO usage_buckets (account_id, period, start_ms, subject, node, bytes_up, bytes_down, connections) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (account_id, period, start_ms, subject, node) DO UPDATE SET bytes_up = bytes_up + excluded.bytes_up,
         bytes_down = bytes_down + excluded.bytes_down, connections = connections + excluded.connections`);
    try {
      return db.transaction(() => {
        if (mark.run(flushId, atMs).changes === 0) return 'duplicate' as const;
        for (const d of deltas) {
          for (const p of PERIODS) add.run(d.accountId, p, bucketStart(p, atMs), d.subject, node, d.bytesUp, d.bytesDown, d.connections);
        }
        return 'ok' as const;
      })();
    } catch (e) {
      if (isBusyError(e)) return 'busy';
      throw e;
    }
  }

  async query(q: { accountId: number; period: UsagePeriod; fromMs: number; toMs: number; by: 'time' | 'subject' }): Promise<UsageRow[]> {
    return stmt<unknown[], Parameters<typeof toUsageRow>[0]>(this.db, usageQueryText(q.by)).all(q.accountId, q.period, q.fromMs, q.toMs).map(toUsageRow);
  }

  async dailyTotals(accountIds: readonly number[], sinceMs: number): Promise<Array<{ accountId: number; subject: string; startMs: number; bytes: number }>> {
    if (accountIds.length === 0) return [];
    const q = `SELECT account_id, subject, start_ms, SUM(bytes_up + bytes_down) AS bytes FROM usage_buckets
      WHERE period = 'day' AND start_ms >= ? AND account_id IN (SELECT value FROM json_each(?)) GROUP BY account_id, subject, start_ms`;
    return stmt<[number, string], { account_id: number; subject: string; start_ms: number; bytes: number }>(this.db, q)
      .all(sinceMs, JSON.stringify(accountIds))
      .map((r) => ({ accountId: r.account_id, subject: r.subject, startMs: r.start_ms, bytes: r.bytes }));
  }

  async prune(period: UsagePeriod, beforeMs: number): Promise<number | 'busy'> {
    const db = this.writer();
    try {
      const n = stmt(db, 'DELETE FROM usage_buckets WHERE period = ? AND start_ms < ?').run(period, beforeMs).changes;
      stmt(db, 'DELETE FROM usage_flushes WHERE at_ms < ?').run(Date.now() - FLUSH_ID_KEEP_MS);
      return n;
    } catch (e) {
      if (isBusyError(e)) return 'busy';
      throw e;
    }
  }
}
