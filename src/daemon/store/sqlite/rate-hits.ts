// rate_hits: sliding-window log shared by every worker on this database.
import type { RateHitStore, WindowDecision } from '../types.js';
import { isBusyError, type Db } from './db.js';
import { stmt } from './statements.js';

/** Runs op, turning a lock held by another connection into `busy` (this connection never waits). */
function unlessBusy<T>(op: () => T): T | 'busy' {
  try {
    return op();
  } catch (e) {
    if (isBusyError(e)) return 'busy';
    throw e;
  }
}

export class SqliteRateHitStore implements RateHitStore {
  private readonly countStmt;
  private readonly oldestStmt;
  private readonly insertStmt;
  private readonly pruneStmt;
  private readonly hitTx;
  constructor(db: Db) {
    // Counting stops at the limit: a check costs O(limit), however many hits a raised limit lets in.
    this.countStmt = stmt<[string, number, number], { n: number }>(
      db,
      'SELECT COUNT(*) AS n FROM (SELECT 1 FROM rate_hits WHERE key = ? AND at_ms > ? LIMIT ?)',
    );
    this.oldestStmt = stmt<[string, number], { at: number | null }>(
      db,
      'SELECT MIN(at_ms) AS at FROM rate_hits WHERE key = ? AND at_ms > ?',
    );
    this.insertStmt = stmt(db, 'INSERT INTO rate_hits (key, at_ms) VALUES (?, ?)');
    this.pruneStmt = stmt(db, 'DELETE FROM rate_hits WHERE at_ms <= ?');
    this.hitTx = db.transaction((key: string, limit: number, windowMs: number, nowMs: number): WindowDecision => {
      const since = nowMs - windowMs;
      const n = this.countStmt.get(key, since, limit)!.n;
      if (n >= limit) return { allowed: false, count: n, oldestAtMs: this.oldestStmt.get(key, since)!.at };
      this.insertStmt.run(key, nowMs);
      return { allowed: true, count: n + 1, oldestAtMs: this.oldestStmt.get(key, since)!.at };
    });
  }

  /** Records a hit if fewer than `limit` are in the window; atomic across processes. */
  async hit(key: string, limit: number, windowMs: number, nowMs: number): Promise<WindowDecision | 'busy'> {
    return unlessBusy(() => this.hitTx.immediate(key, limit, windowMs, nowMs));
  }

  async peek(key: string, windowMs: number, nowMs: number): Promise<WindowDecision | 'busy'> {
    const since = nowMs - windowMs;
    return unlessBusy(() => {
      const n = this.countStmt.get(key, since, -1)!.n; // LIMIT -1: no cap (lock-out keys stop growing at the limit)
      return { allowed: true, count: n, oldestAtMs: this.oldestStmt.get(key, since)!.at };
    });
  }

  async record(key: string, nowMs: number): Promise<'ok' | 'busy'> {
    return unlessBusy(() => {
      this.insertStmt.run(key, nowMs);
      return 'ok' as const;
    });
  }

  async prune(olderThanMs: number): Promise<number | 'busy'> {
    return unlessBusy(() => this.pruneStmt.run(olderThanMs).changes);
  }
}
