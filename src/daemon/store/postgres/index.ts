// The PostgreSQL backend: every node of a fleet on one database. Each method is one round trip where it
// can be (claims, releases and rate hits are server-side functions); transactions only where several rows
// must change together. Unreachable → StoreUnavailableError; a lost race → `busy`.
import type {
  Account, AccountStatus, AccountStore, ApiCallVerdict, ApiCallCheck, ApiToken, ApiTokenWithAccount, ClaimOutcome, ConsoleSessionStore,
  Inconsistencies, ListFilter, ProxyUser, ProxyUserStore, RateHitStore, ReleaseOutcome, Repairs,
  SessionRecord, Store, TokenStore, TrafficDelta, TrafficStore, WhitelistEntry, WhitelistStore, WindowDecision,
} from '../types.js';
import { DEFAULT_RELEASE_GRACE_SEC } from '../types.js';
import { PgChangeLogStore } from './change-log.js';
import { BACKGROUND_POOL_SIZE, connect, guard, isBusy, migrate, redactUrl, type Sql } from './db.js';

type NowSec = () => number;

/** Admission answers within the limiter's own bound (docs/api.md, Limits: 500 ms), as the rate-limit store would. */
const ADMIT_MS = 500;
/** A batch of 100 items is one call; it gets longer than a single statement's 2 s. */
const BATCH_MS = 5_000;
/** The start-up check scans whole tables: it gets minutes, not the 2 s of a request. */
const START_CHECK_MS = 300_000;

/** Runs op under the deadline; a lost race inside the database is `busy`. */
async function unlessBusy<T>(op: () => Promise<T>, timeoutMs?: number): Promise<T | 'busy'> {
  try {
    return await guard(op, timeoutMs);
  } catch (e) {
    if (isBusy(e)) return 'busy';
    throw e;
  }
}

/** What every table family works with: the pool and the clock. */
abstract class PgFamily {
  constructor(
    protected readonly sql: Sql,
    protected readonly nowSec: NowSec,
  ) {}
}

class PgAccountStore extends PgFamily implements AccountStore {
  async create(email: string, passwordHash: string, verified: boolean): Promise<Account | 'exists'> {
    const now = this.nowSec();
    // The unique index on lower(email) decides, not a look-up first: two racing creates give one account.
    const [a] = await guard(
      () => this.sql<Account[]>`
        INSERT INTO accounts (email, password_hash, status, verified, created_at, updated_at)
        VALUES (${email}, ${passwordHash}, 'active', ${verified}, ${now}, ${now})
        ON CONFLICT ((lower(email))) DO NOTHING
        RETURNING id, email, status, verified, created_at`,
    );
    return a ?? 'exists';
  }

  async get(id: number): Promise<Account | null> {
    const [a] = await guard(() => this.sql<Account[]>`SELECT id, email, status, verified, created_at FROM accounts WHERE id = ${id}`);
    return a ?? null;
  }

  async findByEmail(email: string): Promise<Account | null> {
    const [a] = await guard(() => this.sql<Account[]>`SELECT id, email, status, verified, created_at FROM accounts WHERE lower(email) = lower(${email})`);
    return a ?? null;
  }

  async passwordHash(id: number): Promise<string | null> {
    const [r] = await guard(() => this.sql<{ password_hash: string }[]>`SELECT password_hash FROM accounts WHERE id = ${id}`);
    return r?.password_hash ?? null;
  }

  async setVerified(id: number, verified: boolean): Promise<void> {
    await guard(() => this.sql`UPDATE accounts SET verified = ${verified}, updated_at = ${this.nowSec()} WHERE id = ${id}`);
  }

  async setPasswordHash(id: number, hash: string): Promise<void> {
    await guard(() => this.sql`UPDATE accounts SET password_hash = ${hash}, updated_at = ${this.nowSec()} WHERE id = ${id}`);
  }

