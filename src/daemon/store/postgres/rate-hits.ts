// The shared rate-hit log (PostgreSQL): each hit is one server-side call.
import type { RateHitStore, WindowDecision } from '../types.js';
import { type Sql } from './db.js';
import { unlessBusy } from './family.js';

export class PgRateHitStore implements RateHitStore {
  constructor(private readonly sql: Sql) {}

  async hit(key: string, limit: number, windowMs: number, nowMs: number): Promise<WindowDecision | 'busy'> {
    const r = await unlessBusy(
      () => this.sql<{ allowed: boolean; n: number; oldest: number | null }[]>`
      SELECT allowed, n, oldest FROM proxyd_rate_hit(${key}, ${limit}::int, ${windowMs}::bigint, ${nowMs}::bigint)`,
    );
    if (r === 'busy') return r;
    return { allowed: r[0]!.allowed, count: r[0]!.n, oldestAtMs: r[0]!.oldest };
  }

  async peek(key: string, windowMs: number, nowMs: number): Promise<WindowDecision | 'busy'> {
    const r = await unlessBusy(
      () => this.sql<{ n: number; oldest: number | null }[]>`
      SELECT count(*)::int AS n, min(at_ms) AS oldest FROM rate_hits WHERE key = ${key} AND at_ms > ${nowMs - windowMs}`,
    );
    if (r === 'busy') return r;
    return { allowed: true, count: r[0]!.n, oldestAtMs: r[0]!.oldest };
  }

  async record(key: string, nowMs: number): Promise<'ok' | 'busy'> {
    const r = await unlessBusy(() => this.sql`INSERT INTO rate_hits (key, at_ms) VALUES (${key}, ${nowMs})`);
    return r === 'busy' ? r : 'ok';
  }

  async prune(olderThanMs: number): Promise<number | 'busy'> {
    const r = await unlessBusy(() => this.sql`DELETE FROM rate_hits WHERE at_ms <= ${olderThanMs}`);
    return r === 'busy' ? r : r.count;
  }
}
