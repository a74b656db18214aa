// The store: one async seam (types.ts), two backends. SQLite in the data dir is the embedded default;
// `--database-url postgres://…` puts every node of a fleet on one PostgreSQL. Nothing outside store/ speaks SQL.
import { SqliteStore } from './sqlite/index.js';
import type { Store } from './types.js';

interface StoreConfig {
  /** The data dir holding proxyd.db (SQLite). */
  dataDir: string;
  /** `postgres://…` or `postgresql://…`: PostgreSQL instead of SQLite. */
  databaseUrl?: string | null | undefined;
  nowMs?: () => number;
  releaseGraceSec?: number;
  /** Run migrations (serve and admin do). */
  migrate?: boolean;
  /**
   * SQLite: fold the WAL into the main file on close (default). A cluster worker leaves it to the primary, which
   * closes last: a worker's checkpoint would hold the write lock while it waits for readers, and the primary's
   * writes for the other workers would find it busy.
   */
  foldWalOnClose?: boolean;
  /** SQLite: refuse a database file this user may not write (serve does; admin's reading commands need not). */
  mustWrite?: boolean;
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

export type * from './types.js';
export { StoreUnavailableError, SERVICE_RULES_ID } from './types.js';
export { AUDIT_ACTOR_TYPES, ChainVerifier, GENESIS_HASH, canonicalJson, type ChainProblem } from './audit-chain.js';