  async setStatus(id: number, status: AccountStatus): Promise<void> {
    const now = this.nowSec();
    await guard(() =>
      this.sql.begin(async (tx) => {
        await tx`UPDATE accounts SET status = ${status}, updated_at = ${now} WHERE id = ${id}`;
        if (status === 'closed') {
          await tx`UPDATE ip_claims SET state = 'releasing', releasing_since = ${now}, version = version + 1 WHERE account_id = ${id} AND state = 'held'`;
          await tx`UPDATE whitelist_entries SET deleted_at = ${now} WHERE account_id = ${id} AND deleted_at IS NULL`;
        }
      }),
    );
  }
}

/** What proxyd_api_admit answers; a page row is [id, ip, remark, status, created_at]. */
interface CallCheckRow {
  o_verdict: 'locked' | 'invalid' | 'limited' | 'ok';
  o_account: number | null;
  o_oldest: number | null;
  o_page: Array<[number, string, string, 1 | 2, number]> | null;
  o_total: number | null;
}

class PgTokenStore extends PgFamily implements TokenStore {
  async findByAccessKey(accessKey: string): Promise<ApiTokenWithAccount | null> {
    const [t] = await guard(
      () => this.sql<ApiTokenWithAccount[]>`
        SELECT t.id, t.account_id, t.access_key, t.secret_hash, t.status, t.expires_at, t.created_at, a.status AS account_status
          FROM api_tokens t JOIN accounts a ON a.id = t.account_id WHERE t.access_key = ${accessKey}`,
    );
    return t ?? null;
  }

  async checkCall(q: ApiCallCheck): Promise<ApiCallVerdict | 'busy'> {
    const l = q.list;
    const r = await unlessBusy(
      () => this.sql<CallCheckRow[]>`
        SELECT o_verdict, o_account, o_oldest, o_page, o_total FROM proxyd_api_admit(${q.badKey}, ${q.badLimit}::int, ${q.accessKey}, ${q.secretHash},
          ${q.rateKey}, ${q.rateLimit}::int, ${q.windowMs}::bigint, ${q.nowMs}::bigint,
          ${l !== undefined}::boolean, ${l?.status ?? null}::smallint, ${l?.ip ?? null}::text, ${l?.limit ?? 0}::int, ${l?.offset ?? 0}::int)`,
      ADMIT_MS,
    );
    if (r === 'busy') return r;
    const row = r[0]!;
    if (row.o_verdict === 'ok') {
      const out: ApiCallVerdict = { kind: 'ok', accountId: row.o_account!, accessKey: q.accessKey };
      if (l !== undefined && row.o_page !== null) {
        const accountId = row.o_account!;
        out.page = {
          items: row.o_page.map(([id, ip, remark, status, created_at]) => ({ id, account_id: accountId, ip, remark, status, created_at })),
          total: row.o_total ?? 0,
        };
      }
      return out;
    }
    if (row.o_verdict === 'invalid') return { kind: 'invalid' };
    return { kind: row.o_verdict, oldestAtMs: row.o_oldest };
  }

  async activeToken(accountId: number): Promise<ApiToken | null> {
    const [t] = await guard(
      () => this.sql<ApiToken[]>`
        SELECT id, account_id, access_key, secret_hash, status, expires_at, created_at
          FROM api_tokens WHERE account_id = ${accountId} AND status = 'active' ORDER BY id DESC LIMIT 1`,
    );
    return t ?? null;
  }

  async replace(accountId: number, accessKey: string, secretHash: Buffer, expiresAt: number | null = null): Promise<void> {
    const now = this.nowSec();
    await guard(() =>
      this.sql.begin(async (tx) => {
        // The account row lock serialises two resets of one account: exactly one token stays active.
        await tx`SELECT 1 FROM accounts WHERE id = ${accountId} FOR UPDATE`;
        await tx`UPDATE api_tokens SET status = 'disabled' WHERE account_id = ${accountId} AND status = 'active'`;
        await tx`INSERT INTO api_tokens (account_id, access_key, secret_hash, status, expires_at, created_at)
                 VALUES (${accountId}, ${accessKey}, ${secretHash}, 'active', ${expiresAt}, ${now})`;
      }),
    );
  }

