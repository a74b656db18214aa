// The store's seam: one async interface per table family, domain types in and out, failures as values.
// Backends (sqlite/, postgres/) implement it; nothing outside store/ sees a driver, a row or an SQL error.
import type { UsageDelta } from '../../gateway/types.js';
import type { AuditChainRow, AuditEntry, AuditHead, AuditRecord } from './audit-chain.js';

export type { AuditActor, AuditActorType, AuditChainRow, AuditEntry, AuditHead, AuditRecord } from './audit-chain.js';

/**
 * The audit record of an account-changing store call (docs/security.md, "Audit log"), written in the call's own
 * transaction onto the account's chain: no change without its record. The store fills in the account the call
 * changes (a record can never name another), the time, and for a batch the items it changed.
 */
export type AuditDraft = Omit<AuditEntry, 'accountId'>;

export type AccountStatus = 'active' | 'suspended' | 'closed';

export interface Account {
  id: number;
  email: string;
  status: AccountStatus;
  verified: boolean;
  created_at: number;
}

export interface ApiToken {
  id: number;
  account_id: number;
  access_key: string;
  secret_hash: Buffer;
  status: 'active' | 'disabled';
  expires_at: number | null;
  created_at: number;
}

export interface ApiTokenWithAccount extends ApiToken {
  account_status: AccountStatus;
}

/** An API key as stored (docs/api.md, "Authentication"): the secret only as its SHA-256; times in seconds. */
export interface ApiKeyInfo {
  /** The public id (the part of the key between `pxk_` and the secret). */
  id: string;
  account_id: number;
  name: string;
  scopes: string[];
  created_at: number;
  expires_at: number | null;
  /** Addresses and CIDRs the key works from (canonical); empty: anywhere. */
  allowed_ips: string[];
  revoked_at: number | null;
  last_used_at: number | null;
  last_used_ip: string | null;
}

export interface ApiKeyRow extends ApiKeyInfo {
  secret_hash: Buffer;
}

export interface ApiKeyWithAccount extends ApiKeyRow {
  account_status: AccountStatus;
}

export interface NewApiKey {
  id: string;
  accountId: number;
  name: string;
  scopes: readonly string[];
  secretHash: Buffer;
  expiresAt: number | null;
  allowedIps: readonly string[];
}

/** A key-authenticated call's admission in one database call (PostgreSQL, where the limits' window log lives too). */
export interface KeyCallCheck {
  badKey: string;
  badLimit: number;
  keyId: string;
  secretHash: Buffer;
  /** The caller's address (canonical), for the key's allowed sources; null when it is not an address. */
  source: string | null;
  /** null: any scope. */
  scope: string | null;
  rateKey: string;
  rateLimit: number;
  /** A route's own limit per key on top (usage), or null. */
  rate2Key: string | null;
  rate2Limit: number;
  windowMs: number;
  nowMs: number;
}

export type KeyCallVerdict =
  | { kind: 'locked'; oldestAtMs: number | null }
  | { kind: 'invalid' }
  | { kind: 'scope' | 'ok'; keyId: string; accountId: number; scopes: string[] }
  | { kind: 'limited'; keyId: string; accountId: number; scopes: string[]; oldestAtMs: number | null };

export interface ApiKeyStore {
  /** The lock-out, the key, its scope and its limits in one call (PostgreSQL); absent where they cannot be one. */
  checkCall?(q: KeyCallCheck): Promise<KeyCallVerdict | 'busy'>;
  /**
   * A new key, unless the account already holds `max` live keys (neither revoked nor expired): 'too_many'; an id
   * already taken (a collision of random ids): 'exists'. Counted and inserted in one transaction.
   */
  create(k: NewApiKey, max: number, audit?: AuditDraft): Promise<ApiKeyInfo | 'too_many' | 'exists'>;
  /** The key of this public id with its account's status, for one request's check (no cache: a revocation counts at once). */
  forAuth(id: string): Promise<ApiKeyWithAccount | null>;
  /** Every key of the account, revoked ones too, newest first (never the hash). */
  list(accountId: number): Promise<ApiKeyInfo[]>;
  /** Revokes the account's key; null when it has no such key or it was revoked already (nothing written). */
  revoke(accountId: number, id: string, audit?: AuditDraft): Promise<ApiKeyInfo | null>;
  /** Records a use (at most about once a minute per key and node: the caller throttles). */
  touch(id: string, atSec: number, ip: string): Promise<void>;
}

export interface WhitelistEntry {
  id: number;
  account_id: number;
  ip: string;
  remark: string;
  status: 1 | 2;
  created_at: number;
}

/** `busy`: a lock held elsewhere or the database out of reach; nothing of this item was written. */
export type ClaimOutcome = 'added' | 'already_listed' | 'unavailable' | 'busy';
export type ReleaseOutcome = 'deleted' | 'absent' | 'busy';

export interface ListFilter {
  status?: 1 | 2 | undefined;
  ip?: string | undefined;
  limit: number;
  offset: number;
}

export interface Inconsistencies {
  claimsWithoutEntry: number;
  entriesWithoutClaim: number;
}

export interface Repairs {
  claimsReleased: number;
  claimsRestored: number;
  entriesRemoved: number;
}

export interface ProxyUser {
  id: number;
  account_id: number;
  username: string;
  status: 'active' | 'disabled';
  created_at: number;
}

export interface ProxyUserAuth {
  account_id: number;
  password_hash: string;
  status: 'active' | 'disabled';
  account_status: AccountStatus;
}

