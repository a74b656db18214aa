// traffic: per-account byte and connection totals, flushed from the gateway's in-memory counters.
import type { TrafficDelta, TrafficStore } from '../types.js';
import { isBusyError, type Db } from './db.js';
import { stmt } from './statements.js';

export class SqliteTrafficStore implements TrafficStore {
  constructor(
    /** The connection to write on (a no-wait one: a lock held elsewhere is `busy`, never a sleep). */
    private readonly writer: () => Db,
    private readonly nowSec: () => number,
  ) {}

  async add(deltas: Map<number, TrafficDelta>): Promise<'ok' | 'busy'> {
    if (deltas.size === 0) return 'ok';
    const db = this.writer();
    const upsert = stmt(db,
      `INSERT INTO traffic (account_id, bytes_up, bytes_down, connections, updated_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT(account_id) DO UPDATE SET bytes_up = bytes_up + excluded.bytes_up, bytes_down = bytes_down + excluded.bytes_down,
         connections = connections + excluded.connections, updated_at = excluded.updated_at`,
    );
    const now = this.nowSec();
    try {
      db.transaction(() => {
        for (const [accountId, d] of deltas) upsert.run(accountId, d.bytesUp, d.bytesDown, d.connections, now);
      })();
      return 'ok';
    } catch (e) {
      if (isBusyError(e)) return 'busy';
      throw e;
    }
  }
}