  async disable(accountId: number): Promise<string | null> {
    const rows = await guard(
      () => this.sql<{ access_key: string }[]>`
        UPDATE api_tokens SET status = 'disabled'
         WHERE id = (SELECT id FROM api_tokens WHERE account_id = ${accountId} AND status = 'active' ORDER BY id DESC LIMIT 1 FOR UPDATE)
        RETURNING access_key`,
    );
    return rows[0]?.access_key ?? null;
  }
}

class PgWhitelistStore extends PgFamily implements WhitelistStore {
  constructor(
    sql: Sql,
    nowSec: NowSec,
    private readonly releaseGraceSec: number,
    /** The background lane (db.ts): a batch holds its connection for tens of ms and must not hold up calls. */
    private readonly background: Sql,
  ) {
    super(sql, nowSec);
  }

  async claimIp(accountId: number, ip: string, remark: string): Promise<ClaimOutcome> {
    const r = await unlessBusy(
      () => this.sql<{ r: ClaimOutcome }[]>`
        SELECT proxyd_claim_ip(${accountId}::int, ${ip}, ${remark}, ${this.nowSec()}::bigint, ${this.releaseGraceSec}::bigint, NULL::int) AS r`,
    );
    return r === 'busy' ? r : r[0]!.r;
  }

  async claimIps(accountId: number, items: ReadonlyArray<{ ip: string; remark: string }>): Promise<ClaimOutcome[]> {
    if (items.length === 0) return [];
    const payload = JSON.stringify(items.map((i) => [i.ip, i.remark]));
    const [row] = await guard(
      () => this.background<{ outcomes: ClaimOutcome[] }[]>`
        CALL proxyd_claim_batch(${accountId}::int, ${payload}::text::jsonb, ${this.nowSec()}::bigint, ${this.releaseGraceSec}::bigint, NULL)`,
      BATCH_MS,
    );
    return row!.outcomes;
  }

  async releaseIps(accountId: number, ips: readonly string[]): Promise<ReleaseOutcome[]> {
    if (ips.length === 0) return [];
    const [row] = await guard(
      () => this.background<{ outcomes: ReleaseOutcome[] }[]>`
        CALL proxyd_release_batch(${accountId}::int, ${JSON.stringify(ips)}::text::jsonb, ${this.nowSec()}::bigint, NULL)`,
      BATCH_MS,
    );
    return row!.outcomes;
  }

  async releaseClaim(accountId: number, ip: string): Promise<ReleaseOutcome> {
    const r = await unlessBusy(() => this.sql<{ r: ReleaseOutcome }[]>`SELECT proxyd_release_ip(${accountId}::int, ${ip}, ${this.nowSec()}::bigint) AS r`);
    return r === 'busy' ? r : r[0]!.r;
  }

  async list(accountId: number, f: ListFilter): Promise<{ items: WhitelistEntry[]; total: number }> {
    const sql = this.sql;
    const status = f.status ?? null;
    const ip = f.ip ?? null;
    // One statement text for every filter (no fragments built per call): the page and the total together;
    // a page past the end has no row to carry the total.
    const rows = await guard(
      () => sql<Array<WhitelistEntry & { total: number }>>`
        SELECT id, account_id, ip, remark, status, created_at, count(*) OVER ()::int AS total FROM whitelist_entries
         WHERE account_id = ${accountId} AND deleted_at IS NULL AND (${status}::smallint IS NULL OR status = ${status}::smallint)
           AND (${ip}::text IS NULL OR ip = ${ip}::text)
         ORDER BY created_at DESC, id DESC LIMIT ${f.limit} OFFSET ${f.offset}`,
    );
    if (rows.length === 0 && f.offset > 0) {
      const [c] = await guard(
        () => sql<{ n: number }[]>`
          SELECT count(*)::int AS n FROM whitelist_entries
           WHERE account_id = ${accountId} AND deleted_at IS NULL AND (${status}::smallint IS NULL OR status = ${status}::smallint)
             AND (${ip}::text IS NULL OR ip = ${ip}::text)`,
      );
      return { items: [], total: c!.n };
    }
    const total = rows[0]?.total ?? 0;
    const items: WhitelistEntry[] = [];
    for (const r of rows) items.push({ id: r.id, account_id: r.account_id, ip: r.ip, remark: r.remark, status: r.status, created_at: r.created_at });
    return { items, total };
  }