export interface SessionRecord {
  accountId: number | null;
  /** The serialized session (JSON); never contains a password or an API token at rest beyond one redirect. */
  data: string;
  expiresAtSec: number;
}

/** How long IPs of a closed account stay "being released" unless --release-grace says otherwise. */
export const DEFAULT_RELEASE_GRACE_SEC = 600;

export interface WindowDecision {
  allowed: boolean;
  /** Hits in the window after this call. */
  count: number;
  /** When the oldest hit in the window leaves it (ms epoch), or null when the window is empty. */
  oldestAtMs: number | null;
}

/**
 * A node's metered usage of one account and subject (`user:NAME` or `ip:A.B.C.D`) since its last flush: what the
 * gateway's `collectUsage()` hands over, declared once on the gateway's face (a type only: nothing of the gateway runs here).
 */
export type { UsageDelta };

export type UsagePeriod = 'minute' | 'hour' | 'day';

/** One bucket row as read back (`subject` null: summed over subjects). */
export interface UsageRow {
  startMs: number;
  subject: string | null;
  bytesUp: number;
  bytesDown: number;
  connections: number;
}

/** A read of an account's buckets of one period in [fromMs, toMs), by time or by subject, optionally of one subject. */
export interface UsageQuery {
  accountId: number;
  period: UsagePeriod;
  fromMs: number;
  toMs: number;
  by: 'time' | 'subject';
  subject?: string;
}

/** An account's usage under one registrable domain (`''`: under no named domain, "other"). */
export interface DomainUsageRow {
  domain: string;
  bytesUp: number;
  bytesDown: number;
  connections: number;
}

/** An account's webhook (docs/operations.md, "Webhooks"): where events go, at which percentages of the plan, signed with `secret`. */
export interface Webhook {
  accountId: number;
  url: string;
  thresholds: number[];
  secret: string;
}

export type WebhookEventState = 'pending' | 'delivered' | 'failed';

/** One event to deliver: its id (the same on every attempt), body, and where its delivery stands. */
export interface WebhookEvent {
  id: string;
  accountId: number;
  type: string;
  body: string;
  state: WebhookEventState;
  attempts: number;
  lastStatus: number | null;
  nextAtMs: number;
  createdAtMs: number;
}

export interface WebhookStore {
  set(w: Webhook, audit?: AuditDraft): Promise<void>;
  /** False when the account had none (nothing recorded). */
  remove(accountId: number, audit?: AuditDraft): Promise<boolean>;
  get(accountId: number): Promise<Webhook | null>;
  all(): Promise<Webhook[]>;
  /**
   * Records an event once per (account, `onceKey`): false, and nothing added, when that key was recorded
   * before (by any node): what makes "once per threshold per period" hold fleet-wide.
   */
  addEvent(e: {
    id: string;
    accountId: number;
    type: string;
    onceKey: string;
    body: string;
    nowMs: number;
  }): Promise<boolean>;
  /** Claims up to `max` pending events due by `nowMs` for `node`, for `leaseMs` (no other node takes them meanwhile). */
  claimDue(node: string, nowMs: number, leaseMs: number, max: number): Promise<WebhookEvent[]>;
  /** An attempt's outcome, written only while `node` holds the claim. */
  finish(
    id: string,
    node: string,
    o: { state: WebhookEventState; attempts: number; lastStatus: number | null; nextAtMs: number },
  ): Promise<void>;
  /** An account's events, newest first. */
  events(accountId: number, limit: number): Promise<WebhookEvent[]>;
  /** Events of every account still to be delivered (first attempts and retries), fleet-wide: /metrics. */
  pendingCount(): Promise<number>;
}

export interface AccountStore {
  create(email: string, passwordHash: string, verified: boolean, audit?: AuditDraft): Promise<Account | 'exists'>;
  get(id: number): Promise<Account | null>;
  findByEmail(email: string): Promise<Account | null>;
  passwordHash(id: number): Promise<string | null>;
  setVerified(id: number, verified: boolean, audit?: AuditDraft): Promise<void>;
  setPasswordHash(id: number, hash: string, audit?: AuditDraft): Promise<void>;
  /** A new email (unique case-insensitively); 'exists' when another account has it, nothing changed. */
  setEmail(id: number, email: string, audit?: AuditDraft): Promise<'ok' | 'exists'>;
  /** Closing moves every IP the account holds to "being released" and ends its entries, atomically. */
  setStatus(id: number, status: AccountStatus, audit?: AuditDraft): Promise<void>;
}

/**
 * An API call's admission in one step, for a backend whose rate-hit log is in the same database: the source
 * IP's invalid-token lock-out, the token (by access key and the SHA-256 of the presented secret), the
 * invalid-token hit when it fails, and the token's per-route hit when it holds. Keys and limits as ApiLimits uses them.
 */
export interface ApiCallCheck {
  badKey: string;
  badLimit: number;
  accessKey: string;
  secretHash: Buffer;
  rateKey: string;
  rateLimit: number;
  windowMs: number;
  nowMs: number;
  /** A list call: the page is read in the same round trip once the call is admitted. */
  list?: ListFilter;
}

export interface WhitelistPage {
  items: WhitelistEntry[];
  total: number;
}

export type ApiCallVerdict =
  | { kind: 'locked'; oldestAtMs: number | null }
  | { kind: 'invalid' }
  | { kind: 'limited'; oldestAtMs: number | null }
  | { kind: 'ok'; accountId: number; accessKey: string; page?: WhitelistPage };

