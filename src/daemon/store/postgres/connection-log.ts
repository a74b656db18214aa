// connection_log on PostgreSQL: every node appends its batches (one multi-row INSERT each); any node reads
// every node's records. Same filters and rows as SQLite (connection-log-sql.ts).
import type { ConnectionLogEntry, ConnectionLogFilter, ConnectionLogRow, ConnectionLogStore } from '../types.js';
import { connectionLogQuery, toConnectionLogRow, type ConnectionLogSqlRow } from '../connection-log-sql.js';
import { guard } from './db.js';
import { unlessBusy, PgFamily } from './family.js';

export class PgConnectionLogStore extends PgFamily implements ConnectionLogStore {
  async insert(node: string, entries: readonly ConnectionLogEntry[]): Promise<'ok' | 'busy'> {
    if (entries.length === 0) return 'ok';
    const rows = entries.map((e) => ({
      started_ms: e.startedAt,
      node,
      request_id: e.requestId,
      protocol: e.protocol,
      source_ip: e.sourceIp,
      username: e.username,
      account_id: e.accountId >= 0 ? e.accountId : null,
      target: e.target,
      reason: e.reason,
      bytes_up: e.bytesUp,
      bytes_down: e.bytesDown,
      duration_ms: e.durationMs,
      exit: e.exit ?? null,
      exit_moved_from: e.exitMovedFrom ?? null,
    }));
    // Idempotent: the deadline may abandon an insert the server still commits, and the writer then sends the
    // batch again; request ids are unique, so the second one adds nothing.
    const r = await unlessBusy(() => this.sql`INSERT INTO connection_log ${this.sql(rows)} ON CONFLICT (request_id) DO NOTHING`);
    return r === 'busy' ? 'busy' : 'ok';
  }

  async query(f: ConnectionLogFilter): Promise<ConnectionLogRow[]> {
    const q = connectionLogQuery(f);
    let n = 0;
    const text = q.text.replace(/\?/g, () => `$${++n}`);
    const rows = await unlessBusy(() => this.sql.unsafe(text, q.params));
    if (rows === 'busy') return [];
    return (rows as unknown as ConnectionLogSqlRow[]).map(toConnectionLogRow);
  }

  async newestId(): Promise<number> {
    const [r] = await guard(() => this.sql<{ id: number | null }[]>`SELECT max(id) AS id FROM connection_log`);
    return r?.id ?? 0;
  }

  async prune(beforeMs: number): Promise<number | 'busy'> {
    let total = 0;
    for (;;) {
      const r = await unlessBusy(() => this.sql`
        DELETE FROM connection_log WHERE id IN (SELECT id FROM connection_log WHERE started_ms < ${beforeMs} LIMIT 5000)`);
      if (r === 'busy') return total > 0 ? total : 'busy';
      total += r.count;
      if (r.count < 5000) return total;
    }
  }
}
