// Client-side rolling-window pacing: the (limit+1)-th request waits until the oldest of the last
// `limit` is `windowMs` old, so a long batch run stays under the server's per-token limit (docs/api.md Limits).

export interface Clock {
  now(): number;
  /** Resolves after `ms`, or at once when `signal` is aborted. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export class RollingWindowPacer {
  readonly #limit: number;
  readonly #windowMs: number;
  readonly #marginMs: number;
  readonly #clock: Clock;
  /** Completion times of recent requests, oldest first. */
  readonly #stamps: number[] = [];

  constructor(limit: number, windowMs: number, clock: Clock, marginMs = 250) {
    this.#limit = limit;
    this.#windowMs = windowMs;
    this.#clock = clock;
    this.#marginMs = marginMs;
  }

  /** How long the next request must wait (0 when it may go now). */
  delayMs(): number {
    const now = this.#clock.now();
    this.#prune(now);
    if (this.#stamps.length < this.#limit) return 0;
    const oldest = this.#stamps[this.#stamps.length - this.#limit]!;
    return Math.max(0, oldest + this.#windowMs + this.#marginMs - now);
  }

  /** Waits until a request may go, or `signal` is aborted; `onWait` hears about a wait before it starts. */
  async acquire(onWait?: (ms: number) => void, signal?: AbortSignal): Promise<void> {
    for (;;) {
      const d = this.delayMs();
      if (d <= 0 || signal?.aborted) return;
      onWait?.(d);
      await this.#clock.sleep(d, signal);
    }
  }

  /**
   * Records a request when its response arrived: the server counted it at some earlier moment,
   * so counting from here can only be late, never early.
   */
  record(): void {
    this.#stamps.push(this.#clock.now());
    this.#prune(this.#clock.now());
  }

  #prune(now: number): void {
    while (this.#stamps.length > 0 && this.#stamps[0]! + this.#windowMs + this.#marginMs <= now) this.#stamps.shift();
  }
}