export interface TokenStore {
  findByAccessKey(accessKey: string): Promise<ApiTokenWithAccount | null>;
  /** Present where the rate-hit log shares the database (PostgreSQL): one round trip instead of four. */
  checkCall?(req: ApiCallCheck): Promise<ApiCallVerdict | 'busy'>;
  activeToken(accountId: number): Promise<ApiToken | null>;
  /** Disables every active token of the account and stores the new one, atomically. */
  replace(
    accountId: number,
    accessKey: string,
    secretHash: Buffer,
    expiresAt?: number | null,
    audit?: AuditDraft,
  ): Promise<void>;
  /** Disables the active token; its access key, or null when there was none (then nothing is recorded). */
  disable(accountId: number, audit?: AuditDraft): Promise<string | null>;
}

export interface WhitelistStore {
  /** Claims the IP for the account and records the entry, or says why not. One transaction. */
  claimIp(accountId: number, ip: string, remark: string): Promise<ClaimOutcome>;
  /**
   * A batch of claims, one by one in item order (a failing item undoes nothing); one outcome per item. Durable
   * when it resolves. Without `audit`, each item is committed on its own; with it, the items and the one record
   * of the request (its `details.ips`: the IPs added; none added, no record) commit together, each item in a
   * savepoint of that transaction. Throws StoreUnavailableError when the database went away during the batch:
   * without `audit`, items before that point may have been committed; with it, none was.
   */
  claimIps(
    accountId: number,
    items: ReadonlyArray<{ ip: string; remark: string }>,
    audit?: AuditDraft,
  ): Promise<ClaimOutcome[]>;
  /** Soft-deletes the account's entry and releases the global claim at once. */
  releaseClaim(accountId: number, ip: string): Promise<ReleaseOutcome>;
  /** A batch of releases with the same rules as claimIps (`details.ips`: the IPs deleted). */
  releaseIps(accountId: number, ips: readonly string[], audit?: AuditDraft): Promise<ReleaseOutcome[]>;
  list(accountId: number, f: ListFilter): Promise<WhitelistPage>;
  /** Recorded only when the entry exists. */
  setStatus(accountId: number, ip: string, status: 1 | 2, audit?: AuditDraft): Promise<WhitelistEntry | null>;
  /** Claims with no live entry, or live entries with no claim: what a crash must never leave. */
  inconsistencies(): Promise<Inconsistencies>;
  /** Start-up repair (the claim is the owner of record); one transaction. */
  repair(): Promise<Repairs>;
}

/**
 * A proxy user's own settings inside its account's plan (docs/api.md, "Proxy users"): limits (null: none), its expiry
 * (ms; null: never) and its target rules (canonical items, checked after the account's and the service's).
 */
export interface ProxyUserSettings {
  trafficLimit: number | null;
  maxConnections: number | null;
  rateLimit: number | null;
  expiresAt: number | null;
  allow: string[];
  deny: string[];
}

/** A proxy user with its settings, as the customer API shows it. */
export interface ProxyUserDetail extends ProxyUser, ProxyUserSettings {}

export interface ProxyUserFilter {
  status?: 'active' | 'disabled' | undefined;
  /** Usernames starting with this, exactly (case-sensitive). */
  prefix?: string | undefined;
  limit: number;
  offset: number;
}

/** What a change sets (absent: kept). */
export type ProxyUserPatch = Partial<ProxyUserSettings> & { status?: 'active' | 'disabled' };

/** Each change is recorded only when it happened (a user of another account, or none, changes nothing). */
export interface ProxyUserStore {
  create(accountId: number, username: string, passwordHash: string, audit?: AuditDraft): Promise<ProxyUser | 'exists'>;
  /** A user with its status and settings, and its record, in one transaction. */
  createDetailed(
    accountId: number,
    username: string,
    passwordHash: string,
    status: 'active' | 'disabled',
    settings: ProxyUserSettings,
    audit?: AuditDraft,
  ): Promise<ProxyUserDetail | 'exists'>;
  get(id: number): Promise<ProxyUser | null>;
  /** The account's user of that name with its settings; null when absent or another account's. */
  detail(accountId: number, username: string): Promise<ProxyUserDetail | null>;
  /** A page of the account's users by username. */
  page(accountId: number, f: ProxyUserFilter): Promise<{ items: ProxyUserDetail[]; total: number }>;
  /** Applies the patch and its record in one transaction; null (nothing recorded) when the account has no such user. */
  update(
    accountId: number,
    username: string,
    patch: ProxyUserPatch,
    audit?: AuditDraft,
  ): Promise<ProxyUserDetail | null>;
  listForAccount(accountId: number): Promise<ProxyUser[]>;
  setPassword(accountId: number, id: number, passwordHash: string, audit?: AuditDraft): Promise<boolean>;
  delete(accountId: number, id: number, audit?: AuditDraft): Promise<boolean>;
}

/** An Idempotency-Key's claim (docs/api.md, "Idempotency"). */
export type IdempotencyClaim =
  | { kind: 'claimed' }
  | { kind: 'replay'; status: number; body: string }
  /** The key was used with another method, path or body. */
  | { kind: 'mismatch' }
  /** Its first request is still running (on this node or another). */
  | { kind: 'in_flight' };

export interface IdempotencyRequest {
  accountId: number;
  key: string;
  method: string;
  path: string;
  bodyHash: string;
  nowMs: number;
  /** A key older than this is forgotten (24 h). */
  ttlMs: number;
  /** A claim with no answer after this long is taken over (its node died mid-request). */
  staleMs: number;
}

