// Usage by dedicated address (docs/api.md, usage summary `ips`): what the gateway metered for accounts holding
// dedicated addresses, by the address their connections left from, written every 5 s to the UTC day's row.
// A write that fails keeps its deltas for the next one (added, never counted twice: one writer per process).
import type { EgressUsageDelta, Store } from '../store/index.js';
import { DAY_MS } from '../../rules/time.js';

/** How often it writes: usage by address is not what limits enforce, so it need not cost a commit every second. */
export const DEFAULT_FLUSH_MS = 5_000;

export class EgressUsageWriter {
  private pending = new Map<string, EgressUsageDelta>();
  private pendingDay = 0;
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> | null = null;
  private lastPrune = 0;
  private lastWarn = 0;

  constructor(
    private readonly store: Store,
    private readonly o: {
      retentionMs: number;
      flushMs?: number;
      now?: () => number;
      log?: { warn(obj: object, msg?: string): void };
    },
  ) {}

  /** Deltas just collected from the gateway (with the rest of the usage). */
  add(rows: readonly EgressUsageDelta[]): void {
    if (rows.length === 0) return;
    const day = this.day();
    // A new day: what is pending stays with the day it was metered in (written first).
    if (this.pending.size > 0 && day !== this.pendingDay) void this.flush();
    if (this.pending.size === 0) this.pendingDay = day;
    for (const r of rows) {
      const k = `${r.accountId}\0${r.address}`;
      const e = this.pending.get(k);
      if (e) {
        e.bytesUp += r.bytesUp;
        e.bytesDown += r.bytesDown;
        e.connections += r.connections;
      } else this.pending.set(k, { ...r });
    }
  }

  private day(): number {
    const now = (this.o.now ?? Date.now)();
    return now - (now % DAY_MS);
  }

  start(): void {
    this.timer = setInterval(() => void this.flush(), this.o.flushMs ?? DEFAULT_FLUSH_MS);
    this.timer.unref();
  }

  flush(): Promise<void> {
    return (this.writing ??= this.write().finally(() => (this.writing = null)));
  }

  private async write(): Promise<void> {
    if (this.pending.size > 0) {
      const rows = [...this.pending.values()];
      const day = this.pendingDay;
      this.pending = new Map();
      try {
        await this.store.egress.addUsage(rows, day);
      } catch (e) {
        // Kept for the next write (under the day it was metered in, if none newer is pending).
        if (this.pending.size === 0) this.pendingDay = day;
        if (this.pendingDay === day) for (const r of rows) this.add([r]);
        this.warn(e);
      }
    }
    const now = (this.o.now ?? Date.now)();
    if (now - this.lastPrune > 3_600_000) {
      this.lastPrune = now;
      await this.store.egress.pruneUsage(now - this.o.retentionMs).catch(() => 0);
    }
  }

  private warn(e: unknown): void {
    const now = Date.now();
    if (now - this.lastWarn < 10_000) return;
    this.lastWarn = now;
    this.o.log?.warn(
      { event: 'egress_usage_write_failed', detail: e instanceof Error ? e.message : String(e) },
      'usage by address not written: kept for the next write',
    );
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.flush();
  }
}
