// usage_buckets / usage_domains / usage_flushes: metered usage per account and subject in minute, hour and day buckets (and per domain and day),
// one flush per node and second, applied once (its id is kept a day). Writes go through the no-wait
// connection: a lock held elsewhere is `busy` (the meter keeps the flush and sends it again), never a sleep
// of the event loop that relays tunnels.
import type { DomainUsageRow, UsageDelta, UsagePeriod, UsageQuery, UsageRow, UsageStore } from '../types.js';
import {
  FLUSH_ID_KEEP_MS,
  OTHER_DOMAIN,
  PERIODS,
  bucketStart,
  capDomains,
  domainQueryText,
  namedPerSubject,
  perSubject,
  toDomainRow,
  toUsageRow,
  usageQueryParams,
  usageQueryText,
} from '../usage-sql.js';
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
    const addDomain = stmt(db,
      `INSERT INTO usage_domains (account_id, day_ms, subject, node, domain, bytes_up, bytes_down, connections) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (account_id, day_ms, subject, node, domain) DO UPDATE SET bytes_up = bytes_up + excluded.bytes_up,
         bytes_down = bytes_down + excluded.bytes_down, connections = connections + excluded.connections`);
    const present = stmt<unknown[], { one: number }>(db, 'SELECT 1 AS one FROM usage_domains WHERE account_id = ? AND day_ms = ? AND subject = ? AND node = ? AND domain = ?');
    const kept = stmt<unknown[], { n: number }>(db, "SELECT COUNT(*) AS n FROM usage_domains WHERE account_id = ? AND day_ms = ? AND subject = ? AND node = ? AND domain <> ''");
    const day = bucketStart('day', atMs);
    try {
      return db.transaction(() => {
        if (mark.run(flushId, atMs).changes === 0) return 'duplicate' as const;
        for (const d of perSubject(deltas)) {
          for (const p of PERIODS) add.run(d.accountId, p, bucketStart(p, atMs), d.subject, node, d.bytesUp, d.bytesDown, d.connections);
        }
        const keptOf = new Map<string, number>();
        for (const k of namedPerSubject(deltas).keys()) {
          const [account, subject] = k.split('\0') as [string, string];
          keptOf.set(k, kept.get(Number(account), day, subject, node)!.n);
        }
        const seen = (d: UsageDelta) => present.get(d.accountId, day, d.subject, node, d.target) !== undefined;
        for (const d of capDomains(deltas, keptOf, seen)) addDomain.run(d.accountId, day, d.subject, node, d.target ?? OTHER_DOMAIN, d.bytesUp, d.bytesDown, d.connections);
        return 'ok' as const;
      })();
    } catch (e) {
      if (isBusyError(e)) return 'busy';
      throw e;
    }
  }

  async query(q: UsageQuery): Promise<UsageRow[]> {
    return stmt<unknown[], Parameters<typeof toUsageRow>[0]>(this.db, usageQueryText(q.by, q.subject !== undefined)).all(...usageQueryParams(q)).map(toUsageRow);
  }

  async domains(q: { accountId: number; fromMs: number; toMs: number; subject?: string }): Promise<DomainUsageRow[]> {
    const params: Array<string | number> = [q.accountId, q.fromMs, q.toMs, ...(q.subject !== undefined ? [q.subject] : [])];
    return stmt<unknown[], Parameters<typeof toDomainRow>[0]>(this.db, domainQueryText(q.subject !== undefined)).all(...params).map(toDomainRow);
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
      // Domain rows are kept as long as day buckets.
      if (period === 'day') stmt(db, 'DELETE FROM usage_domains WHERE day_ms < ?').run(beforeMs);
      stmt(db, 'DELETE FROM usage_flushes WHERE at_ms < ?').run(Date.now() - FLUSH_ID_KEEP_MS);
      return n;
    } catch (e) {
      if (isBusyError(e)) return 'busy';
      throw e;
    }
  }
}