  async setStatus(accountId: number, ip: string, status: 1 | 2): Promise<WhitelistEntry | null> {
    const [e] = await guard(
      () => this.sql<WhitelistEntry[]>`
        UPDATE whitelist_entries SET status = ${status} WHERE account_id = ${accountId} AND ip = ${ip} AND deleted_at IS NULL
        RETURNING id, account_id, ip, remark, status, created_at`,
    );
    return e ?? null;
  }

  async inconsistencies(): Promise<Inconsistencies> {
    const [r] = await guard(
      () =>
        this.sql.begin(async (tx) => {
          await tx`SELECT set_config('statement_timeout', ${String(START_CHECK_MS)}, true)`;
          return tx<Inconsistencies[]>`
        SELECT
          (SELECT count(*)::int FROM ip_claims c WHERE c.state = 'held' AND NOT EXISTS
             (SELECT 1 FROM whitelist_entries e WHERE e.ip = c.ip AND e.account_id = c.account_id AND e.deleted_at IS NULL)) AS "claimsWithoutEntry",
          (SELECT count(*)::int FROM whitelist_entries e WHERE e.deleted_at IS NULL AND NOT EXISTS
             (SELECT 1 FROM ip_claims c WHERE c.ip = e.ip AND c.account_id = e.account_id AND c.state = 'held')) AS "entriesWithoutClaim"`;
        }),
      START_CHECK_MS,
    );
    return r!;
  }

  async repair(): Promise<Repairs> {
    const now = this.nowSec();
    return guard(
      () =>
        this.sql.begin(async (tx) => {
          await tx`SELECT set_config('statement_timeout', ${String(START_CHECK_MS)}, true)`;
          const released = await tx`
            DELETE FROM ip_claims WHERE state = 'held' AND NOT EXISTS
              (SELECT 1 FROM whitelist_entries e WHERE e.ip = ip_claims.ip AND e.account_id = ip_claims.account_id AND e.deleted_at IS NULL)`;
          const restored = await tx`
            INSERT INTO ip_claims (ip, account_id, state, releasing_since, version)
            SELECT e.ip, e.account_id, 'held', NULL, e.claim_version FROM whitelist_entries e
             WHERE e.deleted_at IS NULL AND NOT EXISTS (SELECT 1 FROM ip_claims c WHERE c.ip = e.ip)
            ON CONFLICT (ip) DO NOTHING`;
          const removed = await tx`
            UPDATE whitelist_entries SET deleted_at = ${now} WHERE deleted_at IS NULL AND NOT EXISTS
              (SELECT 1 FROM ip_claims c WHERE c.ip = whitelist_entries.ip AND c.account_id = whitelist_entries.account_id AND c.state = 'held')`;
          return { claimsReleased: released.count, claimsRestored: restored.count, entriesRemoved: removed.count };
        }),
      START_CHECK_MS,
    );
  }
}

class PgProxyUserStore extends PgFamily implements ProxyUserStore {
  async create(accountId: number, username: string, passwordHash: string): Promise<ProxyUser | 'exists'> {
    const now = this.nowSec();
    const [u] = await guard(
      () => this.sql<ProxyUser[]>`
        INSERT INTO proxy_users (account_id, username, password_hash, status, created_at, updated_at)
        VALUES (${accountId}, ${username}, ${passwordHash}, 'active', ${now}, ${now})
        ON CONFLICT (username) DO NOTHING
        RETURNING id, account_id, username, status, created_at`,
    );
    return u ?? 'exists';
  }

  async get(id: number): Promise<ProxyUser | null> {
    const [u] = await guard(() => this.sql<ProxyUser[]>`SELECT id, account_id, username, status, created_at FROM proxy_users WHERE id = ${id}`);
    return u ?? null;
  }

