// PostgreSQL's migration to a connection log in daily partitions, on a database that already has records:
// every record keeps its id and fields in its day's partition, new records number on after them, and a
// batch sent again still adds nothing.
import { describe, expect, it } from 'vitest';
import { connect, migrate } from '../../../src/daemon/store/postgres/db.js';
import { PG_MIGRATIONS } from '../../../src/daemon/store/postgres/migrations.js';
import { PostgresStore } from '../../../src/daemon/store/postgres/index.js';
import { createDatabase, postgresSkipReason } from '../../helpers/postgres.js';

const PARTITIONS = PG_MIGRATIONS.findIndex((m) => m.includes('PARTITION BY RANGE (started_ms)'));

describe.skipIf(postgresSkipReason())('PostgreSQL migrations', () => {
  it('moves existing connection-log records into daily partitions, ids and fields kept', async () => {
    const url = await createDatabase(undefined, { unmigrated: true });
    const sql = connect(url, 2, 'migration test');
    try {
      // The schema as it was before the partitions.
      await sql`CREATE TABLE proxyd_schema (version integer PRIMARY KEY, applied_at bigint NOT NULL)`;
      for (let v = 0; v < PARTITIONS; v++) {
        await sql.unsafe(PG_MIGRATIONS[v]!).simple();
        await sql`INSERT INTO proxyd_schema (version, applied_at) VALUES (${v + 1}, 0)`;
      }
      const day = 86_400_000;
      const t1 = Date.UTC(2026, 10, 20, 8);
      const t2 = t1 + 2 * day;
      for (const [i, t] of [t1, t1 + 5, t2].entries()) {
        await sql`INSERT INTO connection_log (started_ms, node, request_id, protocol, source_ip, username, account_id, target, reason, bytes_up, bytes_down, duration_ms, exit)
                  VALUES (${t}, 'n1', ${`req-${i}`}, 'connect', '203.0.113.5', 'alice', null, 'example.net:443', null, ${i}, ${i * 2}, 7, ${i === 2 ? 'exit-a' : null})`;
      }
      const before = await sql<
        { id: string; request_id: string }[]
      >`SELECT id, request_id FROM connection_log ORDER BY id`;
      expect(await migrate(sql)).toBe(PG_MIGRATIONS.length);
      const parts = await sql<
        { name: string }[]
      >`SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'connection_log'::regclass ORDER BY 1`;
      expect(parts.map((p) => p.name)).toEqual(
        expect.arrayContaining(['connection_log_20261120', 'connection_log_20261122']),
      );
      const after = await sql<
        { id: string; request_id: string; bytes_down: string; exit: string | null }[]
      >`SELECT id, request_id, bytes_down, exit FROM connection_log ORDER BY id`;
      expect(after.map((r) => [r.id, r.request_id])).toEqual(before.map((r) => [r.id, r.request_id]));
      expect(after.map((r) => [Number(r.bytes_down), r.exit])).toEqual([
        [0, null],
        [2, null],
        [4, 'exit-a'],
      ]);
    } finally {
      await sql.end();
    }
    const store = await PostgresStore.open(url, { releaseGraceSec: 600 });
    try {
      const entry = {
        startedAt: Date.now(),
        requestId: 'req-new',
        protocol: 'connect',
        sourceIp: '203.0.113.5',
        username: null,
        accountId: -1,
        target: null,
        reason: 'malformed',
        bytesUp: 0,
        bytesDown: 0,
        durationMs: 1,
      };
      expect(await store.connectionLog.insert('n1', [entry])).toBe('ok');
      expect(await store.connectionLog.insert('n1', [entry])).toBe('ok');
      const rows = await store.connectionLog.query({ limit: 10 });
      expect(rows.map((r) => r.requestId)).toEqual(['req-new', 'req-2', 'req-1', 'req-0']);
      expect(rows[0]!.id).toBeGreaterThan(rows[1]!.id);
    } finally {
      await store.close();
    }
  });
});
