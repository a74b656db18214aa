// usage_buckets / usage_domains / usage_flushes: metered usage per account and subject in minute, hour and day buckets (and per domain and day),
// each flush writing all three periods (one node, one file: the row count that PostgreSQL's roll-up saves does not
// matter here; roll_* stay 0, so the shared reads in usage-sql.ts find nothing unfolded),
// one flush per node and second, applied once (its id is kept a day). Writes go through the no-wait
// connection: a lock held elsewhere is `busy` (the meter keeps the flush and sends it again), never a sleep
// of the event loop that relays tunnels.
import type {
  DomainUsageRow,
  FlushDomains,
  UsageDelta,
  UsagePeriod,
  UsageQuery,
  UsageRow,
  UsageStore,
} from '../types.js';
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
  FIRST_USAGE_TEXT,
  dailyTotalsText,
  usageQuery,
} from '../usage-sql.js';
import { isBusyError, type Db } from './db.js';
import { stmt } from './statements.js';
import { splitUsageKey } from '../../../rules/usage-key.js';

export class SqliteUsageStore implements UsageStore {
  constructor(
    private readonly db: Db,
    private readonly writer: () => Db,
  ) {}

  async addFlush(
    node: string,
    flushId: string,
    atMs: number,
    deltas: readonly UsageDelta[],
    domains?: FlushDomains,
  ): Promise<'ok' | 'duplicate' | 'busy'> {
    const byDomain = domains ?? { atMs, deltas };
    const db = this.writer();
    const mark = stmt(db, 'INSERT OR IGNORE INTO usage_flushes (flush_id, at_ms) VALUES (?, ?)');
    const add = stmt(
      db,
      `INSERT INTO usage_buckets (account_id, period, start_ms, subject, node, bytes_up, bytes_down, connections) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (account_id, period, start_ms, subject, node) DO UPDATE SET bytes_up = bytes_up + excluded.bytes_up,
         bytes_down = bytes_down + excluded.bytes_down, connections = connections + excluded.connections`,
    );
    const addDomain = stmt(
      db,
      `INSERT INTO usage_domains (account_id, day_ms, subject, node, domain, bytes_up, bytes_down, connections) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (account_id, day_ms, subject, node, domain) DO UPDATE SET bytes_up = bytes_up + excluded.bytes_up,
         bytes_down = bytes_down + excluded.bytes_down, connections = connections + excluded.connections`,
    );
    const present = stmt<unknown[], { one: number }>(
      db,
      'SELECT 1 AS one FROM usage_domains WHERE account_id = ? AND day_ms = ? AND subject = ? AND node = ? AND domain = ?',
    );
    const kept = stmt<unknown[], { n: number }>(
      db,
      "SELECT COUNT(*) AS n FROM usage_domains WHERE account_id = ? AND day_ms = ? AND subject = ? AND node = ? AND domain <> ''",
    );
    const day = bucketStart('day', byDomain.atMs);
    try {
      return db.transaction(() => {
        if (mark.run(flushId, atMs).changes === 0) return 'duplicate' as const;
        for (const d of perSubject(deltas)) {
          for (const p of PERIODS)
            add.run(d.accountId, p, bucketStart(p, atMs), d.subject, node, d.bytesUp, d.bytesDown, d.connections);
        }
        const keptOf = new Map<string, number>();
        for (const k of namedPerSubject(byDomain.deltas).keys()) {
          const { accountId, subject } = splitUsageKey(k);
          keptOf.set(k, kept.get(accountId, day, subject, node)!.n);
        }
        const seen = (d: UsageDelta) => present.get(d.accountId, day, d.subject, node, d.target) !== undefined;
        for (const d of capDomains(byDomain.deltas, keptOf, seen))
          addDomain.run(
            d.accountId,
            day,
            d.subject,
            node,
            d.target ?? OTHER_DOMAIN,
            d.bytesUp,
            d.bytesDown,
            d.connections,
          );
        return 'ok' as const;
      })();
    } catch (e) {
      if (isBusyError(e)) return 'busy';
      throw e;
    }
  }

  async query(q: UsageQuery): Promise<UsageRow[]> {
    const { text, params } = usageQuery(q);
    return stmt<unknown[], Parameters<typeof toUsageRow>[0]>(this.db, text)
      .all(...params)
      .map(toUsageRow);
  }

  async domains(q: { accountId: number; fromMs: number; toMs: number; subject?: string }): Promise<DomainUsageRow[]> {
    const params: Array<string | number> = [
      q.accountId,
      q.fromMs,
      q.toMs,
      ...(q.subject !== undefined ? [q.subject] : []),
    ];
    return stmt<unknown[], Parameters<typeof toDomainRow>[0]>(this.db, domainQueryText(q.subject !== undefined))
      .all(...params)
      .map(toDomainRow);
  }

  async firstUsage(accountId: number): Promise<number | null> {
    const r = stmt<[number, number], { first_ms: number | null }>(this.db, FIRST_USAGE_TEXT).get(accountId, accountId);
    return r?.first_ms ?? null;
  }

  async dailyTotals(
    accountIds: readonly number[],
    sinceMs: number,
  ): Promise<Array<{ accountId: number; subject: string; startMs: number; bytes: number }>> {
    if (accountIds.length === 0) return [];
    const q = dailyTotalsText('SELECT value FROM json_each(?)');
    const ids = JSON.stringify(accountIds);
    return stmt<
      [number, string, number, string],
      { account_id: number; subject: string; start_ms: number; bytes: number }
    >(this.db, q)
      .all(sinceMs, ids, sinceMs, ids)
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
