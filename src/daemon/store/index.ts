// The store: one SQLite database, one module per table family. Nothing outside store/ speaks SQL.
import { AccountStore } from './accounts.js';
import { ChangeLogStore } from './change-log.js';
import { integrityProblems, openDatabase, type Db } from './db.js';
import { ProxyUserStore } from './proxy-users.js';
import { RateHitStore } from './rate-hits.js';
import { TokenStore } from './tokens.js';
import { TrafficStore } from './traffic.js';
import { WhitelistStore } from './whitelist.js';
import { stmt } from './statements.js';

export interface StoreOptions {
  nowMs?: () => number;
  releaseGraceSec?: number;
}

export class Store {
  readonly accounts: AccountStore;
  readonly tokens: TokenStore;
  readonly whitelist: WhitelistStore;
  readonly proxyUsers: ProxyUserStore;
  readonly rateHits: RateHitStore;
  readonly traffic: TrafficStore;
  readonly changeLog: ChangeLogStore;
  private closed = false;

  constructor(
    readonly db: Db,
    opts: StoreOptions = {},
  ) {
    const nowMs = opts.nowMs ?? Date.now;
    const nowSec = () => Math.floor(nowMs() / 1000);
    const grace = opts.releaseGraceSec ?? 600;
    this.accounts = new AccountStore(db, nowSec);
    this.tokens = new TokenStore(db, nowSec);
    this.whitelist = new WhitelistStore(db, nowSec, () => grace);
    this.proxyUsers = new ProxyUserStore(db, nowSec);
    this.rateHits = new RateHitStore(db);
    this.traffic = new TrafficStore(db, nowSec);
    this.changeLog = new ChangeLogStore(db);
  }

  static open(dataDir: string, opts: StoreOptions = {}): Store {
    const store = new Store(openDatabase(dataDir), opts);
    store.dataDir = dataDir;
    return store;
  }

  private dataDir: string | null = null;
  private readonly extraConnections: Db[] = [];

  /**
   * The rate-limit log on a connection of its own that never waits for a lock: SQLite's busy handler
   * sleeps the whole event loop (1 ms and up) on every collision between workers; the caller retries
   * a busy hit without blocking instead. Falls back to the main connection for an in-memory store.
   */
  rateHitsOnOwnConnection(): RateHitStore {
    if (!this.dataDir) return this.rateHits;
    const db = openDatabase(this.dataDir, { migrate: false, busyTimeoutMs: 0 });
    this.extraConnections.push(db);
    return new RateHitStore(db);
  }

  ping(): boolean {
    return stmt(this.db, 'SELECT 1 AS ok').get() !== undefined;
  }

  integrityProblems(): string[] {
    return integrityProblems(this.db);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    // Fold the WAL back into the main file so a stopped daemon leaves one self-contained database.
    try {
      this.db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
    } catch {
      /* another process holds the WAL; it checkpoints on its own close */
    }
    for (const db of this.extraConnections) db.close();
    this.db.close();
  }
}

export type { Account, AccountStatus } from './accounts.js';
export type { WhitelistEntry, ClaimOutcome } from './whitelist.js';
export type { ProxyUser } from './proxy-users.js';
export type { AdmissionChangeRows, AdmissionSnapshotRows } from './change-log.js';