/** Idempotency-Key answers, shared by every node on the database. */
export interface IdempotencyStore {
  /** Claims the key for this request atomically, or says what the first request with it left. */
  claim(r: IdempotencyRequest): Promise<IdempotencyClaim>;
  /** Stores the answer of a claimed key. */
  finish(accountId: number, key: string, status: number, body: string): Promise<void>;
  /** Gives a claimed key back (its request failed before doing anything: it may be sent again). */
  release(accountId: number, key: string): Promise<void>;
  /** Forgets keys made before `beforeMs`; how many. */
  prune(beforeMs: number): Promise<number>;
}

/** A live console session of an account, as the Sessions card lists it. */
export interface SessionListing extends SessionRecord {
  sid: string;
}

export interface ConsoleSessionStore {
  /** The live session, or null when absent or expired (an expired row is removed). */
  get(sid: string): Promise<SessionRecord | null>;
  /** Writes the session, made if absent (a log-in; `audit`: its record, in the same transaction). */
  set(sid: string, rec: SessionRecord, audit?: AuditDraft): Promise<void>;
  /**
   * Writes a session that exists; false, and nothing written, when it has ended meanwhile: a request still in
   * flight when its session was signed out elsewhere never brings it back.
   */
  update(sid: string, rec: SessionRecord): Promise<boolean>;
  /** Ends one session; `audit` is recorded on the session's account when it had one. */
  destroy(sid: string, audit?: AuditDraft): Promise<void>;
  /** Ends every session of the account (logout everywhere, password change, suspension). */
  destroyForAccount(accountId: number, audit?: AuditDraft): Promise<number>;
  /** Ends every session of the account but one (the one that changed the password). */
  destroyOthers(accountId: number, keepSid: string, audit?: AuditDraft): Promise<number>;
  countForAccount(accountId: number): Promise<number>;
  /** The account's live sessions, newest first. */
  listForAccount(accountId: number): Promise<SessionListing[]>;
  pruneExpired(): Promise<number>;
}

/** Sliding-window log shared by every process on the database; `busy` when a lock is held elsewhere. */
export interface RateHitStore {
  /** Records a hit if fewer than `limit` are in the window; atomic across processes. */
  hit(key: string, limit: number, windowMs: number, nowMs: number): Promise<WindowDecision | 'busy'>;
  peek(key: string, windowMs: number, nowMs: number): Promise<WindowDecision | 'busy'>;
  record(key: string, nowMs: number): Promise<'ok' | 'busy'>;
  prune(olderThanMs: number): Promise<number | 'busy'>;
}

export type PlanPeriod = 'day' | 'month' | 'lifetime';

/** An account's plan; a null limit is no limit. Times in ms. */
export interface Plan {
  accountId: number;
  trafficLimit: number | null;
  period: PlanPeriod;
  /** Day of the month (1–28) a monthly period starts on, UTC. */
  anchorDay: number;
  maxConnections: number | null;
  expiresAt: number | null;
  /** Bits per second each way, per node, for the account's connections together (docs/operations.md); null: none. */
  rateLimit?: number | null;
}

/** A proxy user's limits inside its account's plan. */
export interface UserLimits {
  accountId: number;
  username: string;
  trafficLimit: number | null;
  maxConnections: number | null;
  /** Bits per second each way, per node, for the user's connections together; null: none. */
  rateLimit?: number | null;
  /** The user's own expiry (ms): past it, refused like an expired plan; null: never. */
  expiresAt?: number | null;
  /** The user's own target rules, checked after the account's and the service's (canonical items). */
  allow?: string[];
  deny?: string[];
}

export interface PlanStore {
  get(accountId: number): Promise<Plan | null>;
  /** Creates or replaces the account's plan. */
  set(plan: Plan, audit?: AuditDraft): Promise<void>;
  /** False when the account has no proxy user of that name (nothing recorded). */
  setUserLimits(
    accountId: number,
    username: string,
    limits: { trafficLimit: number | null; maxConnections: number | null; rateLimit?: number | null },
    audit?: AuditDraft,
  ): Promise<boolean>;
  userLimits(accountId: number): Promise<UserLimits[]>;
  /** Every plan and every user with a limit: what the nodes enforce. */
  all(): Promise<{ plans: Plan[]; users: UserLimits[] }>;
  /** A counter that moves whenever a plan, a user limit or a limited user's name changes (read it, then `all` if it moved). */
  version(): Promise<number>;
  /**
   * Connection slots of one capped key (`a:ACCOUNT`, `u:ACCOUNT:SUBJECT`) leased by `node`, atomically across
   * the fleet: the node asks to hold `want`, and holds what `max` leaves after the other nodes' unexpired
   * leases (never fewer than 0, never more than `want`). Returns what it now holds; the lease lasts `ttlMs`.
   */
  leaseSlots(node: string, key: string, want: number, max: number, ttlMs: number, nowMs: number): Promise<number>;
  /** Renews (or gives back, `slots` 0) this node's leases, each to at most what it holds: never grows one. */
  renewSlots(
    node: string,
    leases: ReadonlyArray<{ key: string; slots: number }>,
    ttlMs: number,
    nowMs: number,
  ): Promise<void>;
}

/**
 * A flush's usage per registrable domain, sent apart from its buckets (a node writes domains less often than
 * buckets): the day of `atMs` receives them. Absent, the domain rows come from the flush's own deltas.
 */
export interface FlushDomains {
  atMs: number;
  deltas: readonly UsageDelta[];
}

