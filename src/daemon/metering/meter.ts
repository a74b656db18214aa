// The usage meter (docs/operations.md, "Usage metering"): every second it collects what the gateway relayed since the last time (open
// connections included) and flushes it to the store as one flush with an id of its own. A flush the store
// could not take is sent again with the same id (so a flush that did commit despite a timeout counts once);
// what arrives meanwhile waits for the next flush. A database away for a while loses nothing (the counts wait in
// memory, merged per key). Which usage a flush carries (docs/decisions.md#d-027, "Usage writes"): accounts under a
// traffic limit every second; on PostgreSQL the others every `relaxedIntervalMs` (4 s) and the per-domain usage
// every `domainIntervalMs` (60 s), so the database writes about one row per active user every few seconds. A node
// killed with SIGKILL loses at most what it had not flushed: its last second of limited accounts, its last
// relaxed interval of the others, its last domain interval of the per-domain split (SQLite: every second, all).
import { randomBytes } from 'node:crypto';
import { usageKey, usageTargetKey } from '../../rules/usage-key.js';
import type { UsageDelta } from '../../gateway/types.js';
import { StoreUnavailableError, type FlushDomains, type UsagePeriod, type UsageStore } from '../store/index.js';
import { DEFAULT_USAGE_RETENTION_MS, OTHER_DOMAIN, bucketStart } from '../store/usage-sql.js';
import { registrableDomain } from './domains.js';

export interface MeterOptions {
  intervalMs?: number;
  /**
   * How often usage of accounts that are not `urgent` is written (a multiple of `intervalMs`; default: every
   * tick). On PostgreSQL a flush row per user and flush is the database's metering work (docs/decisions.md#d-027,
   * "Usage writes"), so accounts without a traffic limit are written every few seconds, within the 5 s of
   * visibility, and those under a limit every tick.
   */
  relaxedIntervalMs?: number;
  /** How often usage per domain is written (default: with every flush); always at the end of a UTC day. */
  domainIntervalMs?: number;
  /** Accounts written every tick (those under a traffic limit); default: all. */
  urgent?: (accountId: number) => boolean;
  /** How often the store's roll-up (minute buckets folded into hours and days: PostgreSQL) is asked for. */
  rollUpEveryMs?: number;
  /** How long buckets are kept, per period (ms). */
  retentionMs?: Record<UsagePeriod, number>;
  log?: { warn(obj: object, msg?: string): void };
  nowMs?: () => number;
  /** How much of the relaxed and domain intervals counts as gone at start, 0 to 1 (default: random, so nodes started together spread). */
  phase?: number;
}

/** On PostgreSQL: accounts without a traffic limit are flushed this often (visible within 5 s, p95: docs/benchmarks/fleet-scale.md). */
export const RELAXED_FLUSH_MS = 4_000;
/** On PostgreSQL: usage per domain is flushed this often (and at the end of each UTC day). */
export const DOMAIN_FLUSH_MS = 60_000;
/** The meter's cadence on PostgreSQL (serve.ts; bench/fleet-scale.mjs measures it). */
export const PG_CADENCE = { relaxedIntervalMs: RELAXED_FLUSH_MS, domainIntervalMs: DOMAIN_FLUSH_MS } as const;
const PRUNE_EVERY_MS = 600_000;
const ROLL_UP_EVERY_MS = 60_000;

interface Flush {
  id: string;
  atMs: number;
  /** One per account and subject: the buckets. */
  deltas: UsageDelta[];
  /** One per account, subject and registrable domain (in `target`): the domain rows, in the day of their `atMs`. */
  domains: FlushDomains;
  /** When the oldest usage in `deltas` was collected (null: only domain rows). */
  sinceMs: number | null;
}

export class UsageMeter {
  private readonly prefix = randomBytes(6).toString('hex');
  private seq = 0;
  /** Collected, not yet in a flush: per account and subject (the buckets)… */
  private pending = new Map<string, UsageDelta>();
  /** When the oldest usage in `pending` was collected (null: nothing pending). */
  private pendingSinceMs: number | null = null;
  /** …and per account, subject and registrable domain (in `target`), written less often (`domainIntervalMs`). */
  private pendingDomains = new Map<string, UsageDelta>();
  /** Domain usage of a UTC day that ended, waiting for the next flush (in that day's rows). */
  private dueDomains: FlushDomains | null = null;
  private lastGatherMs = 0;
  private lastRelaxedMs = 0;
  private lastDomainsMs = 0;
  /** Stopping: every flush takes everything. */
  private draining = false;
  /** The flush being sent (or waiting to be sent again, with its id). */
  private outgoing: Flush | null = null;
  private sending: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private pruneTimer: NodeJS.Timeout | null = null;
  private rollUpTimer: NodeJS.Timeout | null = null;
  private lastWarn = 0;
  private readonly now: () => number;
  /** Node totals, for /metrics. */
  flushed = 0;
  failedFlushes = 0;

