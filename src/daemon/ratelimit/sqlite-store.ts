// Window store in the shared SQLite database: exact across the workers of one host.
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import type { RateHitStore } from '../store/rate-hits.js';
import { LimiterUnavailableError, type WindowDecision, type WindowStore } from './limiter.js';
import { isBusyError } from '../store/db.js';


/** Give up on a lock after this long; ApiLimits answers 503 at its own bound (500 ms) anyway. */
const MAX_WAIT_MS = 450;

export class SqliteWindowStore implements WindowStore {
  readonly kind = 'sqlite' as const;
  private readonly pruner: NodeJS.Timeout;

  constructor(
    private readonly hits: RateHitStore,
    maxWindowMs = 60_000,
  ) {
    this.pruner = setInterval(() => {
      try {
        this.hits.prune(Date.now() - maxWindowMs);
      } catch {
        /* busy: the next round prunes */
      }
    }, 30_000);
    this.pruner.unref();
  }

  // Another worker holding the write lock for its ~50 us transaction: retry on the next turn of the
  // event loop rather than letting SQLite sleep it (hits is a connection with busy_timeout 0).
  private async retryWhileBusy<T>(op: () => T): Promise<T> {
    const deadline = Date.now() + MAX_WAIT_MS;
    for (;;) {
      try {
        return op();
      } catch (e) {
        if (!isBusyError(e)) throw e;
        if (Date.now() > deadline) throw new LimiterUnavailableError(e);
        await yieldToLoop();
      }
    }
  }

  async consume(key: string, limit: number, windowMs: number, nowMs: number): Promise<WindowDecision> {
    return this.retryWhileBusy(() => this.hits.hit(key, limit, windowMs, nowMs));
  }

  async peek(key: string, windowMs: number, nowMs: number): Promise<WindowDecision> {
    return this.retryWhileBusy(() => this.hits.peek(key, windowMs, nowMs));
  }

  async record(key: string, nowMs: number): Promise<void> {
    await this.retryWhileBusy(() => this.hits.record(key, nowMs));
  }

  async healthy(): Promise<boolean> {
    return true;
  }

  async close(): Promise<void> {
    clearInterval(this.pruner);
  }
}