export interface UsageStore {
  /**
   * Adds one flush of a node's deltas (one per account, subject and registrable domain, in `target`) to its
   * minute, hour and day buckets of `atMs` (PostgreSQL: the minute only, hours and days by `rollUp`; reads count
   * both alike) and its day's domain rows (from `domains` when given; rows of its own, so nodes
   * never wait on each other's rows), once: a flush whose id
   * was already applied (sent again after a timeout whose outcome was unknown) adds nothing. `busy` (nothing
   * added) leaves it for the caller to send again, with the same id.
   */
  addFlush(
    node: string,
    flushId: string,
    atMs: number,
    deltas: readonly UsageDelta[],
    domains?: FlushDomains,
  ): Promise<'ok' | 'duplicate' | 'busy'>;
  /**
   * Folds finished minute buckets into their hour and day buckets (a backend whose flushes write only minute
   * buckets: PostgreSQL); the reads count what is not folded yet from the minutes, so totals are the same
   * before and after. One node at a time (the others get 'skipped'); how many minute rows it folded.
   */
  rollUp?(): Promise<number | 'skipped'>;
  /** Buckets of one account in [fromMs, toMs), by time (summed over subjects) or by subject (summed over time). */
  query(q: UsageQuery): Promise<UsageRow[]>;
  /** Usage per registrable domain over the days in [fromMs, toMs), optionally of one subject (docs/api.md, "Usage"). */
  domains(q: { accountId: number; fromMs: number; toMs: number; subject?: string }): Promise<DomainUsageRow[]>;
  /** When the account's kept usage starts (its earliest bucket, ms), or null when it has none. */
  firstUsage(accountId: number): Promise<number | null>;
  /** Day buckets of these accounts since `sinceMs`, summed over nodes: what their plans' periods have used. */
  dailyTotals(
    accountIds: readonly number[],
    sinceMs: number,
  ): Promise<Array<{ accountId: number; subject: string; startMs: number; bytes: number }>>;
  /** Removes buckets of `period` that start before `beforeMs`, and flush ids older than a day; how many rows. */
  prune(period: UsagePeriod, beforeMs: number): Promise<number | 'busy'>;
}

/** One connection-log record as written (the gateway's ConnectionRecord). `accountId` -1: none matched. */
export interface ConnectionLogEntry {
  startedAt: number;
  requestId: string;
  protocol: string;
  sourceIp: string;
  username: string | null;
  accountId: number;
  target: string | null;
  reason: string | null;
  bytesUp: number;
  bytesDown: number;
  durationMs: number;
  /** On an entry node: the exit it went through; the exit its session had before, when it moved. */
  exit?: string | null;
  exitMovedFrom?: string | null;
  /** A SOCKS5 UDP association: its datagrams each way. */
  datagramsUp?: number;
  datagramsDown?: number;
}

/** A record as read back, with the node that wrote it and its account's email. */
export interface ConnectionLogRow extends ConnectionLogEntry {
  id: number;
  node: string;
  accountEmail: string | null;
}

export interface ConnectionLogFilter {
  /** One account's records only (the console); absent: every record (the operator). */
  accountId?: number | undefined;
  username?: string | undefined;
  sourceIp?: string | undefined;
  requestId?: string | undefined;
  reason?: string | undefined;
  decision?: 'admitted' | 'refused' | undefined;
  sinceMs?: number | undefined;
  /** Only records with a larger id, oldest first (following); without it, newest first. */
  afterId?: number | undefined;
  limit: number;
  /** With `accountId`: look through at most this many of the account's newest records. */
  scanLimit?: number | undefined;
}

export interface ConnectionLogStore {
  /** Appends records one node wrote; `busy` (nothing written) when the database is locked or away. */
  insert(node: string, entries: readonly ConnectionLogEntry[]): Promise<'ok' | 'busy'>;
  query(f: ConnectionLogFilter): Promise<ConnectionLogRow[]>;
  /**
   * Removes records that started before `beforeMs`, in slices that let other work run between them (whole days
   * at once where the backend keeps days apart); how many (a day dropped whole counts as its estimated rows).
   */
  prune(beforeMs: number): Promise<number | 'busy'>;
  /** The newest record's id (0: none), whatever any filter says: where a follower goes on from. */
  newestId(): Promise<number>;
  /** The log's size on disk (rows and indexes), in bytes. */
  sizeBytes(): Promise<number>;
  /** Removes the oldest UTC day of records if it started before `keepFromMs`'s day; false when there is none such. */
  dropOldestDay(keepFromMs: number): Promise<boolean>;
  /**
   * Runs `work` (a size check of the log: sizeBytes, dropOldestDay) on this node only if no other node of the fleet
   * is running one (PostgreSQL: a transaction-scoped advisory lock, tried, held while `work` runs); 'skipped'
   * otherwise. Absent: one process owns the log (SQLite), `work` runs as is.
   */
  alone?<T>(work: () => Promise<T>): Promise<T | 'skipped'>;
}

/** What changed, by key: a proxy user (username), a whitelisted IP, or an account (id). */
export type ChangeKind = 'user' | 'ip' | 'account';

export interface AdmissionUserRow {
  username: string;
  account_id: number;
  password_hash: string;
  status: 'active' | 'disabled';
}

/** An IP that admits someone: a held claim with its owner's live entry. */
export interface AdmissionIpRow {
  ip: string;
  account_id: number;
  status: 1 | 2;
}

export interface AdmissionAccountRow {
  id: number;
  status: string;
}

