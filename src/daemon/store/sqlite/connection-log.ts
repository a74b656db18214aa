// connection_log: the gateway's records, appended in batches off the connection path. Inserts go
// through a connection of their own that never waits for a lock (a busy batch stays in the writer's buffer:
// SQLite's busy handler would sleep the event loop that relays every tunnel).
import { connectionLogQuery, toConnectionLogRow, type ConnectionLogSqlRow } from '../connection-log-sql.js';
import type { ConnectionLogEntry, ConnectionLogFilter, ConnectionLogRow, ConnectionLogStore } from '../types.js';
import { isBusyError, type Db } from './db.js';
import { stmt } from './statements.js';

const DAY_MS = 86_400_000;

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
      `INSERT OR IGNORE INTO connection_log (started_ms, node, request_id, protocol, source_ip, username, account_id, target, reason, bytes_up, bytes_down, duration_ms, exit, exit_moved_from, datagrams_up, datagrams_down)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    try {
      db.transaction(() => {
        for (const e of entries) {
          ins.run(e.startedAt, node, e.requestId, e.protocol, e.sourceIp, e.username, e.accountId >= 0 ? e.accountId : null, e.target, e.reason, e.bytesUp, e.bytesDown, e.durationMs, e.exit ?? null, e.exitMovedFrom ?? null, e.datagramsUp ?? null, e.datagramsDown ?? null);
        }
      })();
      return 'ok';
    } catch (e) {
      if (isBusyError(e)) return 'busy';
      throw e;
    }
  }

  async query(f: ConnectionLogFilter): Promise<ConnectionLogRow[]> {
    const q = connectionLogQuery(f);
    return stmt<Array<string | number>, ConnectionLogSqlRow>(this.db, q.text).all(...q.params).map(toConnectionLogRow);
  }

  async newestId(): Promise<number> {
    return stmt<[], { id: number | null }>(this.db, 'SELECT max(id) AS id FROM connection_log').get()?.id ?? 0;
  }

  async prune(beforeMs: number): Promise<number | 'busy'> {
    // On the no-wait connection, in slices with a turn of the event loop between them: a lock held elsewhere
    // or a long backlog never holds up the tunnels this process relays.
    const db = this.writer();
    let total = 0;
    for (;;) {
      let changes: number;
      try {
        changes = stmt(db, 'DELETE FROM connection_log WHERE id IN (SELECT id FROM connection_log WHERE started_ms < ? LIMIT 2000)').run(beforeMs).changes;
      } catch (e) {
        if (isBusyError(e)) return total > 0 ? total : 'busy';
        throw e;
      }
      total += changes;
      if (changes < 2000) return total;
      await new Promise<void>((r) => setImmediate(r));
    }
  }

  async sizeBytes(): Promise<number> {
    // dbstat: the pages the table and its indexes use (freed pages are reused, so this, not the file, is what grows).
    return stmt<[], { bytes: number | null }>(this.db, "SELECT sum(pgsize) AS bytes FROM dbstat WHERE name = 'connection_log' OR name LIKE 'connection_log_%'").get()?.bytes ?? 0;
  }

  async dropOldestDay(keepFromMs: number): Promise<boolean> {
    const oldest = stmt<[], { ms: number | null }>(this.db, 'SELECT min(started_ms) AS ms FROM connection_log').get()?.ms ?? null;
    const keepFrom = Math.floor(keepFromMs / DAY_MS) * DAY_MS;
    if (oldest === null || oldest >= keepFrom) return false;
    const removed = await this.prune(Math.floor(oldest / DAY_MS) * DAY_MS + DAY_MS);
    return removed !== 'busy';
  }
}
