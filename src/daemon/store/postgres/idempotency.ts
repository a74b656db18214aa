// idempotency_keys (migration 22): Idempotency-Key answers per account and key, shared by the fleet (docs/api.md, "Idempotency").
import type { IdempotencyClaim, IdempotencyRequest, IdempotencyStore } from '../types.js';
import { guard, type Sql } from './db.js';
import { PgFamily } from './family.js';

interface KeyRow {
  method: string;
  path: string;
  body_hash: string;
  status: number | null;
  response: string | null;
  created_at_ms: string;
}

export class PgIdempotencyStore extends PgFamily implements IdempotencyStore {
  async claim(r: IdempotencyRequest): Promise<IdempotencyClaim> {
    return guard(
      () =>
        this.sql.begin(async (tx) => {
          const q = tx as unknown as Sql;
          // The insert wins or finds the row; a forgotten (24 h) or abandoned claim is taken over under the row's lock.
          const [mine] = await q<{ k: string }[]>`
          INSERT INTO idempotency_keys (account_id, key, method, path, body_hash, status, response, created_at_ms)
          VALUES (${r.accountId}, ${r.key}, ${r.method}, ${r.path}, ${r.bodyHash}, NULL, NULL, ${r.nowMs})
          ON CONFLICT (account_id, key) DO NOTHING RETURNING key AS k`;
          if (mine) return { kind: 'claimed' } as IdempotencyClaim;
          const [row] = await q<KeyRow[]>`
          SELECT method, path, body_hash, status, response, created_at_ms FROM idempotency_keys
          WHERE account_id = ${r.accountId} AND key = ${r.key} FOR UPDATE`;
          const created = Number(row!.created_at_ms);
          if (created <= r.nowMs - r.ttlMs || (row!.status === null && created <= r.nowMs - r.staleMs)) {
            await q`UPDATE idempotency_keys SET method = ${r.method}, path = ${r.path}, body_hash = ${r.bodyHash}, status = NULL, response = NULL, created_at_ms = ${r.nowMs}
            WHERE account_id = ${r.accountId} AND key = ${r.key}`;
            return { kind: 'claimed' } as IdempotencyClaim;
          }
          if (row!.method !== r.method || row!.path !== r.path || row!.body_hash !== r.bodyHash)
            return { kind: 'mismatch' } as IdempotencyClaim;
          if (row!.status === null || row!.response === null) return { kind: 'in_flight' } as IdempotencyClaim;
          return { kind: 'replay', status: row!.status, body: row!.response } as IdempotencyClaim;
        }) as Promise<IdempotencyClaim>,
    );
  }

  async finish(accountId: number, key: string, status: number, body: string): Promise<void> {
    await guard(
      () =>
        this
          .sql`UPDATE idempotency_keys SET status = ${status}, response = ${body} WHERE account_id = ${accountId} AND key = ${key}`,
    );
  }

  async release(accountId: number, key: string): Promise<void> {
    await guard(
      () => this.sql`DELETE FROM idempotency_keys WHERE account_id = ${accountId} AND key = ${key} AND status IS NULL`,
    );
  }

  async prune(beforeMs: number): Promise<number> {
    const r = await guard(() => this.sql`DELETE FROM idempotency_keys WHERE created_at_ms < ${beforeMs}`);
    return r.count;
  }
}
