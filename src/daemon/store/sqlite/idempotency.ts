// idempotency_keys (migration 18): Idempotency-Key answers per account and key (docs/api.md, "Idempotency").
import type { IdempotencyClaim, IdempotencyRequest, IdempotencyStore } from '../types.js';
import type { Db } from './db.js';
import { stmt } from './statements.js';

interface KeyRow {
  method: string;
  path: string;
  body_hash: string;
  status: number | null;
  response: string | null;
  created_at_ms: number;
}

export class SqliteIdempotencyStore implements IdempotencyStore {
  constructor(private readonly db: Db) {}

  async claim(r: IdempotencyRequest): Promise<IdempotencyClaim> {
    // IMMEDIATE: the write lock first, so two processes on this file never both claim one key.
    return this.db
      .transaction((): IdempotencyClaim => {
        const row = stmt<[number, string], KeyRow>(
          this.db,
          'SELECT method, path, body_hash, status, response, created_at_ms FROM idempotency_keys WHERE account_id = ? AND key = ?',
        ).get(r.accountId, r.key);
        const forgotten = row && row.created_at_ms <= r.nowMs - r.ttlMs;
        const abandoned = row && row.status === null && row.created_at_ms <= r.nowMs - r.staleMs;
        if (!row || forgotten || abandoned) {
          stmt(
            this.db,
            `INSERT INTO idempotency_keys (account_id, key, method, path, body_hash, status, response, created_at_ms) VALUES (?, ?, ?, ?, ?, NULL, NULL, ?)
            ON CONFLICT (account_id, key) DO UPDATE SET method = excluded.method, path = excluded.path, body_hash = excluded.body_hash, status = NULL, response = NULL,
              created_at_ms = excluded.created_at_ms`,
          ).run(r.accountId, r.key, r.method, r.path, r.bodyHash, r.nowMs);
          return { kind: 'claimed' };
        }
        if (row.method !== r.method || row.path !== r.path || row.body_hash !== r.bodyHash) return { kind: 'mismatch' };
        if (row.status === null || row.response === null) return { kind: 'in_flight' };
        return { kind: 'replay', status: row.status, body: row.response };
      })
      .immediate();
  }

  async finish(accountId: number, key: string, status: number, body: string): Promise<void> {
    stmt(this.db, 'UPDATE idempotency_keys SET status = ?, response = ? WHERE account_id = ? AND key = ?').run(
      status,
      body,
      accountId,
      key,
    );
  }

  async release(accountId: number, key: string): Promise<void> {
    stmt(this.db, 'DELETE FROM idempotency_keys WHERE account_id = ? AND key = ? AND status IS NULL').run(
      accountId,
      key,
    );
  }

  async prune(beforeMs: number): Promise<number> {
    return stmt(this.db, 'DELETE FROM idempotency_keys WHERE created_at_ms < ?').run(beforeMs).changes;
  }
}
