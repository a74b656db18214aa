// The exit-node registry on PostgreSQL (SPEC 13): a row per exit, its heartbeat stamped by the database's
// clock so entries on other hosts judge its age without trusting theirs.
import type { ExitNodeRow, ExitStore } from '../types.js';
import { guard } from './db.js';
import { PgFamily } from './family.js';

export class PgExitStore extends PgFamily implements ExitStore {
  async heartbeat(e: { node: string; hop: string; country: string | null; city: string | null }): Promise<void> {
    await guard(() => this.sql`
      INSERT INTO exit_nodes (node, hop, country, city) VALUES (${e.node}, ${e.hop}, ${e.country}, ${e.city})
      ON CONFLICT (node) DO UPDATE SET hop = excluded.hop, country = excluded.country, city = excluded.city, heartbeat_at = now()`);
  }

  async remove(node: string): Promise<void> {
    await guard(() => this.sql`DELETE FROM exit_nodes WHERE node = ${node}`);
  }

  async list(withinMs: number): Promise<ExitNodeRow[]> {
    const rows = await guard(() => this.sql<{ node: string; hop: string; country: string | null; city: string | null; age_ms: string }[]>`
      SELECT node, hop, country, city, (EXTRACT(EPOCH FROM (now() - heartbeat_at)) * 1000)::bigint AS age_ms
      FROM exit_nodes WHERE heartbeat_at > now() - make_interval(secs => ${withinMs / 1000}) ORDER BY node`);
    return rows.map((r) => ({ node: r.node, hop: r.hop, country: r.country, city: r.city, ageMs: Number(r.age_ms) }));
  }
}
