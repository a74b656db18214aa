// Window store in the shared database: exact across the workers of one host (SQLite) or a fleet (PostgreSQL).
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { RATE_WINDOW_MS } from '../../contract/paths.js';
import type { RateHitStore } from '../store/index.js';
import type { WindowDecision } from '../store/types.js';
import { LimiterUnavailableError, type WindowStore } from './limiter.js';

/** Give up on a lock after this long; ApiLimits answers 503 at its own bound (500 ms) anyway. */
const MAX_WAIT_MS = 450;

export class DatabaseWindowStore implements WindowStore {
  private readonly pruner: NodeJS.Timeout;

  constructor(
    private readonly hits: RateHitStore,
    readonly kind: 'sqlite' | 'postgres' = 'sqlite',
    maxWindowMs = RATE_WINDOW_MS,
  ) {
    this.pruner = setInterval(() => {
      this.hits.prune(Date.now() - maxWindowMs).catch(() => {
        /* unreachable: the next round prunes */
      });
    }, 30_000);
    this.pruner.unref();
  }

  // Another worker holding the SQLite write lock for its ~50 us transaction: retry on the next turn of
  // the event loop rather than letting SQLite sleep it (its connection has busy_timeout 0).
  private async retryWhileBusy<T>(op: () => Promise<T | 'busy'>): Promise<T> {
    const deadline = Date.now() + MAX_WAIT_MS;
    for (;;) {
      let r: T | 'busy';
      try {
        r = await op();
      } catch (e) {
        throw new LimiterUnavailableError(e);
      }
      if (r !== 'busy') return r;
      if (Date.now() > deadline) throw new LimiterUnavailableError('busy');
      await yieldToLoop();
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
