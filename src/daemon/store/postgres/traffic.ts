// Per-account traffic totals (PostgreSQL).
import type { TrafficDelta, TrafficStore } from '../types.js';
import { unlessBusy, PgFamily } from './family.js';

export class PgTrafficStore extends PgFamily implements TrafficStore {
  async add(deltas: Map<number, TrafficDelta>): Promise<'ok' | 'busy'> {
    if (deltas.size === 0) return 'ok';
    const now = this.nowSec();
    const r = await unlessBusy(() =>
      this.sql.begin(async (tx) => {
        for (const [accountId, d] of deltas) {
          await tx`
            INSERT INTO traffic (account_id, bytes_up, bytes_down, connections, updated_at)
            VALUES (${accountId}, ${d.bytesUp}, ${d.bytesDown}, ${d.connections}, ${now})
            ON CONFLICT (account_id) DO UPDATE SET bytes_up = traffic.bytes_up + excluded.bytes_up, bytes_down = traffic.bytes_down + excluded.bytes_down,
              connections = traffic.connections + excluded.connections, updated_at = excluded.updated_at`;
        }
      }),
    );
    return r === 'busy' ? r : 'ok';
  }
}
