// A gateway's open tunnels (splice.ts makes them) and their idle sweep. Apart from splice.ts so that the core
// can hold them without importing a connection's module.
import { LiveSet, type LiveMember } from './live-set.js';

/** What the sweep needs of a tunnel: bytes moved since it last looked, and both sockets. */
export interface IdleTracked extends LiveMember {
  active: number;
  idleSweeps: number;
  client: { destroy(): void };
  upstream: { destroy(): void };
}

/**
 * A gateway's open tunnels, and their idle timeout without a timer refresh per chunk: a sweep every
 * quarter of the idle time ends tunnels that moved no byte either way for more than four sweeps.
 */
export class Tunnels {
  private readonly open = new LiveSet<IdleTracked>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly idleTimeoutMs: number) {}

  add(t: IdleTracked): void {
    this.open.add(t);
    this.timer ??= setInterval(() => this.sweep(), Math.max(10, this.idleTimeoutMs / 4)).unref();
  }

  delete(t: IdleTracked): void {
    this.open.delete(t);
  }

  private sweep(): void {
    for (const t of this.open) {
      if (t.active > 0) {
        t.active = 0;
        t.idleSweeps = 0;
      } else if (++t.idleSweeps > 4) {
        t.client.destroy();
        t.upstream.destroy();
      }
    }
    if (this.open.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }
}