/** An account's target rules (account_id 0: the service's), canonical items joined by commas. */
export interface TargetRulesRow {
  account_id: number;
  deny: string;
  allow: string;
}

export interface AdmissionSnapshotRows {
  seq: number;
  users: AdmissionUserRow[];
  ips: AdmissionIpRow[];
  accounts: AdmissionAccountRow[];
  rules: TargetRulesRow[];
  /**
   * PostgreSQL: sequence numbers at or below `seq` that the snapshot could not see (their transactions were still
   * running), and the snapshot's xmax. The reader reads them again until they fill or are known rolled back; a
   * snapshot taken on another connection hands them over with `adoptSnapshot`.
   */
  gaps?: { seqs: number[]; xmax: number };
}

/**
 * Where another thread opens a read connection of its own to the same data (the admission view's reload worker):
 * the data dir of proxyd.db, or the database URL (with its password: never log it).
 */
export type SnapshotSource = { backend: 'sqlite'; dataDir: string } | { backend: 'postgres'; url: string };

/** Current state of every key named by the log rows read; `null` state: the key no longer admits. */
export interface AdmissionChangeRows {
  /** Sequence of the last log row read (the reader's new position). */
  seq: number;
  /** Log rows read (a batch shorter than the limit means the reader is at the head). */
  rows: number;
  users: Array<{ username: string; row: AdmissionUserRow | null }>;
  ips: Array<{ ip: string; row: AdmissionIpRow | null }>;
  accounts: Array<{ id: number; row: AdmissionAccountRow | null }>;
  /** Target rules of every account key read (the service's under id 0); null: none. */
  rules: Array<{ id: number; row: TargetRulesRow | null }>;
}

/** The service's target rules are stored under this account id (no account has it). */
export const SERVICE_RULES_ID = 0;

/** Target rules (docs/gateway.md, "Target rules"): canonical items, validated by the caller. */
export interface TargetRulesStore {
  get(accountId: number): Promise<{ deny: string[]; allow: string[] }>;
  /** Replaces both lists (empty lists remove the row). */
  set(
    accountId: number,
    rules: { deny: readonly string[]; allow: readonly string[] },
    audit?: AuditDraft,
  ): Promise<void>;
}

/** A read of audit records: one account's (the console, the API) or every account's (the operator), newest first. */
export interface AuditQuery {
  accountId?: number | undefined;
  /** Time range [fromMs, toMs). */
  fromMs?: number | undefined;
  toMs?: number | undefined;
  actions?: readonly string[] | undefined;
  limit: number;
  offset: number;
  /** Default newest first (by id); `oldest` for a log read forwards. */
  order?: 'newest' | 'oldest';
}

export interface AuditStore {
  /**
   * A record on its own, for an action that changes no other row (a failed log-in) or the service's own (a plan
   * that expired). With `onceKey`, at most one record per account and key, fleet-wide: false when there is one.
   */
  append(entry: AuditEntry, onceKey?: string): Promise<boolean>;
  list(q: AuditQuery): Promise<{ rows: AuditRecord[]; total: number }>;
  /** Records in chain order (account, then seq) after `after`, at most `limit`; of one account with `onlyAccount`. */
  chain(after: { accountId: number; seq: number }, limit: number, onlyAccount?: number): Promise<AuditChainRow[]>;
  /** Every chain's head and anchor (or one account's). */
  heads(accountId?: number): Promise<AuditHead[]>;
  /**
   * Removes each account's records up to its newest one older than `beforeMs` (a prefix of its chain: clocks of
   * several nodes may disagree a little), and keeps the last removed record's seq and hash as the chain's anchor,
   * so what is left still verifies. How many records went.
   */
  prune(beforeMs: number): Promise<number>;
}

/** A registered passkey (WebAuthn credential) of an account. */
export interface Passkey {
  id: number;
  accountId: number;
  /** base64url, as the browser names it. */
  credentialId: string;
  publicKey: Buffer;
  counter: number;
  transports: string[];
  name: string;
  createdAtMs: number;
  lastUsedAtMs: number | null;
}

/** An account's second factor as the console reads it. */
export interface SecondFactorState {
  /** The TOTP secret sealed with the console's key (never in clear at rest), and the newest time step accepted. */
  totp: { sealedSecret: string; enabledAtMs: number; lastStep: number } | null;
  recoveryCodesLeft: number;
  passkeys: Passkey[];
  /** The second step is refused until then (ms epoch; 0: not locked). */
  lockedUntilMs: number;
}

/** The lock after wrong second factors: `max` within `windowMs` lock the second step for `lockMs`. */
export interface SecondFactorLockRule {
  max: number;
  windowMs: number;
  lockMs: number;
}

