// A rate budget: a token bucket of bytes per second shared by every connection of one proxy user (or account)
// on this node, one per direction. The pump takes from it as bytes pass and, when it is empty, parks the reader
// (as with the byte budget: reads pause, nothing is buffered past the one read under way) until a timer says
// enough has refilled. The bucket holds at most one second of rate: the burst after a quiet spell.
//
// Unlimited connections carry none (null): their pump does one more null check per read.
import { refilled } from '../../rules/token-bucket.js';

/** Monotonic milliseconds (a wall-clock step must not grant or withhold a second of rate). */
const monotonicMs = (): number => performance.now();

/** Wake parked readers once this much has refilled: 20 ms of rate, at least 1 KiB, at most 64 KiB. */
const quantumOf = (bytesPerSec: number): number => Math.max(1024, Math.min(64 * 1024, bytesPerSec / 50));

export class RateBucket {
  private tokens: number;
  private last: number;
  private waiters: Array<() => void> = [];
  private timer: NodeJS.Timeout | null = null;

  /**
   * @param bytesPerSec the rate (Infinity: none, parked readers go on)
   * @param parent the account's bucket when this is a proxy user's: both must have room.
   */
  constructor(
    private bytesPerSec: number,
    public parent: RateBucket | null = null,
    private readonly now: () => number = monotonicMs,
  ) {
    this.tokens = bytesPerSec;
    this.last = now();
  }

  get rate(): number {
    return this.bytesPerSec;
  }

  /** A new rate for every connection under it, open ones included; parked readers look again. */
  setRate(bytesPerSec: number): void {
    this.refill();
    this.bytesPerSec = bytesPerSec;
    if (this.tokens > bytesPerSec) this.tokens = bytesPerSec;
    this.wake();
  }

  private refill(): void {
    const t = this.now();
    this.tokens = refilled(this.tokens, t - this.last, this.bytesPerSec, this.bytesPerSec);
    this.last = t;
  }

  /** Whole bytes that may pass now (the parent's room too). */
  available(): number {
    if (this.bytesPerSec === Infinity) return this.parent === null ? Infinity : this.parent.available();
    this.refill();
    const own = this.tokens > 0 ? Math.floor(this.tokens) : 0;
    if (this.parent === null) return own;
    const p = this.parent.available();
    return p < own ? p : own;
  }

  take(n: number): void {
    if (this.bytesPerSec !== Infinity) this.tokens -= n;
    if (this.parent !== null) this.parent.take(n);
  }

  /** Calls `resume` once the bucket that is short (this one, or its parent) has refilled a little. */
  park(resume: () => void): void {
    if (this.parent !== null && (this.bytesPerSec === Infinity || this.tokens >= 1)) return this.parent.park(resume);
    this.waiters.push(resume);
    this.arm();
  }

  private arm(): void {
    if (this.timer !== null || this.waiters.length === 0) return;
    if (this.bytesPerSec === Infinity) return this.wake();
    const need = Math.min(quantumOf(this.bytesPerSec), this.bytesPerSec) - this.tokens;
    const ms = need <= 0 ? 1 : Math.ceil((need * 1000) / this.bytesPerSec);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.wake();
    }, ms);
    // A very low rate waits long: it must not keep a stopping process alive.
    this.timer.unref();
  }

  /** Parked readers look again (they park again while there is no room). */
  wake(): void {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.waiters.length === 0) return;
    const w = this.waiters;
    this.waiters = [];
    for (const resume of w) resume();
  }

  get parked(): number {
    return this.waiters.length;
  }
}

/** A user's (or account's) rate on this node, each direction separately: up = client to target. */
export interface RateBudget {
  up: RateBucket;
  down: RateBucket;
}