  constructor(
    /** The database, or (a worker on SQLite) the primary, which writes for every worker. */
    private readonly store: Pick<UsageStore, 'addFlush' | 'prune'> & Partial<Pick<UsageStore, 'rollUp'>>,
    private readonly collect: () => UsageDelta[],
    private readonly opts: MeterOptions = {},
  ) {
    this.now = opts.nowMs ?? Date.now;
    // A random phase: nodes started together (a fleet restarted at once) do not all flush in the same second.
    const now = this.now();
    const phase = opts.phase ?? Math.random();
    this.lastRelaxedMs = now - phase * (opts.relaxedIntervalMs ?? 0);
    this.lastDomainsMs = now - phase * (opts.domainIntervalMs ?? 0);
  }

  start(): void {
    this.timer = setInterval(() => void this.tick(), this.opts.intervalMs ?? 1_000);
    this.timer.unref();
    const retention = this.opts.retentionMs ?? DEFAULT_USAGE_RETENTION_MS;
    const prune = () => {
      for (const p of Object.keys(retention) as UsagePeriod[])
        void this.store.prune(p, Date.now() - retention[p]).catch(() => {});
    };
    prune();
    this.pruneTimer = setInterval(prune, PRUNE_EVERY_MS);
    this.pruneTimer.unref();
    if (this.store.rollUp) {
      this.rollUpTimer = setInterval(() => void this.rollUp(), this.opts.rollUpEveryMs ?? ROLL_UP_EVERY_MS);
      this.rollUpTimer.unref();
    }
  }

  /** Asks the store to fold finished minutes (one node of the fleet does it; the others are told 'skipped'). */
  async rollUp(): Promise<number | 'skipped'> {
    try {
      return (await this.store.rollUp?.()) ?? 'skipped';
    } catch (e) {
      this.warn('usage_roll_up_failed', e instanceof Error ? e.message : String(e));
      return 'skipped';
    }
  }

  private gather(): void {
    const now = this.now();
    // A UTC day ended since the last collection: its domain usage goes into that day's rows.
    if (
      this.pendingDomains.size > 0 &&
      bucketStart('day', now) !== bucketStart('day', this.lastGatherMs) &&
      !this.dueDomains
    ) {
      this.dueDomains = { atMs: this.lastGatherMs, deltas: [...this.pendingDomains.values()] };
      this.pendingDomains = new Map();
    }
    this.lastGatherMs = now;
    const collected = this.collect();
    if (collected.length > 0) this.pendingSinceMs ??= now;
    for (const d of collected) {
      const domain = d.target ? registrableDomain(d.target) : OTHER_DOMAIN;
      add(this.pending, usageKey(d.accountId, d.subject), d, undefined);
      add(this.pendingDomains, usageTargetKey(d.accountId, d.subject, domain), d, domain);
    }
  }

  /** Collect, then flush (one flush in flight at a time). */
  tick(): Promise<void> {
    this.gather();
    return (this.sending ??= this.send().finally(() => {
      this.sending = null;
    }));
  }

  /** What is due now: urgent accounts every tick, the others and the domains when their interval has passed. */
  private nextFlush(): Flush | null {
    const now = this.now();
    const half = (this.opts.intervalMs ?? 1_000) / 2;
    const relaxed = this.draining || now - this.lastRelaxedMs >= (this.opts.relaxedIntervalMs ?? 0) - half;
    const urgent = this.opts.urgent;
    let deltas: UsageDelta[];
    if (relaxed || !urgent) {
      deltas = [...this.pending.values()];
      this.pending = new Map();
      if (relaxed) this.lastRelaxedMs = now;
    } else {
      deltas = [];
      for (const [k, d] of this.pending) {
        if (!urgent(d.accountId)) continue;
        deltas.push(d);
        this.pending.delete(k);
      }
    }
    let domains: FlushDomains = { atMs: now, deltas: [] };
    if (this.dueDomains) {
      domains = this.dueDomains;
      this.dueDomains = null;
    } else if (
      this.pendingDomains.size > 0 &&
      (this.draining || now - this.lastDomainsMs >= (this.opts.domainIntervalMs ?? 0) - half)
    ) {
      domains = { atMs: now, deltas: [...this.pendingDomains.values()] };
      this.pendingDomains = new Map();
      this.lastDomainsMs = now;
    }
    if (deltas.length === 0 && domains.deltas.length === 0) return null;
    return { id: `${this.prefix}-${++this.seq}`, atMs: now, deltas, domains, sinceMs: this.tookPending(deltas) };
  }

