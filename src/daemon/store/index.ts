// The store: one async seam (types.ts), two backends. SQLite in the data dir is the embedded default;
// `--database-url postgres://…` puts every node of a fleet on one PostgreSQL. Nothing outside store/ speaks SQL.
import { SqliteStore } from './sqlite/index.js';
import type { ChangeLogStore, SnapshotSource, Store } from './types.js';

interface StoreConfig {
  /** The data dir holding proxyd.db (SQLite). */
  dataDir: string;
  /** `postgres://…` or `postgresql://…`: PostgreSQL instead of SQLite. */
  databaseUrl?: string | null | undefined;
  nowMs?: () => number;
  releaseGraceSec?: number;
  /** Run migrations (serve and admin do). */
  migrate?: boolean;
}

function isPostgresUrl(url: string | null | undefined): url is string {
  return !!url && /^postgres(ql)?:\/\//i.test(url);
}

/** Opens the backend the config names and brings its schema up to date. */
export async function openStore(cfg: StoreConfig): Promise<Store> {
  if (isPostgresUrl(cfg.databaseUrl)) {
    const { PostgresStore } = await import('./postgres/index.js');
    return PostgresStore.open(cfg.databaseUrl, cfg);
  }
  return SqliteStore.open(cfg.dataDir, cfg);
}

/**
 * A read connection of its own to the data `source` names, for a snapshot taken on another thread (the admission
 * view's reload worker): one connection, read-only on SQLite, no migrations, no data-dir lock. `close` it before
 * the thread ends.
 */
export async function openChangeLogReader(source: SnapshotSource): Promise<{ changeLog: ChangeLogStore; close(): Promise<void> }> {
  if (source.backend === 'postgres') {
    const [{ PgChangeLogStore }, { connect }] = await Promise.all([import('./postgres/change-log.js'), import('./postgres/db.js')]);
    const sql = connect(source.url, 1, 'proxyd reload');
    return { changeLog: new PgChangeLogStore(sql, Date.now, source.url), close: () => sql.end({ timeout: 1 }) };
  }
  const [{ SqliteChangeLogStore }, { openReadOnly }] = await Promise.all([import('./sqlite/change-log.js'), import('./sqlite/db.js')]);
  const db = openReadOnly(source.dataDir);
  return {
    changeLog: new SqliteChangeLogStore(db, source.dataDir),
    close: async () => void db.close(),
  };
}

export type * from './types.js';
export { StoreUnavailableError, SERVICE_RULES_ID } from './types.js';
