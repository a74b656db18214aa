// Sticky sessions over an egress pool: a session key holds one pool index for MIN minutes from its
// first connection; a new session takes the least-used index, so it gets an address of its own while
// any address is free. Over an IPv6 prefix a session holds one random address of it instead. Memory is
// bounded (expiry sweep plus a cap that drops the oldest sessions).
import { MINUTE_MS } from '../../rules/time.js';

export interface StickyAssignment {
  /** Index into the pool's address list. */
  index: number;
  /** Epoch ms at which the session ends (MIN minutes after its first connection). */
  expiresAt: number;
}

/** Where sticky sessions live: this process's table, or the cluster primary's (asked over IPC). */
export interface StickySessions {
  /** The index the session holds; a new (or expired) session is assigned the least-used one. */
  assign(key: string, minutes: number): StickyAssignment | Promise<StickyAssignment>;
}

export interface SessionTableOptions {
  now?: () => number;
  /** Live sessions kept at most; beyond it the oldest session is dropped (it re-assigns on its next use). */
  maxSessions?: number;
}

export const DEFAULT_MAX_SESSIONS = 1_000_000;

/**
 * Sessions that end at a fixed time (MIN minutes after their first connection): lookup, an expiry sweep by
 * the minute (no scan of every session) and a cap on the live ones. Subclasses hear of each add and drop.
 */
export class ExpiringSessions<V extends { expiresAt: number }> {
  private readonly live = new Map<string, V>();
  /** Keys by the minute their session ends: the sweep frees memory without scanning every session. */
  private readonly endingIn = new Map<number, string[]>();
  private queued = 0;
  private sweptMinute: number;
  protected readonly now: () => number;
  private readonly maxSessions: number;

  constructor(opts: SessionTableOptions = {}) {
    this.now = opts.now ?? Date.now;
    this.maxSessions = opts.maxSessions ?? DEFAULT_MAX_SESSIONS;
    this.sweptMinute = Math.floor(this.now() / MINUTE_MS);
  }

  get liveSessions(): number {
    return this.live.size;
  }

  /** The live assignment of a session, if any (no assignment made). */
  get(key: string): V | undefined {
    const a = this.live.get(key);
    if (a && a.expiresAt <= this.now()) {
      this.drop(key, a);
      return undefined;
    }
    return a;
  }

  /** Record an assignment made elsewhere (a worker caching what the primary decided). */
  remember(key: string, a: V): void {
    this.sweep(this.now());
    const old = this.live.get(key);
    if (old) this.drop(key, old);
    while (this.live.size >= this.maxSessions) {
      const [oldest, v] = this.live.entries().next().value as [string, V];
      this.drop(oldest, v);
    }
    this.live.set(key, a);
    this.added(a);
    this.enqueue(key, a.expiresAt);
  }

  /** A session was recorded. */
  protected added(_a: V): void {}

  /** A session ended or was dropped. */
  protected dropped(_a: V): void {}

  private drop(key: string, a: V): void {
    this.live.delete(key);
    this.dropped(a);
  }

  /** Drop the sessions that ended in the minutes passed since the last sweep. */
  protected sweep(now: number): void {
    const minute = Math.floor(now / MINUTE_MS);
    if (minute <= this.sweptMinute) return;
    const visit = (m: number) => {
      const keys = this.endingIn.get(m);
      if (!keys) return;
      this.endingIn.delete(m);
      this.queued -= keys.length;
      for (const k of keys) {
        const a = this.live.get(k);
        // A key re-created since then is still live (and queued again in a later minute).
        if (a && a.expiresAt <= now) this.drop(k, a);
      }
    };
    // After a long pause (or a clock jump) visit the buckets that exist rather than every minute passed.
    if (minute - this.sweptMinute > this.endingIn.size)
      for (const m of [...this.endingIn.keys()]) {
        if (m < minute) visit(m);
      }
    else for (let m = this.sweptMinute; m < minute; m++) visit(m);
    this.sweptMinute = minute;
  }

  private enqueue(key: string, expiresAt: number): void {
    const minute = Math.floor(expiresAt / MINUTE_MS);
    const list = this.endingIn.get(minute);
    if (list) list.push(key);
    else this.endingIn.set(minute, [key]);
    // Keys of sessions dropped early (cap, re-assignment) stay queued: rebuild before they outgrow the live ones.
    if (++this.queued > 2 * this.live.size + 1024) {
      this.endingIn.clear();
      this.queued = 0;
      for (const [k, a] of this.live) this.enqueue(k, a.expiresAt);
    }
  }
}

export class SessionTable extends ExpiringSessions<StickyAssignment> implements StickySessions {
  /** Live sessions per pool index, and the indexes grouped by that count (exact least-used in O(1)). */
  private readonly load: Uint32Array;
  private readonly byLoad: Array<Set<number>>;
  private minLoad = 0;

  constructor(
    readonly size: number,
    opts: SessionTableOptions = {},
  ) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError('a session table needs at least one address');
    super(opts);
    this.load = new Uint32Array(size);
    this.byLoad = [new Set(Array.from({ length: size }, (_, i) => i))];
  }

  assign(key: string, minutes: number): StickyAssignment {
    const held = this.get(key);
    if (held) return held;
    const now = this.now();
    this.sweep(now); // before choosing, so ended sessions free their addresses
    const a = { index: this.leastUsed(), expiresAt: now + minutes * MINUTE_MS };
    this.remember(key, a);
    return a;
  }

  protected override added(a: StickyAssignment): void {
    this.bump(a.index, 1);
  }

  protected override dropped(a: StickyAssignment): void {
    this.bump(a.index, -1);
  }

  private leastUsed(): number {
    while (this.byLoad[this.minLoad]!.size === 0) this.minLoad++;
    // Sets keep insertion order and an index re-enters at the end: equal loads take turns.
    return this.byLoad[this.minLoad]!.values().next().value as number;
  }

  private bump(i: number, d: 1 | -1): void {
    const from = this.load[i]!;
    const to = from + d;
    this.byLoad[from]!.delete(i);
    (this.byLoad[to] ??= new Set()).add(i);
    this.load[i] = to;
    if (to < this.minLoad) this.minLoad = to;
  }
}

/** A session over an IPv6 egress prefix: the one address it leaves from until it ends. */
export interface HeldAddress {
  address: string;
  /** Epoch ms at which the session ends (MIN minutes after its first connection). */
  expiresAt: number;
}

/** Where sessions over a prefix live: this process's table, or the cluster primary's (asked over IPC). */
export interface StickyAddresses {
  /** The address the session holds; a new (or expired) session is given a fresh one. */
  assign(key: string, minutes: number): HeldAddress | Promise<HeldAddress>;
}

/** Sessions over an IPv6 prefix: a new session takes a fresh random address of the prefix (`pick`). */
export class AddressSessionTable extends ExpiringSessions<HeldAddress> implements StickyAddresses {
  constructor(
    private readonly pick: () => string,
    opts: SessionTableOptions = {},
  ) {
    super(opts);
  }

  assign(key: string, minutes: number): HeldAddress {
    const held = this.get(key);
    if (held) return held;
    const a = { address: this.pick(), expiresAt: this.now() + minutes * MINUTE_MS };
    this.remember(key, a);
    return a;
  }
}