  async listForAccount(accountId: number): Promise<ProxyUser[]> {
    const rows = await guard(
      () => this.sql<ProxyUser[]>`SELECT id, account_id, username, status, created_at FROM proxy_users WHERE account_id = ${accountId} ORDER BY id DESC`,
    );
    return [...rows];
  }

  async setPassword(accountId: number, id: number, passwordHash: string): Promise<boolean> {
    const r = await guard(
      () => this.sql`UPDATE proxy_users SET password_hash = ${passwordHash}, updated_at = ${this.nowSec()} WHERE id = ${id} AND account_id = ${accountId}`,
    );
    return r.count === 1;
  }

  async delete(accountId: number, id: number): Promise<boolean> {
    const r = await guard(() => this.sql`DELETE FROM proxy_users WHERE id = ${id} AND account_id = ${accountId}`);
    return r.count === 1;
  }
}

class PgConsoleSessionStore extends PgFamily implements ConsoleSessionStore {
  async get(sid: string): Promise<SessionRecord | null> {
    const [r] = await guard(() => this.sql<{ account_id: number | null; data: string; expires_at: number }[]>`
      SELECT account_id, data, expires_at FROM console_sessions WHERE sid = ${sid}`);
    if (!r) return null;
    if (r.expires_at <= this.nowSec()) {
      await this.destroy(sid);
      return null;
    }
    return { accountId: r.account_id, data: r.data, expiresAtSec: r.expires_at };
  }

  async set(sid: string, rec: SessionRecord): Promise<void> {
    await guard(() => this.sql`
      INSERT INTO console_sessions (sid, account_id, data, expires_at) VALUES (${sid}, ${rec.accountId}, ${rec.data}, ${rec.expiresAtSec})
      ON CONFLICT (sid) DO UPDATE SET account_id = excluded.account_id, data = excluded.data, expires_at = excluded.expires_at`);
  }

  async destroy(sid: string): Promise<void> {
    await guard(() => this.sql`DELETE FROM console_sessions WHERE sid = ${sid}`);
  }

  async destroyForAccount(accountId: number): Promise<number> {
    return (await guard(() => this.sql`DELETE FROM console_sessions WHERE account_id = ${accountId}`)).count;
  }

  async destroyOthers(accountId: number, keepSid: string): Promise<number> {
    return (await guard(() => this.sql`DELETE FROM console_sessions WHERE account_id = ${accountId} AND sid <> ${keepSid}`)).count;
  }

