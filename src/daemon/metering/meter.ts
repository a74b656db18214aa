// The usage meter (docs/operations.md, "Usage metering"): every second it collects what the gateway relayed since the last time (open
// connections included) and flushes it to the store as one flush with an id of its own. A flush the store
// could not take is sent again with the same id (so a flush that did commit despite a timeout counts once);
// what arrives meanwhile waits for the next flush. A node killed with SIGKILL loses at most the second it had
// not flushed; a database away for a while loses nothing (the counts wait in memory, merged per key).
import { randomBytes } from 'node:crypto';
import { usageKey } from '../../gateway/index.js';
import type { UsageDelta } from '../../gateway/types.js';
import { StoreUnavailableError, type UsagePeriod, type UsageStore } from '../store/index.js';
import { DEFAULT_USAGE_RETENTION_MS, OTHER_DOMAIN } from '../store/usage-sql.js';
import { registrableDomain } from './domains.js';

export interface MeterOptions {
  intervalMs?: number;
  /** How long buckets are kept, per period (ms). */
  retentionMs?: Record<UsagePeriod, number>;
  log?: { warn(obj: object, msg?: string): void };
}

const PRUNE_EVERY_MS = 600_000;

interface Flush {
  id: string;
  atMs: number;
  deltas: UsageDelta[];
}

export class UsageMeter {
  private readonly prefix = randomBytes(6).toString('hex');
  private seq = 0;
  /** Collected, not yet in a flush; merged per account, subject and registrable domain (in `target`). */
  private pending = new Map<string, UsageDelta>();
  /** The flush being sent (or waiting to be sent again, with its id). */
  private outgoing: Flush | null = null;
  private sending: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private pruneTimer: NodeJS.Timeout | null = null;
  private lastWarn = 0;
  /** Node totals, for /metrics. */
  flushed = 0;
  failedFlushes = 0;

  constructor(
    /** The database, or (a worker on SQLite) the primary, which writes for every worker. */
    private readonly store: Pick<UsageStore, 'addFlush' | 'prune'>,
    private readonly collect: () => UsageDelta[],
    private readonly opts: MeterOptions = {},
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.tick(), this.opts.intervalMs ?? 1_000);
    this.timer.unref();
    const retention = this.opts.retentionMs ?? DEFAULT_USAGE_RETENTION_MS;
    const prune = () => {
      for (const p of Object.keys(retention) as UsagePeriod[]) void this.store.prune(p, Date.now() - retention[p]).catch(() => {});
    };
    prune();
    this.pruneTimer = setInterval(prune, PRUNE_EVERY_MS);
    this.pruneTimer.unref();
  }

  private gather(): void {
    for (const d of this.collect()) {
      const domain = d.target ? registrableDomain(d.target) : OTHER_DOMAIN;
      const key = `${usageKey(d.accountId, d.subject)}\0${domain}`;
      const p = this.pending.get(key);
      if (!p) this.pending.set(key, { ...d, target: domain });
      else {
        p.bytesUp += d.bytesUp;
        p.bytesDown += d.bytesDown;
        p.connections += d.connections;
      }
    }
  }

  /** Collect, then flush (one flush in flight at a time). */
  tick(): Promise<void> {
    this.gather();
    return (this.sending ??= this.send().finally(() => {
      this.sending = null;
    }));
  }

  private async send(): Promise<void> {
    if (!this.outgoing) {
      if (this.pending.size === 0) return;
      this.outgoing = { id: `${this.prefix}-${++this.seq}`, atMs: Date.now(), deltas: [...this.pending.values()] };
      this.pending = new Map();
    }
    const f = this.outgoing;
    let outcome: string;
    try {
      outcome = await this.store.addFlush(this.prefix, f.id, f.atMs, f.deltas);
    } catch (e) {
      outcome = e instanceof StoreUnavailableError ? 'unavailable' : `error: ${e instanceof Error ? e.message : String(e)}`;
    }
    if (outcome === 'ok' || outcome === 'duplicate') {
      this.outgoing = null;
      this.flushed++;
      return;
    }
    // Kept with its id: sent again on the next tick; new usage waits in `pending`.
    this.failedFlushes++;
    const now = Date.now();
    if (now - this.lastWarn >= 10_000) {
      this.lastWarn = now;
      this.opts.log?.warn({ event: 'usage_flush_failed', detail: outcome }, 'usage flush not written: kept, sent again');
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
      this.outgoing = { id: `${this.prefix}-${++this.seq}`, atMs: Date.now(), deltas: picked };
      await (this.sending = this.send().finally(() => {
        this.sending = null;
      }));
      return this.outgoing === null;
    }
    return false;
  }

  /** Usage collected but not yet written (pending and the flush in flight), bytes per account and subject. */
  unflushed(): Array<{ accountId: number; subject: string; bytes: number }> {
    return [...this.pending.values(), ...(this.outgoing?.deltas ?? [])].map((d) => ({ accountId: d.accountId, subject: d.subject, bytes: d.bytesUp + d.bytesDown }));
  }

  /** Stops the timers and flushes what is left (for at most `deadlineMs`). */
  async stop(deadlineMs = 3_000): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    if (this.pruneTimer) clearInterval(this.pruneTimer);
    const until = Date.now() + deadlineMs;
    while (Date.now() < until) {
      await this.tick();
      if (!this.outgoing && this.pending.size === 0) return;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
