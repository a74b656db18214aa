// Window store in the shared SQLite database: exact across the workers of one host.
import type { RateHitStore } from '../store/rate-hits.js';
import type { WindowDecision, WindowStore } from './limiter.js';

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

  async consume(key: string, limit: number, windowMs: number, nowMs: number): Promise<WindowDecision> {
    return this.hits.hit(key, limit, windowMs, nowMs);
  }

  async peek(key: string, windowMs: number, nowMs: number): Promise<WindowDecision> {
    return this.hits.peek(key, windowMs, nowMs);
  }

  async record(key: string, nowMs: number): Promise<void> {
    this.hits.record(key, nowMs);
  }

  async healthy(): Promise<boolean> {
    return true;
  }

  async close(): Promise<void> {
    clearInterval(this.pruner);
  }
}