export interface SecondFactorStore {
  state(accountId: number): Promise<SecondFactorState>;
  /** TOTP on (replacing a TOTP secret), its first code's step taken, and new recovery codes (by hash) replacing any. */
  enableTotp(
    accountId: number,
    sealedSecret: string,
    step: number,
    recoveryCodeHashes: readonly string[],
    audit?: AuditDraft,
  ): Promise<void>;
  /** Takes a time step of the account's TOTP: false when it, or a later one, was taken (a replayed code). */
  takeTotpStep(accountId: number, step: number): Promise<boolean>;
  /** Spends one recovery code by its hash: false when there is no such unused code. */
  useRecoveryCode(accountId: number, codeHash: string, audit?: AuditDraft): Promise<boolean>;
  /** New recovery codes, replacing every old one. */
  replaceRecoveryCodes(accountId: number, codeHashes: readonly string[], audit?: AuditDraft): Promise<void>;
  /** Registers a passkey; with `recoveryCodeHashes`, the account's recovery codes are replaced too (its first factor). */
  addPasskey(
    p: {
      accountId: number;
      credentialId: string;
      publicKey: Buffer;
      counter: number;
      transports: string[];
      name: string;
    },
    recoveryCodeHashes: readonly string[] | null,
    audit?: AuditDraft,
  ): Promise<Passkey | 'exists'>;
  passkeyByCredential(credentialId: string): Promise<Passkey | null>;
  /** A passkey's signature counter after a log-in with it. */
  passkeyUsed(id: number, counter: number): Promise<void>;
  removePasskey(accountId: number, id: number, audit?: AuditDraft): Promise<boolean>;
  /** Every second factor off: TOTP, recovery codes, passkeys, the lock. False (nothing recorded) when none was on. */
  disable(accountId: number, audit?: AuditDraft): Promise<boolean>;
  /** A wrong second factor, counted with its record; returns when the second step is locked until (0: not locked). */
  fail(accountId: number, rule: SecondFactorLockRule, audit?: AuditDraft): Promise<number>;
}

/**
 * The change log every node's admission view follows: rows written by triggers in the same transaction as
 * each change that affects admission, in commit order, trimmed to a bounded size.
 */
export interface ChangeLogStore {
  /**
   * Everything that admits, and the log sequence it is current to (one consistent read). With `onUsers`, proxy
   * users are handed over a page at a time as they are read (the answer's `users` is then empty): a million rows
   * are never held at once, and the event loop turns between pages.
   */
  snapshot(onUsers?: (rows: readonly AdmissionUserRow[]) => void | Promise<void>): Promise<AdmissionSnapshotRows>;
  /** The current state of every key changed after `since` (up to `limit` log rows), or 'behind' when trimmed past it. */
  changesSince(since: number, limit: number): Promise<AdmissionChangeRows | 'behind'>;
  /** Sequence of the newest row (the trim horizon when the log is empty). */
  headSeq(): Promise<number>;
  /** Rows up to here are gone: a reader below it must reload in full. */
  horizon(): Promise<number>;
  /** Keeps the newest `keep` rows; how many were removed (0 when the log has not grown enough to be worth a write). */
  trim(keep: number): Promise<number>;
  /** Calls `wake` soon after any process commits a change (a hint: the log is the truth); returns the stop function. */
  watch(wake: () => void, onError?: (err: Error) => void): () => void;
  /** How another thread opens its own read connection to take a snapshot of the same data (null: it cannot). */
  snapshotSource(): SnapshotSource | null;
  /**
   * A snapshot taken on another connection (a worker thread's) is where this reader now follows on from: its
   * `changesSince` reads the snapshot's gaps again (PostgreSQL), and a read begun before this call leaves the
   * reader's bookkeeping alone (its answer belongs to the view being replaced).
   */
  adoptSnapshot(snap: Pick<AdmissionSnapshotRows, 'gaps'>): void;
}

export type { EgressUsageDelta } from '../../gateway/types.js';
import type { EgressUsageDelta } from '../../gateway/types.js';

export interface EgressHolderRow {
  address: string;
  node: string;
  accountId: number | null;
  quarantineUntil: number | null;
}

export interface EgressUsageRow {
  address: string;
  bytesUp: number;
  bytesDown: number;
  connections: number;
}

/** A dedicated egress address's state (docs/admin.md, "ip"): quarantined ones come back free at `quarantineUntil`. */
export type EgressState = 'assigned' | 'quarantined' | 'free';

/** An egress address a node offers (its `--egress-pool`, else its local IPv4 addresses), and who holds it. */
export interface EgressAddressRow {
  address: string;
  node: string;
  country: string | null;
  city: string | null;
  accountId: number | null;
  email: string | null;
  /** Seconds since the epoch; null when not assigned. */
  assignedAt: number | null;
  /** As of the read (a quarantine that ended reads `free`). */
  state: EgressState;
  quarantineUntil: number | null;
}

/** Why an assignment was refused (nothing changed): the first address at fault. */
export type AssignRefusal =
  | { why: 'not_on_node'; address: string }
  | { why: 'held'; address: string }
  | { why: 'quarantined'; address: string; until: number };

export type ReplaceOutcome =
  | { ok: true; old: string; new: string }
  | { ok: false; why: 'not_yours' | 'no_free' }
  | { ok: false; why: 'allowance'; used: number };

