// Per-account traffic counted in memory by the gateway and flushed to the store every few seconds.
// Open connections per account are counted once, by the gateway (GatewayCore), which enforces the cap.
import type { TrafficSink } from '../gateway/types.js';
import type { Store } from './store/index.js';
import type { TrafficDelta } from './store/traffic.js';

export class TrafficAccumulator implements TrafficSink {
  private pending = new Map<number, TrafficDelta>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly store: Store) {}

  private delta(accountId: number): TrafficDelta {
    let d = this.pending.get(accountId);
    if (!d) {
      d = { bytesUp: 0, bytesDown: 0, connections: 0 };
      this.pending.set(accountId, d);
    }
    return d;
  }

  connectionOpened(accountId: number): void {
    this.delta(accountId).connections++;
  }

  connectionClosed(accountId: number, bytesUp: number, bytesDown: number): void {
    const d = this.delta(accountId);
    d.bytesUp += bytesUp;
    d.bytesDown += bytesDown;
  }

  start(intervalMs = 5000): void {
    this.timer = setInterval(() => this.flush(), intervalMs);
    this.timer.unref();
  }

  flush(): void {
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    try {
      this.store.traffic.add(batch);
    } catch {
      // Database busy: keep the counts for the next flush.
      for (const [id, d] of batch) {
        const p = this.delta(id);
        p.bytesUp += d.bytesUp;
        p.bytesDown += d.bytesDown;
        p.connections += d.connections;
      }
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.flush();
  }
}
