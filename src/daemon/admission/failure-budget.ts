// What a failed proxy login may cost. Checking a password that is not in the verified cache runs scrypt
// (~50 ms of a core, on libuv's pool): 48 wrong passwords a second were enough to fill the pool and slow
// every customer of the node. Every such check draws on three budgets: its source IP's, the username's
// and the node's; a check that fails spends its tokens, one that succeeds gives them back. With a
// budget empty the attempt is refused (the same uniform 407) without hashing, whether or not the user
// exists. Known good credentials never reach here (the verified cache answers them first), so a customer
// whose password is cached is unaffected by any flood; a flood aimed at one username can delay that user's
// *first* login from a new password for as long as it lasts, never anyone else's.

import { refilled } from '../../rules/token-bucket.js';
import { sourceLimitKey } from '../services/source-ip.js';

interface Bucket {
  tokens: number;
  at: number;
}

export interface BudgetOptions {
  /** Failures a source IP may cause: burst, then per second. */
  perSource?: { burst: number; perSec: number };
  /** Failures against one username (existing or not): burst, then per second. */
  perUser?: { burst: number; perSec: number };
  /** Failures on the whole node (process): burst, then per second. */
  perNode?: { burst: number; perSec: number };
  /** Password checks in flight on the node at once (the rest wait their turn; past `queue` they are refused). */
  concurrent?: number;
  queue?: number;
  /** Bound on the source and username tables (oldest dropped first). */
  maxKeys?: number;
  nowMs?: () => number;
}

const DEFAULTS = {
  perSource: { burst: 20, perSec: 2 },
  perUser: { burst: 30, perSec: 5 },
  // ~35 ms of a core per check: 10 failures a second is about a third of one core, whatever the flood.
  perNode: { burst: 20, perSec: 10 },
  // One check at a time per process: at most one core hashing (~35 ms each), whatever arrives; the event
  // loop and libuv's other threads keep the rest of the machine. More can wait their turn, up to `queue`.
  concurrent: 1,
  queue: 32,
  maxKeys: 50_000,
};

class Buckets {
  private readonly map = new Map<string, Bucket>();
  constructor(
    private readonly burst: number,
    private readonly perSec: number,
    private readonly maxKeys: number,
  ) {}

  /** Tokens `key` has now (refilled since last seen). */
  private bucket(key: string, now: number): Bucket {
    let b = this.map.get(key);
    if (!b) {
      if (this.map.size >= this.maxKeys) {
        let drop = Math.ceil(this.maxKeys / 10);
        for (const k of this.map.keys()) {
          if (drop-- <= 0) break;
          this.map.delete(k);
        }
      }
      b = { tokens: this.burst, at: now };
      this.map.set(key, b);
    } else {
      b.tokens = refilled(b.tokens, now - b.at, this.perSec, this.burst);
      b.at = now;
    }
    return b;
  }

  has(key: string, now: number): boolean {
    return this.bucket(key, now).tokens >= 1;
  }

  take(key: string, now: number): void {
    this.bucket(key, now).tokens -= 1;
  }

  give(key: string, now: number): void {
    const b = this.bucket(key, now);
    b.tokens = Math.min(this.burst, b.tokens + 1);
  }

  get size(): number {
    return this.map.size;
  }
}

export class FailureBudget {
  private readonly sources: Buckets;
  private readonly users: Buckets;
  private readonly node: Buckets;
  private running = 0;
  private readonly waiting: Array<() => void> = [];
  private readonly now: () => number;
  private readonly concurrent: number;
  private readonly queue: number;
  /** Attempts refused without a hash, for /metrics. */
  refused = 0;

  constructor(o: BudgetOptions = {}) {
    const ps = o.perSource ?? DEFAULTS.perSource;
    const pu = o.perUser ?? DEFAULTS.perUser;
    const maxKeys = o.maxKeys ?? DEFAULTS.maxKeys;
    this.sources = new Buckets(ps.burst, ps.perSec, maxKeys);
    this.users = new Buckets(pu.burst, pu.perSec, maxKeys);
    const pn = o.perNode ?? DEFAULTS.perNode;
    this.node = new Buckets(pn.burst, pn.perSec, 1);
    this.concurrent = o.concurrent ?? DEFAULTS.concurrent;
    this.queue = o.queue ?? DEFAULTS.queue;
    this.now = o.nowMs ?? Date.now;
  }

  /**
   * Runs `check` (a password hash comparison) if the budgets allow, else answers 'skipped' at once (a refusal
   * whose password was never compared). A failed check spends a token from the source's and the username's
   * budgets; a good one costs nothing.
   */
  async run(source: string | null, username: string, check: () => Promise<boolean>): Promise<boolean | 'skipped'> {
    const now = this.now();
    // An IPv6 source by its /64 (a host holds a whole /64: by address it had 2^64 fresh budgets).
    const src = source === null ? '-' : sourceLimitKey(source);
    if (
      !this.sources.has(src, now) ||
      !this.users.has(username, now) ||
      !this.node.has('', now) ||
      this.waiting.length >= this.queue
    ) {
      this.refused++;
      return 'skipped';
    }
    // Spent up front, so that many concurrent attempts cannot all pass the check above; returned on success.
    this.sources.take(src, now);
    this.users.take(username, now);
    this.node.take('', now);
    if (this.running >= this.concurrent) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.running++;
    try {
      const ok = await check();
      if (ok) {
        this.sources.give(src, this.now());
        this.users.give(username, this.now());
        this.node.give('', this.now());
      }
      return ok;
    } finally {
      this.running--;
      this.waiting.shift()?.();
    }
  }

  get trackedKeys(): number {
    return this.sources.size + this.users.size;
  }
}
