// traffic: per-account byte and connection totals, flushed from the gateway's in-memory counters.
import type { Db } from './db.js';
import { stmt } from './statements.js';

export interface TrafficDelta {
  bytesUp: number;
  bytesDown: number;
  connections: number;
}

export class TrafficStore {
  constructor(
    private readonly db: Db,
    private readonly nowSec: () => number,
  ) {}

  add(deltas: Map<number, TrafficDelta>): void {
    if (deltas.size === 0) return;
    const upsert = stmt(this.db,
      `INSERT INTO traffic (account_id, bytes_up, bytes_down, connections, updated_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT(account_id) DO UPDATE SET bytes_up = bytes_up + excluded.bytes_up, bytes_down = bytes_down + excluded.bytes_down,
         connections = connections + excluded.connections, updated_at = excluded.updated_at`,
    );
    const now = this.nowSec();
    this.db.transaction(() => {
      for (const [accountId, d] of deltas) upsert.run(accountId, d.bytesUp, d.bytesDown, d.connections, now);
    })();
  }

  get(accountId: number): TrafficDelta {
    const r = stmt<[number], { bytes_up: number; bytes_down: number; connections: number }>(this.db, 'SELECT bytes_up, bytes_down, connections FROM traffic WHERE account_id = ?')
      .get(accountId);
    return { bytesUp: r?.bytes_up ?? 0, bytesDown: r?.bytes_down ?? 0, connections: r?.connections ?? 0 };
  }
}
