// connection_log: the gateway's records, appended in batches off the connection path. Inserts go
// through a connection of their own that never waits for a lock (a busy batch stays in the writer's buffer:
// SQLite's busy handler would sleep the event loop that relays every tunnel).
import { connectionLogQuery, toConnectionLogRow, type ConnectionLogSqlRow } from '../connection-log-sql.js';
import { DAY_MS } from '../../../rules/time.js';
import type { ConnectionLogEntry, ConnectionLogFilter, ConnectionLogRow, ConnectionLogStore } from '../types.js';
import { isBusyError, type Db } from './db.js';
import { stmt } from './statements.js';

const COLUMNS = 16;
/** Records per INSERT statement in a batch (16 columns each: 512 parameters, under SQLite's limit of 32,766). */
const ROWS = 32;

const insertSql = (rows: number): string =>
  `INSERT OR IGNORE INTO connection_log (started_ms, node, request_id, protocol, source_ip, username, account_id, target, reason, bytes_up, bytes_down, duration_ms, exit, exit_moved_from, datagrams_up, datagrams_down)
   VALUES ${Array.from({ length: rows }, () => `(${Array.from({ length: COLUMNS }, () => '?').join(', ')})`).join(', ')}`;

const INSERT_MANY = insertSql(ROWS);
const INSERT_ONE = insertSql(1);

/** One record's COLUMNS parameters, in insertSql's order, from `at`. */
function putRow(p: Array<string | number | null>, at: number, node: string, e: ConnectionLogEntry): void {
  p[at] = e.startedAt;
  p[at + 1] = node;
  p[at + 2] = e.requestId;
  p[at + 3] = e.protocol;
  p[at + 4] = e.sourceIp;
  p[at + 5] = e.username;
  p[at + 6] = e.accountId >= 0 ? e.accountId : null;
  p[at + 7] = e.target;
  p[at + 8] = e.reason;
  p[at + 9] = e.bytesUp;
  p[at + 10] = e.bytesDown;
  p[at + 11] = e.durationMs;
  p[at + 12] = e.exit ?? null;
  p[at + 13] = e.exitMovedFrom ?? null;
  p[at + 14] = e.datagramsUp ?? null;
  p[at + 15] = e.datagramsDown ?? null;
}

/** A batch in one transaction: ROWS records per statement (one call into SQLite for them), the rest one by one. */
function batchInsert(db: Db): (node: string, entries: readonly ConnectionLogEntry[]) => void {
  const many = stmt(db, INSERT_MANY);
  const one = stmt(db, INSERT_ONE);
  const rows: Array<string | number | null> = new Array(ROWS * COLUMNS);
  const row: Array<string | number | null> = new Array(COLUMNS);
  return db.transaction((node: string, entries: readonly ConnectionLogEntry[]) => {
    let i = 0;
    for (; i + ROWS <= entries.length; i += ROWS) {
      for (let r = 0; r < ROWS; r++) putRow(rows, r * COLUMNS, node, entries[i + r]!);
      many.run(...rows); // as arguments: better-sqlite3 reads an array's items one property lookup each
    }
    for (; i < entries.length; i++) {
      putRow(row, 0, node, entries[i]!);
      one.run(...row);
    }
  });
}

export class SqliteConnectionLogStore implements ConnectionLogStore {
  constructor(
    private readonly db: Db,
    /** The no-wait connection inserts go through. */
    private readonly writer: () => Db,
  ) {}

  /** The batch insert as one transaction function, made once per writer connection (not per batch). */
  private tx: { db: Db; run: (node: string, entries: readonly ConnectionLogEntry[]) => void } | null = null;

  async insert(node: string, entries: readonly ConnectionLogEntry[]): Promise<'ok' | 'busy'> {
    if (entries.length === 0) return 'ok';
    const db = this.writer();
    if (this.tx?.db !== db) this.tx = { db, run: batchInsert(db) };
    try {
      this.tx.run(node, entries);
      return 'ok';
    } catch (e) {
      if (isBusyError(e)) return 'busy';
      throw e;
    }
  }

  async query(f: ConnectionLogFilter): Promise<ConnectionLogRow[]> {
    const q = connectionLogQuery(f);
    return stmt<Array<string | number>, ConnectionLogSqlRow>(this.db, q.text)
      .all(...q.params)
      .map(toConnectionLogRow);
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
        changes = stmt(
          db,
          'DELETE FROM connection_log WHERE id IN (SELECT id FROM connection_log WHERE started_ms < ? LIMIT 2000)',
        ).run(beforeMs).changes;
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
    return (
      stmt<[], { bytes: number | null }>(
        this.db,
        "SELECT sum(pgsize) AS bytes FROM dbstat WHERE name = 'connection_log' OR name LIKE 'connection_log_%'",
      ).get()?.bytes ?? 0
    );
  }

  async dropOldestDay(keepFromMs: number): Promise<boolean> {
    const oldest =
      stmt<[], { ms: number | null }>(this.db, 'SELECT min(started_ms) AS ms FROM connection_log').get()?.ms ?? null;
    const keepFrom = Math.floor(keepFromMs / DAY_MS) * DAY_MS;
    if (oldest === null || oldest >= keepFrom) return false;
    const removed = await this.prune(Math.floor(oldest / DAY_MS) * DAY_MS + DAY_MS);
    return removed !== 'busy';
  }
}
