// The PostgreSQL backend: every node of a fleet on one database. Each method is one round trip where it
// can be (claims, releases and rate hits are server-side functions); transactions only where several rows
// must change together. Unreachable → StoreUnavailableError; a lost race → `busy`.
import { PgIdempotencyStore } from './idempotency.js';
import type { RateHitStore, Store } from '../types.js';
import { DEFAULT_RELEASE_GRACE_SEC } from '../types.js';
import { PgAccountStore } from './accounts.js';
import { PgApiKeyStore } from './api-keys.js';
import { PgAuditStore } from './audit.js';
import { PgSecondFactorStore } from './second-factors.js';
import { PgChangeLogStore } from './change-log.js';
import { PgConnectionLogStore } from './connection-log.js';
import { BACKGROUND_POOL_SIZE, connect, guard, migrate, redactUrl, type Sql } from './db.js';
import { PgProxyUserStore } from './proxy-users.js';
import { PgRateHitStore } from './rate-hits.js';
import { PgConsoleSessionStore } from './sessions.js';
import { PgTokenStore } from './tokens.js';
import { PgUsageStore } from './usage.js';
import { PgPlanStore } from './plans.js';
import { PgWebhookStore } from './webhooks.js';
import { PgTargetRulesStore } from './target-rules.js';
import { PgExitStore } from './exits.js';
import { PgEgressStore } from './egress.js';
import { PgWhitelistStore } from './whitelist.js';

interface PostgresStoreOptions {
  nowMs?: () => number;
  releaseGraceSec?: number;
  migrate?: boolean;
}

export class PostgresStore implements Store {
  readonly backend = 'postgres' as const;
  readonly dataDir = null;
  readonly location: string;
  readonly accounts: PgAccountStore;
  readonly tokens: PgTokenStore;
  readonly apiKeys: PgApiKeyStore;
  readonly whitelist: PgWhitelistStore;
  readonly proxyUsers: PgProxyUserStore;
  readonly idempotency: PgIdempotencyStore;
  readonly sessions: PgConsoleSessionStore;
  readonly usage: PgUsageStore;
  readonly plans: PgPlanStore;
  readonly webhooks: PgWebhookStore;
  readonly targetRules: PgTargetRulesStore;
  readonly audit: PgAuditStore;
  readonly secondFactors: PgSecondFactorStore;
  readonly exits: PgExitStore;
  readonly egress: PgEgressStore;
  readonly connectionLog: PgConnectionLogStore;
  readonly changeLog: PgChangeLogStore;
  private readonly rateHits: PgRateHitStore;
  private closed = false;

  private constructor(
    private readonly sql: Sql,
    private readonly background: Sql,
    /** The gateway's own writes (usage flushes, the connection log): a pool of their own, so a backlog of them
     * after an outage never queues the change feed that admission recovers through. */
    private readonly writes: Sql,
    url: string,
    opts: PostgresStoreOptions,
  ) {
    const nowMs = opts.nowMs ?? Date.now;
    const nowSec = () => Math.floor(nowMs() / 1000);
    this.location = redactUrl(url);
    // Account-changing writes record themselves in their own transactions (audit.ts), with this clock.
    this.audit = new PgAuditStore(sql, nowMs);
    this.secondFactors = new PgSecondFactorStore(sql, nowSec, nowMs);
    this.accounts = new PgAccountStore(sql, nowSec, nowMs);
    this.tokens = new PgTokenStore(sql, nowSec, nowMs);
    this.apiKeys = new PgApiKeyStore(sql, nowSec, nowMs);
    this.whitelist = new PgWhitelistStore(
      sql,
      nowSec,
      opts.releaseGraceSec ?? DEFAULT_RELEASE_GRACE_SEC,
      background,
      nowMs,
    );
    this.proxyUsers = new PgProxyUserStore(sql, nowSec, nowMs);
    this.idempotency = new PgIdempotencyStore(sql, nowSec, nowMs);
    this.sessions = new PgConsoleSessionStore(sql, nowSec, nowMs);
    this.usage = new PgUsageStore(writes, nowSec);
    // Every node reads the plans twice a second: on the gateway's lane, so a backlog of these reads after an
    // outage never queues the API's calls.
    this.plans = new PgPlanStore(writes, nowSec, nowMs);
    this.webhooks = new PgWebhookStore(writes, nowSec, nowMs);
    this.targetRules = new PgTargetRulesStore(sql, nowSec, nowMs);
    // Every node polls the version four times a second: on the gateway's lane, as the plans.
    this.egress = new PgEgressStore(writes, nowSec, nowMs);
    // Heartbeats and the entries' reads of them: on the background lane, beside the change feed.
    this.exits = new PgExitStore(background, nowSec);
    this.connectionLog = new PgConnectionLogStore(writes, nowSec);
    this.rateHits = new PgRateHitStore(sql);
    this.changeLog = new PgChangeLogStore(background, nowMs, url);
  }

  /** Connects and migrates; a server that cannot be reached at start is an error naming the URL (no password). */
  static async open(url: string, opts: PostgresStoreOptions = {}): Promise<PostgresStore> {
    const sql = connect(url);
    try {
      if (opts.migrate !== false) await guard(() => migrate(sql), 30_000);
      else await guard(() => sql`SELECT 1`);
    } catch (e) {
      await sql.end({ timeout: 1 }).catch(() => {});
      const err = e as { code?: string; message?: string };
      throw new Error(
        `database ${redactUrl(url)}: ${err.code ?? ''} ${err.message ?? String(e)}`.replace(/\s+/g, ' ').trim(),
      );
    }
    return new PostgresStore(
      sql,
      connect(url, BACKGROUND_POOL_SIZE, 'proxyd background'),
      connect(url, BACKGROUND_POOL_SIZE, 'proxyd writes'),
      url,
      opts,
    );
  }

  sharedRateHits(): RateHitStore {
    return this.rateHits;
  }

  async fleetSecret(name: string, candidate: string): Promise<string | null> {
    const fresh = candidate;
    // Whichever node is first writes it; a node that lost the race reads the winner's on the next round.
    for (let i = 0; i < 5; i++) {
      const [r] = await guard(
        () => this.sql<{ value: string }[]>`
        WITH ins AS (INSERT INTO fleet_secrets (name, value) VALUES (${name}, ${fresh}) ON CONFLICT (name) DO NOTHING RETURNING value)
        SELECT value FROM ins UNION ALL SELECT value FROM fleet_secrets WHERE name = ${name} LIMIT 1`,
      );
      if (r) return r.value;
    }
    throw new Error(`fleet secret ${name} could not be read`);
  }

  async ping(): Promise<boolean> {
    try {
      await guard(() => this.sql`SELECT 1`, 1_000);
      return true;
    } catch {
      return false;
    }
  }

  async integrityProblems(): Promise<string[]> {
    return []; // the server guards its own pages (checksums, WAL); nothing cheap to add from here
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([
      this.sql.end({ timeout: 2 }),
      this.background.end({ timeout: 2 }),
      this.writes.end({ timeout: 2 }),
    ]);
  }
}