export interface EgressStore {
  /**
   * What a node offers, with its location: new addresses join free; a known one keeps its holder (node and location
   * refreshed). With `prune` (an offer the operator named: a pool or an egress address), what the node had and no
   * longer offers goes: deleted when free, else marked withdrawn (kept for its holder or quarantine, never handed
   * to anyone new) until it is free at a later start.
   */
  register(
    node: string,
    addresses: readonly string[],
    location: { country: string | null; city: string | null },
    opts?: { prune?: boolean },
  ): Promise<void>;
  /** Whether any address was ever registered for this node name. */
  nodeKnown(node: string): Promise<boolean>;
  /** All of `addresses` to the account, or none (the first refusal). */
  assign(
    accountId: number,
    node: string,
    addresses: readonly string[],
    audit?: AuditDraft,
  ): Promise<AssignRefusal | null>;
  /**
   * Frees the addresses (quarantined until `quarantineUntil` when given), each holder's record written with the change;
   * the addresses no node offers are returned (nothing changed then).
   */
  release(
    addresses: readonly string[],
    quarantineUntil: number | null,
    audit?: (accountId: number, addresses: string[]) => AuditDraft,
  ): Promise<{ unknown: string[]; released: number }>;
  list(filter: { accountId?: number | undefined; node?: string | undefined }): Promise<EgressAddressRow[]>;
  /** Every address with its node, holder and quarantine (seconds), unordered: what a node's view holds (no join, no sort). */
  holders(): Promise<EgressHolderRow[]>;
  /** Swaps one of the account's addresses for a free one (same node, else same country), at most `max` per `month` (YYYY-MM). */
  replace(
    accountId: number,
    address: string,
    o: { month: string; max: number; quarantineUntil: number },
    audit?: (r: { old: string; new: string }) => AuditDraft,
  ): Promise<ReplaceOutcome>;
  /** Replacements the account made in `month` (YYYY-MM). */
  replacementsUsed(accountId: number, month: string): Promise<number>;
  /** Grows with every change of any address: a node reloads when it moved. */
  version(): Promise<number>;
  /** Adds usage by dedicated address to the UTC day starting at `dayMs` (throws when the database is busy: the caller keeps it). */
  addUsage(rows: readonly EgressUsageDelta[], dayMs: number): Promise<void>;
  /** An account's usage by address over the UTC days that overlap [fromMs, toMs), largest first. */
  usageByAddress(accountId: number, fromMs: number, toMs: number): Promise<EgressUsageRow[]>;
  /** Removes usage by address of days before `beforeMs`. */
  pruneUsage(beforeMs: number): Promise<number>;
}

type Backend = 'sqlite' | 'postgres';

/** An exit as the registry holds it (the gateway's ExitRow). */
export interface ExitNodeRow {
  node: string;
  /** host:port of its hop listener. */
  hop: string;
  country: string | null;
  city: string | null;
  /** SHA-256 fingerprints of the hop certificates it may present (one; two while a new one settles). */
  fingerprints: string[];
  /** Milliseconds since its last heartbeat, by the database's clock. */
  ageMs: number;
}

/** The fleet's hop secret: the current one, and the one before it with how long ago it was replaced. */
export interface HopSecretState {
  current: string;
  previous: string | null;
  /** Milliseconds since the last rotation (by the database's clock); null: never rotated. */
  rotatedAgoMs: number | null;
}

/** The exit-node registry and the hop's secret (PostgreSQL only: a fleet). */
export interface ExitStore {
  /** Registers (or refreshes) this exit; every heartbeat calls it again. */
  heartbeat(e: {
    node: string;
    hop: string;
    country: string | null;
    city: string | null;
    fingerprints: readonly string[];
  }): Promise<void>;
  /** Leaves the registry (at stop). */
  remove(node: string): Promise<void>;
  /** Exits that heartbeated within `withinMs`. */
  list(withinMs: number): Promise<ExitNodeRow[]>;
  /** Asks a live exit for a new hop certificate; false when no exit of that name heartbeated within `withinMs`. */
  requestCertRotation(node: string, withinMs: number): Promise<boolean>;
  /** Takes a pending request for this exit (true once per request, whichever of its workers asks first). */
  claimCertRotation(node: string): Promise<boolean>;
  /** The hop secret, made from `candidate` by the first node that asks. */
  hopSecret(candidate: string): Promise<HopSecretState>;
  /** Replaces the hop secret with `fresh`; the replaced one stays as `previous`. */
  rotateHopSecret(fresh: string): Promise<void>;
}

export interface Store {
  readonly backend: Backend;
  /** The data dir holding proxyd.db (SQLite), or null when the database is a server. */
  readonly dataDir: string | null;
  /** Where the data lives, for messages (a path, or a URL without its password). */
  readonly location: string;
  readonly accounts: AccountStore;
  readonly tokens: TokenStore;
  readonly apiKeys: ApiKeyStore;
  readonly whitelist: WhitelistStore;
  readonly proxyUsers: ProxyUserStore;
  readonly idempotency: IdempotencyStore;
  readonly sessions: ConsoleSessionStore;
  readonly usage: UsageStore;
  readonly plans: PlanStore;
  readonly webhooks: WebhookStore;
  readonly targetRules: TargetRulesStore;
  /** Dedicated egress addresses (docs/admin.md, "ip"). */
  readonly egress: EgressStore;
  readonly audit: AuditStore;
  readonly secondFactors: SecondFactorStore;
  /** Exit nodes of an entry/exit fleet; null on SQLite (roles need PostgreSQL). */
  readonly exits: ExitStore | null;
  readonly connectionLog: ConnectionLogStore;
  readonly changeLog: ChangeLogStore;
  /** The rate-hit log for limits shared between processes (SQLite: on a connection that never waits for a lock). */
  sharedRateHits(): RateHitStore;
  /** A secret every node of a fleet shares: `candidate` if this call creates it, else the one stored first; null when the data dir holds it instead. */
  fleetSecret(name: string, candidate: string): Promise<string | null>;
  /** True when the database answers. Never throws. */
  ping(): Promise<boolean>;
  /** Corruption the backend can detect; empty when sound. */
  integrityProblems(): Promise<string[]>;
  close(): Promise<void>;
}

/** The database cannot be reached (stopped, paused, network): the request answers 503, nothing was done. */
export class StoreUnavailableError extends Error {
  constructor(detail: string) {
    super(`database unavailable: ${detail}`);
    this.name = 'StoreUnavailableError';
  }
}