  private async send(): Promise<void> {
    if (!this.outgoing) {
      this.outgoing = this.nextFlush();
      if (!this.outgoing) return;
    }
    const f = this.outgoing;
    let outcome: string;
    try {
      outcome = await this.store.addFlush(this.prefix, f.id, f.atMs, f.deltas, f.domains);
    } catch (e) {
      outcome =
        e instanceof StoreUnavailableError ? 'unavailable' : `error: ${e instanceof Error ? e.message : String(e)}`;
    }
    if (outcome === 'ok' || outcome === 'duplicate') {
      this.outgoing = null;
      this.flushed++;
      return;
    }
    // Kept with its id: sent again on the next tick; new usage waits in `pending`.
    this.failedFlushes++;
    this.warn('usage_flush_failed', outcome);
  }

  private warn(event: string, detail: string): void {
    const now = Date.now();
    if (now - this.lastWarn >= 10_000) {
      this.lastWarn = now;
      this.opts.log?.warn(
        { event, detail },
        event === 'usage_flush_failed'
          ? 'usage flush not written: kept, sent again'
          : 'usage roll-up failed: tried again later',
      );
    }
  }

  /**
   * Collects now and writes these accounts' usage at once, in a flush of their own (a plan's byte budget is
   * granted again only once this node's bytes of it are in the store: metering/plans.ts). Waits for a flush
   * already under way first. False when the store did not take it (kept, sent again like any flush).
   */
  async flushAccounts(accounts: ReadonlySet<number>): Promise<boolean> {
    this.gather();
    for (let round = 0; round < 4; round++) {
      if (this.sending || this.outgoing) {
        await this.tick();
        if (this.outgoing) return false;
        continue;
      }
      const picked: UsageDelta[] = [];
      for (const [key, d] of this.pending) {
        if (!accounts.has(d.accountId)) continue;
        picked.push(d);
        this.pending.delete(key);
      }
      if (picked.length === 0) return true;
      const now = this.now();
      this.outgoing = {
        id: `${this.prefix}-${++this.seq}`,
        atMs: now,
        deltas: picked,
        domains: { atMs: now, deltas: [] },
        sinceMs: this.tookPending(picked),
      };
      await (this.sending = this.send().finally(() => {
        this.sending = null;
      }));
      return this.outgoing === null;
    }
    return false;
  }

  /** When the usage just taken from `pending` was collected at the earliest; what stays pending keeps its time. */
  private tookPending(taken: UsageDelta[]): number | null {
    const since = taken.length > 0 ? this.pendingSinceMs : null;
    if (this.pending.size === 0) this.pendingSinceMs = null;
    return since;
  }

  /**
   * How long the oldest usage collected and not yet in the database has waited (ms; 0: all written). Domain rows,
   * written once a minute by design, are not counted. /metrics `proxyd_usage_flush_lag_seconds`.
   */
  lagMs(): number {
    const a = this.outgoing?.sinceMs ?? null;
    const b = this.pendingSinceMs;
    const oldest = a === null ? b : b === null ? a : Math.min(a, b);
    return oldest === null ? 0 : Math.max(0, this.now() - oldest);
  }

  /** Usage collected but not yet written (pending and the flush in flight), bytes per account and subject. */
  unflushed(): Array<{ accountId: number; subject: string; bytes: number }> {
    return [...this.pending.values(), ...(this.outgoing?.deltas ?? [])].map((d) => ({
      accountId: d.accountId,
      subject: d.subject,
      bytes: d.bytesUp + d.bytesDown,
    }));
  }

  /** Stops the timers and flushes what is left (for at most `deadlineMs`). */
  async stop(deadlineMs = 3_000): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    if (this.pruneTimer) clearInterval(this.pruneTimer);
    if (this.rollUpTimer) clearInterval(this.rollUpTimer);
    this.draining = true;
    const until = Date.now() + deadlineMs;
    while (Date.now() < until) {
      await this.tick();
      if (!this.outgoing && this.pending.size === 0 && this.pendingDomains.size === 0 && !this.dueDomains) return;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** Adds `d` into the map's delta under `key` (a copy the first time; `target` as given). */
function add(into: Map<string, UsageDelta>, key: string, d: UsageDelta, target: string | undefined): void {
  const p = into.get(key);
  if (!p)
    into.set(key, {
      accountId: d.accountId,
      subject: d.subject,
      ...(target !== undefined ? { target } : {}),
      bytesUp: d.bytesUp,
      bytesDown: d.bytesDown,
      connections: d.connections,
    });
  else {
    p.bytesUp += d.bytesUp;
    p.bytesDown += d.bytesDown;
    p.connections += d.connections;
  }
}
