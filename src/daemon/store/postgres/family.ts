// What every PostgreSQL table family shares: the pool, the clock, the deadlines, and `busy` for a lost race.
import { guard, isBusy, type Sql } from './db.js';

export type NowSec = () => number;

/** Admission answers within the limiter's own bound (docs/api.md, Limits: 500 ms), as the rate-limit store would. */
export const ADMIT_MS = 500;
/** A batch of 100 items is one call; it gets longer than a single statement's 2 s. */
export const BATCH_MS = 5_000;
/** The start-up check scans whole tables: it gets minutes, not the 2 s of a request. */
export const START_CHECK_MS = 300_000;

/** Runs op under the deadline; a lost race inside the database is `busy`. */
export async function unlessBusy<T>(op: () => Promise<T>, timeoutMs?: number): Promise<T | 'busy'> {
  try {
    return await guard(op, timeoutMs);
  } catch (e) {
    if (isBusy(e)) return 'busy';
    throw e;
  }
}

/** What every table family works with: the pool and the clock (seconds; milliseconds for audit records). */
export abstract class PgFamily {
  constructor(
    protected readonly sql: Sql,
    protected readonly nowSec: NowSec,
    protected readonly nowMs: () => number = () => nowSec() * 1000,
  ) {}
}
