// The SQLite backend (embedded default): one file in the data dir, synchronous better-sqlite3 inside,
// values handed back through the async seam; no extra round trips.
import { SqliteIdempotencyStore } from './idempotency.js';
import path from 'node:path';
import { DEFAULT_RELEASE_GRACE_SEC, type RateHitStore, type Store } from '../types.js';
import { SqliteAccountStore } from './accounts.js';
import { SqliteApiKeyStore } from './api-keys.js';
import { SqliteAuditLog, SqliteAuditStore } from './audit.js';
import { SqliteSecondFactorStore } from './second-factors.js';
import { SqliteChangeLogStore } from './change-log.js';
import { SqliteConnectionLogStore } from './connection-log.js';
import { DB_FILE, integrityProblems, openDatabase, type Db } from './db.js';
import { SqliteProxyUserStore } from './proxy-users.js';
import { SqliteRateHitStore } from './rate-hits.js';
import { SqliteConsoleSessionStore } from './sessions.js';
import { stmt } from './statements.js';
import { SqliteTokenStore } from './tokens.js';
import { SqliteUsageStore } from './usage.js';
import { SqlitePlanStore } from './plans.js';
import { SqliteWebhookStore } from './webhooks.js';
import { SqliteTargetRulesStore } from './target-rules.js';
import { SqliteEgressStore } from './egress.js';
import { SqliteWhitelistStore } from './whitelist.js';

interface SqliteStoreOptions {
  nowMs?: () => number;
  releaseGraceSec?: number;
  /** Fold the WAL into the main file on close (default true; a cluster worker leaves it to the primary). */
  foldWalOnClose?: boolean;
  /** Refuse a database file this user may not write (the serving path). */
  mustWrite?: boolean;
}

export class SqliteStore implements Store {
  readonly backend = 'sqlite' as const;
  readonly location: string;
  readonly accounts: SqliteAccountStore;
  readonly tokens: SqliteTokenStore;
  readonly apiKeys: SqliteApiKeyStore;
  readonly whitelist: SqliteWhitelistStore;
  readonly proxyUsers: SqliteProxyUserStore;
  readonly idempotency: SqliteIdempotencyStore;
  readonly sessions: SqliteConsoleSessionStore;
  readonly usage: SqliteUsageStore;
  readonly plans: SqlitePlanStore;
  readonly webhooks: SqliteWebhookStore;
  readonly targetRules: SqliteTargetRulesStore;
  readonly egress: SqliteEgressStore;
  readonly audit: SqliteAuditStore;
  readonly secondFactors: SqliteSecondFactorStore;
  /** Entry and exit roles need a fleet database (PostgreSQL). */
  readonly exits = null;
  readonly connectionLog: SqliteConnectionLogStore;
  readonly changeLog: SqliteChangeLogStore;
  private readonly extraConnections: Db[] = [];
  private readonly foldWalOnClose: boolean;
  private closed = false;

  private constructor(
    private readonly db: Db,
    readonly dataDir: string,
    opts: SqliteStoreOptions,
  ) {
    this.foldWalOnClose = opts.foldWalOnClose ?? true;
    const nowMs = opts.nowMs ?? Date.now;
    const nowSec = () => Math.floor(nowMs() / 1000);
    const grace = opts.releaseGraceSec ?? DEFAULT_RELEASE_GRACE_SEC;
    this.location = path.join(dataDir, DB_FILE);
    // Every account-changing write records itself on the main connection, in its own transaction.
    const audit = new SqliteAuditLog(db, nowMs);
    this.audit = new SqliteAuditStore(db, audit);
    this.secondFactors = new SqliteSecondFactorStore(db, nowMs, audit);
    this.accounts = new SqliteAccountStore(db, nowSec, audit);
    this.tokens = new SqliteTokenStore(db, nowSec, audit);
    this.apiKeys = new SqliteApiKeyStore(db, nowSec, audit, () => this.gatewayWriter());
    this.whitelist = new SqliteWhitelistStore(db, nowSec, () => grace, audit);
    this.proxyUsers = new SqliteProxyUserStore(db, nowSec, audit);
    this.idempotency = new SqliteIdempotencyStore(db);
    this.sessions = new SqliteConsoleSessionStore(db, nowSec, audit);
    // The gateway's own writes (usage, connection log) answer `busy` instead of sleeping the event loop on a
    // lock another process holds (an admin command, a backup): their callers keep the data for the next flush.
    this.usage = new SqliteUsageStore(db, () => this.gatewayWriter());
    this.plans = new SqlitePlanStore(db, nowSec, audit);
    this.webhooks = new SqliteWebhookStore(db, audit, () => this.gatewayWriter());
    this.targetRules = new SqliteTargetRulesStore(db, nowSec, audit);
    this.egress = new SqliteEgressStore(db, nowSec, audit, () => this.gatewayWriter());
    this.changeLog = new SqliteChangeLogStore(db, dataDir);
    this.connectionLog = new SqliteConnectionLogStore(db, () => this.gatewayWriter());
  }

  static open(dataDir: string, opts: SqliteStoreOptions = {}): SqliteStore {
    return new SqliteStore(openDatabase(dataDir, { mustWrite: opts.mustWrite }), dataDir, opts);
  }

  /**
   * The rate-limit log on a connection of its own that never waits for a lock: SQLite's busy handler
   * sleeps the whole event loop (1 ms and up) on every collision between workers; the caller retries
   * a busy hit without blocking instead.
   */
  sharedRateHits(): RateHitStore {
    return new SqliteRateHitStore(this.noWaitConnection());
  }

  private writer: Db | null = null;

  /** One no-wait connection for the gateway's background writes, opened on first use. */
  private gatewayWriter(): Db {
    return (this.writer ??= this.noWaitConnection());
  }

  /** A connection whose writes answer `busy` at once instead of sleeping the event loop on a lock. */
  private noWaitConnection(): Db {
    const db = openDatabase(this.dataDir, { migrate: false, busyTimeoutMs: 0 });
    this.extraConnections.push(db);
    return db;
  }

  async fleetSecret(): Promise<string | null> {
    return null;
  }

  async ping(): Promise<boolean> {
    try {
      return stmt(this.db, 'SELECT 1 AS ok').get() !== undefined;
    } catch {
      return false;
    }
  }

  async integrityProblems(): Promise<string[]> {
    return integrityProblems(this.db);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Fold the WAL back into the main file so a stopped daemon leaves one self-contained database. Not from a
    // cluster worker: the checkpoint holds the write lock while it waits for readers, so the primary's writes
    // for the other workers (their last usage flushes) would find it busy; the primary, closing last, folds it.
    if (this.foldWalOnClose) {
      try {
        this.db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
      } catch {
        /* another process holds the WAL; it checkpoints on its own close */
      }
    }
    for (const db of this.extraConnections) db.close();
    this.db.close();
  }
}
