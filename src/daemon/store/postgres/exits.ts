// The exit-node registry on PostgreSQL: a row per exit, its heartbeat stamped by the database's clock so
// entries on other hosts judge its age without trusting theirs; and the hop's fleet secret with the one it
// replaced (exits accept both for their --hop-grace after a rotation).
import type { ExitNodeRow, ExitStore, HopSecretState } from '../types.js';
import { guard } from './db.js';
import { PgFamily } from './family.js';

const HOP_SECRET = 'hop';

export class PgExitStore extends PgFamily implements ExitStore {
  async heartbeat(e: {
    node: string;
    hop: string;
    country: string | null;
    city: string | null;
    fingerprints: readonly string[];
  }): Promise<void> {
    const fps = e.fingerprints.join(',');
    await guard(
      () => this.sql`
      INSERT INTO exit_nodes (node, hop, country, city, fingerprints) VALUES (${e.node}, ${e.hop}, ${e.country}, ${e.city}, ${fps})
      ON CONFLICT (node) DO UPDATE SET hop = excluded.hop, country = excluded.country, city = excluded.city,
        fingerprints = excluded.fingerprints, heartbeat_at = now()`,
    );
  }

  async remove(node: string): Promise<void> {
    await guard(() => this.sql`DELETE FROM exit_nodes WHERE node = ${node}`);
  }

  async list(withinMs: number): Promise<ExitNodeRow[]> {
    const rows = await guard(
      () => this.sql<
        {
          node: string;
          hop: string;
          country: string | null;
          city: string | null;
          fingerprints: string;
          age_ms: string;
        }[]
      >`
      SELECT node, hop, country, city, fingerprints, (EXTRACT(EPOCH FROM (now() - heartbeat_at)) * 1000)::bigint AS age_ms
      FROM exit_nodes WHERE heartbeat_at > now() - make_interval(secs => ${withinMs / 1000}) ORDER BY node`,
    );
    return rows.map((r) => ({
      node: r.node,
      hop: r.hop,
      country: r.country,
      city: r.city,
      fingerprints: r.fingerprints === '' ? [] : r.fingerprints.split(','),
      ageMs: Number(r.age_ms),
    }));
  }

  async requestCertRotation(node: string, withinMs: number): Promise<boolean> {
    const rows = await guard(
      () => this.sql`
      UPDATE exit_nodes SET rotate_cert_at = now()
      WHERE node = ${node} AND heartbeat_at > now() - make_interval(secs => ${withinMs / 1000}) RETURNING node`,
    );
    return rows.length > 0;
  }

  async claimCertRotation(node: string): Promise<boolean> {
    const rows = await guard(
      () => this.sql`
      UPDATE exit_nodes SET rotate_cert_at = NULL WHERE node = ${node} AND rotate_cert_at IS NOT NULL RETURNING node`,
    );
    return rows.length > 0;
  }

  async hopSecret(candidate: string): Promise<HopSecretState> {
    // Whichever node is first writes it; a node that lost the race reads the winner's on the next round.
    for (let i = 0; i < 5; i++) {
      const [r] = await guard(
        () => this.sql<{ value: string; previous: string | null; rotated_ago_ms: string | null }[]>`
        WITH ins AS (INSERT INTO fleet_secrets (name, value) VALUES (${HOP_SECRET}, ${candidate}) ON CONFLICT (name) DO NOTHING
                     RETURNING value, previous, rotated_at)
        SELECT value, previous, (EXTRACT(EPOCH FROM (now() - rotated_at)) * 1000)::bigint AS rotated_ago_ms FROM ins
        UNION ALL
        SELECT value, previous, (EXTRACT(EPOCH FROM (now() - rotated_at)) * 1000)::bigint FROM fleet_secrets WHERE name = ${HOP_SECRET}
        LIMIT 1`,
      );
      if (r)
        return {
          current: r.value,
          previous: r.previous,
          rotatedAgoMs: r.rotated_ago_ms === null ? null : Number(r.rotated_ago_ms),
        };
    }
    throw new Error('the hop secret could not be read');
  }

  async rotateHopSecret(fresh: string): Promise<void> {
    await guard(
      () => this.sql`
      INSERT INTO fleet_secrets (name, value) VALUES (${HOP_SECRET}, ${fresh})
      ON CONFLICT (name) DO UPDATE SET previous = fleet_secrets.value, value = excluded.value, rotated_at = now()`,
    );
  }
}
