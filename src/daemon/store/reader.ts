// A change-log reader on a connection of its own, for another thread (the admission view's reload worker): it loads
// only the change log's module and the connection's, not the whole store.
import type { ChangeLogStore, SnapshotSource } from './types.js';

/**
 * A read connection of its own to the data `source` names, for a snapshot taken on another thread (the admission
 * view's reload worker): one connection, read-only on SQLite, no migrations, no data-dir lock. `close` it before
 * the thread ends.
 */
export async function openChangeLogReader(
  source: SnapshotSource,
): Promise<{ changeLog: ChangeLogStore; close(): Promise<void> }> {
  if (source.backend === 'postgres') {
    const [{ PgChangeLogStore }, { connect }] = await Promise.all([
      import('./postgres/change-log.js'),
      import('./postgres/db.js'),
    ]);
    const sql = connect(source.url, 1, 'proxyd reload');
    return { changeLog: new PgChangeLogStore(sql, Date.now, source.url), close: () => sql.end({ timeout: 1 }) };
  }
  const [{ SqliteChangeLogStore }, { openReadOnly }] = await Promise.all([
    import('./sqlite/change-log.js'),
    import('./sqlite/db.js'),
  ]);
  const db = openReadOnly(source.dataDir);
  return {
    changeLog: new SqliteChangeLogStore(db, source.dataDir),
    close: async () => void db.close(),
  };
}