  async countForAccount(accountId: number): Promise<number> {
    const [r] = await guard(() => this.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM console_sessions WHERE account_id = ${accountId} AND expires_at > ${this.nowSec()}`);
    return r!.n;
  }

  async pruneExpired(): Promise<number> {
    return (await guard(() => this.sql`DELETE FROM console_sessions WHERE expires_at <= ${this.nowSec()}`)).count;
  }
}

class PgRateHitStore implements RateHitStore {
  constructor(private readonly sql: Sql) {}

  async hit(key: string, limit: number, windowMs: number, nowMs: number): Promise<WindowDecision | 'busy'> {
    const r = await unlessBusy(() => this.sql<{ allowed: boolean; n: number; oldest: number | null }[]>`
      SELECT allowed, n, oldest FROM proxyd_rate_hit(${key}, ${limit}::int, ${windowMs}::bigint, ${nowMs}::bigint)`);
    if (r === 'busy') return r;
    return { allowed: r[0]!.allowed, count: r[0]!.n, oldestAtMs: r[0]!.oldest };
  }

  async peek(key: string, windowMs: number, nowMs: number): Promise<WindowDecision | 'busy'> {
    const r = await unlessBusy(() => this.sql<{ n: number; oldest: number | null }[]>`
      SELECT count(*)::int AS n, min(at_ms) AS oldest FROM rate_hits WHERE key = ${key} AND at_ms > ${nowMs - windowMs}`);
    if (r === 'busy') return r;
    return { allowed: true, count: r[0]!.n, oldestAtMs: r[0]!.oldest };
  }

  async record(key: string, nowMs: number): Promise<'ok' | 'busy'> {
    const r = await unlessBusy(() => this.sql`INSERT INTO rate_hits (key, at_ms) VALUES (${key}, ${nowMs})`);
    return r === 'busy' ? r : 'ok';
  }

  async prune(olderThanMs: number): Promise<number | 'busy'> {
    const r = await unlessBusy(() => this.sql`DELETE FROM rate_hits WHERE at_ms <= ${olderThanMs}`);
    return r === 'busy' ? r : r.count;
  }
}

class PgTrafficStore extends PgFamily implements TrafficStore {
  async add(deltas: Map<number, TrafficDelta>): Promise<'ok' | 'busy'> {
    if (deltas.size === 0) return 'ok';
    const now = this.nowSec();
    const r = await unlessBusy(() =>
      this.sql.begin(async (tx) => {
        for (const [accountId, d] of deltas) {
          await tx`
            INSERT INTO traffic (account_id, bytes_up, bytes_down, connections, updated_at)
            VALUES (${accountId}, ${d.bytesUp}, ${d.bytesDown}, ${d.connections}, ${now})
            ON CONFLICT (account_id) DO UPDATE SET bytes_up = traffic.bytes_up + excluded.bytes_up, bytes_down = traffic.bytes_down + excluded.bytes_down,
              connections = traffic.connections + excluded.connections, updated_at = excluded.updated_at`;
        }
      }),
    );
    return r === 'busy' ? r : 'ok';
  }
}

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
  readonly whitelist: PgWhitelistStore;
  readonly proxyUsers: PgProxyUserStore;
  readonly sessions: PgConsoleSessionStore;
  readonly traffic: PgTrafficStore;
  readonly changeLog: PgChangeLogStore;
  private readonly rateHits: PgRateHitStore;
  private closed = false;

  private constructor(
    private readonly sql: Sql,
    private readonly background: Sql,
    url: string,
    opts: PostgresStoreOptions,
  ) {
    const nowMs = opts.nowMs ?? Date.now;
    const nowSec = () => Math.floor(nowMs() / 1000);
    this.location = redactUrl(url);
    this.accounts = new PgAccountStore(sql, nowSec);
    this.tokens = new PgTokenStore(sql, nowSec);
    this.whitelist = new PgWhitelistStore(sql, nowSec, opts.releaseGraceSec ?? DEFAULT_RELEASE_GRACE_SEC, background);
    this.proxyUsers = new PgProxyUserStore(sql, nowSec);
    this.sessions = new PgConsoleSessionStore(sql, nowSec);
    this.traffic = new PgTrafficStore(background, nowSec);
    this.rateHits = new PgRateHitStore(sql);
    this.changeLog = new PgChangeLogStore(background, nowMs);
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
      throw new Error(`database ${redactUrl(url)}: ${err.code ?? ''} ${err.message ?? String(e)}`.replace(/\s+/g, ' ').trim());
    }
    return new PostgresStore(sql, connect(url, BACKGROUND_POOL_SIZE, 'proxyd background'), url, opts);
  }

  sharedRateHits(): RateHitStore {
    return this.rateHits;
  }

  async fleetSecret(name: string, candidate: string): Promise<string | null> {
    const fresh = candidate;
    // Whichever node is first writes it; a node that lost the race reads the winner's on the next round.
    for (let i = 0; i < 5; i++) {
      const [r] = await guard(() => this.sql<{ value: string }[]>`
        WITH ins AS (INSERT INTO fleet_secrets (name, value) VALUES (${name}, ${fresh}) ON CONFLICT (name) DO NOTHING RETURNING value)
        SELECT value FROM ins UNION ALL SELECT value FROM fleet_secrets WHERE name = ${name} LIMIT 1`);
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
    await Promise.all([this.sql.end({ timeout: 2 }), this.background.end({ timeout: 2 })]);
  }
}
