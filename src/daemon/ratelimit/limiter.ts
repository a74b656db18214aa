// Sliding-window-log rate limiting (docs/api.md Limits): "N per rolling 60 s" holds over every 60 s interval,
// so there is no double burst at a window edge. Stores: memory (one process), the database (workers; a PostgreSQL fleet), Redis (hosts).
import { RATE_WINDOW_MS } from '../../contract/paths.js';
import type { WindowDecision } from '../store/types.js';

export interface WindowStore {
  readonly kind: 'memory' | 'sqlite' | 'postgres' | 'redis';
  /** Records a hit when fewer than `limit` are inside (now - windowMs, now]; atomic per key. */
  consume(key: string, limit: number, windowMs: number, nowMs: number): Promise<WindowDecision>;
  /** Counts hits in the window without recording one. */
  peek(key: string, windowMs: number, nowMs: number): Promise<WindowDecision>;
  /** Records a hit unconditionally. */
  record(key: string, nowMs: number, windowMs: number): Promise<void>;
  healthy(): Promise<boolean>;
  /** Stores that connect (Redis): waits at most `ms` for the connection; true when it serves. */
  ready?(ms: number): Promise<boolean>;
  close(): Promise<void>;
}

export class LimiterUnavailableError extends Error {
  constructor(cause?: unknown) {
    super('rate limit store unavailable', { cause });
    this.name = 'LimiterUnavailableError';
  }
}

/** Seconds until a denied key may try again: when the oldest hit leaves the window. */
export function retryAfterSeconds(d: WindowDecision, windowMs: number, nowMs: number): number {
  if (d.oldestAtMs === null) return 1;
  return Math.max(1, Math.ceil((d.oldestAtMs + windowMs - nowMs) / 1000));
}

export class MemoryWindowStore implements WindowStore {
  readonly kind = 'memory' as const;
  private readonly hits = new Map<string, number[]>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly maxWindowMs = RATE_WINDOW_MS) {
    this.sweeper = setInterval(() => this.sweep(Date.now()), 30_000);
    this.sweeper.unref();
  }

  private live(key: string, windowMs: number, nowMs: number): number[] {
    const list = this.hits.get(key);
    if (!list) return [];
    const since = nowMs - windowMs;
    let drop = 0;
    while (drop < list.length && list[drop]! <= since) drop++;
    if (drop) list.splice(0, drop);
    if (list.length === 0) this.hits.delete(key);
    return list;
  }

  async consume(key: string, limit: number, windowMs: number, nowMs: number): Promise<WindowDecision> {
    const list = this.live(key, windowMs, nowMs);
    if (list.length >= limit) return { allowed: false, count: list.length, oldestAtMs: list[0] ?? null };
    if (list.length === 0) this.hits.set(key, list);
    list.push(nowMs);
    return { allowed: true, count: list.length, oldestAtMs: list[0]! };
  }

  async peek(key: string, windowMs: number, nowMs: number): Promise<WindowDecision> {
    const list = this.live(key, windowMs, nowMs);
    return { allowed: true, count: list.length, oldestAtMs: list[0] ?? null };
  }

  async record(key: string, nowMs: number, windowMs: number): Promise<void> {
    const list = this.live(key, windowMs, nowMs);
    if (list.length === 0) this.hits.set(key, list);
    list.push(nowMs);
  }

  private sweep(nowMs: number): void {
    for (const key of [...this.hits.keys()]) this.live(key, this.maxWindowMs, nowMs);
  }

  async healthy(): Promise<boolean> {
    return true;
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
  }
}
