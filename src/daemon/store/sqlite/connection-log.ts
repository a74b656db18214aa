// connection_log: the gateway's records (SPEC 12), appended in batches off the connection path. Inserts go
// through a connection of their own that never waits for a lock (a busy batch stays in the writer's buffer:
// SQLite's busy handler would sleep the event loop that relays every tunnel).
import { CONNECTION_LOG_SELECT, connectionLogWhere, toConnectionLogRow, type ConnectionLogSqlRow } from '../connection-log-sql.js';
import type { ConnectionLogEntry, ConnectionLogFilter, ConnectionLogRow, ConnectionLogStore } from '../types.js';
import { isBusyError, type Db } from './db.js';
import { stmt } from './statements.js';

export class SqliteConnectionLogStore implements ConnectionLogStore {
  constructor(
    private readonly db: Db,
    /** The no-wait connection inserts go through. */
    private readonly writer: () => Db,
  ) {}

  async insert(node: string, entries: readonly ConnectionLogEntry[]): Promise<'ok' | 'busy'> {
    if (entries.length === 0) return 'ok';
    const db = this.writer();
    const ins = stmt(db,
      `INSERT INTO connection_log (started_ms, node, request_id, protocol, source_ip, username, account_id, target, reason, bytes_up, bytes_down, duration_ms)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    try {
      db.transaction(() => {
        for (const e of entries) {
          ins.run(e.startedAt, node, e.requestId, e.protocol, e.sourceIp, e.username, e.accountId >= 0 ? e.accountId : null, e.target, e.reason, e.bytesUp, e.bytesDown, e.durationMs);
        }
      })();
      return 'ok';
    } catch (e) {
      if (isBusyError(e)) return 'busy';
      throw e;
    }
  }

  async query(f: ConnectionLogFilter): Promise<ConnectionLogRow[]> {
    const { where, params } = connectionLogWhere(f);
    const order = f.afterId !== undefined ? 'ORDER BY c.id ASC' : 'ORDER BY c.id DESC';
    const rows = stmt<Array<string | number>, ConnectionLogSqlRow>(this.db, `${CONNECTION_LOG_SELECT} ${where} ${order} LIMIT ?`).all(...params, f.limit);
    return rows.map(toConnectionLogRow);
  }

  async prune(beforeMs: number): Promise<number | 'busy'> {
    try {
      let total = 0;
      // In slices: one huge delete would hold the write lock (and the gateway's inserts) for long.
      for (;;) {
        const r = stmt(this.db, 'DELETE FROM connection_log WHERE id IN (SELECT id FROM connection_log WHERE started_ms < ? LIMIT 5000)').run(beforeMs);
        total += r.changes;
        if (r.changes < 5000) return total;
      }
    } catch (e) {
      if (isBusyError(e)) return 'busy';
      throw e;
    }
  }
}
