// Per-account traffic counted in memory by the gateway and flushed to the store every few seconds.
// Open connections per account are counted once, by the gateway (GatewayCore), which enforces the cap.
import type { TrafficSink } from '../../gateway/types.js';
import type { Store, TrafficDelta } from '../store/index.js';

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
    this.timer = setInterval(() => void this.flush(), intervalMs);
    this.timer.unref();
  }

  async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    const r = await this.store.traffic.add(batch).catch(() => 'busy' as const);
    if (r === 'busy') {
      // Database busy or unreachable: keep the counts for the next flush.
      for (const [id, d] of batch) {
        const p = this.delta(id);
        p.bytesUp += d.bytesUp;
        p.bytesDown += d.bytesDown;
        p.connections += d.connections;
      }
    }
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.flush();
  }
}
