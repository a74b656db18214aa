// The admission view (docs/operations.md Fleet): what admits, in memory — proxy users with their password hashes, the IPs
// held by a live entry, and each account's status — loaded once and kept current from the change log.
// The gateway's admission reads only this, so a connection never waits for the database.
import { TargetRuleSet, type TargetRuleSets } from '../../gateway/index.js';
import { splitItems } from '../store/target-rules-sql.js';
import { SERVICE_RULES_ID, type AdmissionChangeRows, type AdmissionIpRow, type AdmissionSnapshotRows, type AdmissionUserRow, type ProxyUserAuth, type TargetRulesRow } from '../store/index.js';

/** A proxy user as admission needs it; `account_status` is 'active' or why not ('inactive', 'unknown'). */
type AdmissionUser = Omit<ProxyUserAuth, 'account_status'> & { account_status: string };

/** Where the view comes from: a snapshot, then the changes after a sequence (either backend's change log). */
export interface AdmissionFeed {
  snapshot(): Promise<AdmissionSnapshotRows>;
  /** 'behind': the log was trimmed past `seq` (or the database replaced); the view reloads in full. */
  changesSince(seq: number, limit: number): Promise<AdmissionChangeRows | 'behind'>;
  /** Calls `cb` when the log may have grown (a file watch on SQLite, LISTEN/NOTIFY on PostgreSQL). */
  onWake?(cb: () => void): void;
  close?(): void;
}

type ViewState = 'current' | 'stale' | 'expired';

/** `--stale-admission` unless given: seconds the view keeps admitting while its feed fails. */
export const DEFAULT_STALE_ADMISSION_SEC = 300;

export interface ViewStatus {
  state: ViewState;
  /** Time since the view last heard from its feed (ms). */
  ageMs: number;
  seq: number;
  users: number;
  ips: number;
  reloads: number;
}

interface AdmissionViewOptions {
  /** How long the view keeps admitting while its feed fails (`--stale-admission`, seconds). */
  staleAdmissionSec: number;
  /** Window after a change signal in which further signals fold into one wake-up at its end. */
  wakeDelayMs?: number;
  /** The poll that backs up the wake-ups; also bounds how late a missed wake-up is noticed. */
  pollMs?: number;
  /** Log rows read per feed call. */
  batch?: number;
  nowMs?: () => number;
  log?: { info(obj: object, msg?: string): void; warn(obj: object, msg?: string): void };
}

/** Thrown to the gateway when the view is older than the stale window: it answers 503 / SOCKS failure. */
export class AdmissionUnavailable extends Error {
  override name = 'AdmissionUnavailable';
  constructor() {
    super('admission view is stale: the database has not been reachable for longer than --stale-admission');
  }
}

/**
 * A proxy user in the view, packed into one string (a provider holds a million: an object and a text hash
 * each cost about twice as much): `A` or `D` (active, disabled), the account id in base 36, `:`, then the
 * password hash, its salt and key as raw bytes when it has the standard scrypt parameters (`=` + 48 latin1
 * characters), else as stored (`$` + the text).
 */
type UserEntry = string;

const STANDARD_HASH = /^scrypt\$16384\$8\$1\$([A-Za-z0-9_-]{22})\$([A-Za-z0-9_-]{43})$/;

function userEntry(r: AdmissionUserRow): UserEntry {
  const head = `${r.status === 'active' ? 'A' : 'D'}${r.account_id.toString(36)}:`;
  const m = STANDARD_HASH.exec(r.password_hash);
  if (!m) return `${head}$${r.password_hash}`;
  return `${head}=${Buffer.concat([Buffer.from(m[1]!, 'base64url'), Buffer.from(m[2]!, 'base64url')]).toString('latin1')}`;
}

function unpackUser(e: UserEntry): { accountId: number; hash: string; active: boolean } {
  const colon = e.indexOf(':');
  const accountId = parseInt(e.slice(1, colon), 36);
  const rest = e.slice(colon + 1);
  let hash: string;
  if (rest[0] === '$') hash = rest.slice(1);
  else {
    const raw = Buffer.from(rest.slice(1), 'latin1');
    hash = `scrypt$16384$8$1$${raw.subarray(0, 16).toString('base64url')}$${raw.subarray(16).toString('base64url')}`;
  }
  return { accountId, hash, active: e[0] === 'A' };
}
// accountId * 2 + (entry active ? 1 : 0): no object per IP, the view holds 100,000s of them.
const ipEntry = (r: AdmissionIpRow): number => r.account_id * 2 + (r.status === 1 ? 1 : 0);

const WAKE_DELAY_MS = 20;
/** Rows handled per turn of the event loop while a full load is built. */
const SLICE = 2_000;

async function inSlices<T>(rows: readonly T[], each: (r: T) => void): Promise<void> {
  for (let i = 0; i < rows.length; i++) {
    each(rows[i]!);
    if (i % SLICE === SLICE - 1) await new Promise<void>((r) => setImmediate(r));
  }
}

/** A row's rules compiled once (null: none). */
function ruleSet(r: TargetRulesRow | null): TargetRuleSet | null {
  if (!r) return null;
  const set = new TargetRuleSet(splitItems(r.deny), splitItems(r.allow));
  return set.empty ? null : set;
}

/** Without an error, a view not refreshed for this long is stale all the same (a feed call that hangs). */
const STALL_MS = 5_000;

export class AdmissionView {
  private users = new Map<string, UserEntry>();
  // ip -> ipEntry()
  private ips = new Map<string, number>();
  private accounts = new Map<number, boolean>();
  /** Compiled target rules by account id (SERVICE_RULES_ID: the service's). */
  private rules = new Map<number, TargetRuleSet>();
  private seq = 0;
  private lastSyncAt = 0;
  private failing: string | null = null;
  private reloads = 0;
  private syncing: Promise<void> | null = null;
  private wakeTimer: NodeJS.Timeout | null = null;
  /** A signal arrived inside the current window: wake once more when it closes. */
  private pending = false;
  private again = false;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly nowMs: () => number;
  private readonly staleMs: number;

  constructor(
    private readonly feed: AdmissionFeed,
    private readonly opts: AdmissionViewOptions,
  ) {
    this.nowMs = opts.nowMs ?? Date.now;
    this.staleMs = opts.staleAdmissionSec * 1000;
  }

  /** Loads the snapshot (a failure here fails the start) and starts following the log. */
  async start(): Promise<void> {
    await this.reload();
    this.lastSyncAt = this.nowMs();
    this.feed.onWake?.(() => this.signalled());
    const pollMs = this.opts.pollMs ?? 150;
    if (pollMs > 0) {
      this.timer = setInterval(() => this.wake(), pollMs);
      this.timer.unref();
    }
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    if (this.wakeTimer) clearTimeout(this.wakeTimer);
    this.feed.close?.();
  }

  /**
   * The backend says the log grew. The first signal after a quiet spell wakes the view at once (a single
   * change applies as fast as before); the rest of a burst (a 100-item add: hundreds of signals) folds into
   * one wake-up at the end of the window, so each commit no longer pays for a catch-up on the request path.
   */
  private signalled(): void {
    if (this.closed) return;
    if (this.wakeTimer) {
      this.pending = true;
      return;
    }
    this.wake();
    this.wakeTimer = setTimeout(() => {
      this.wakeTimer = null;
      if (this.pending) {
        this.pending = false;
        this.wake();
      }
    }, this.opts.wakeDelayMs ?? WAKE_DELAY_MS);
    this.wakeTimer.unref();
  }

  /** Catch up with the log now (coalesced: one feed call in flight, one more queued at most). */
  wake(): void {
    if (this.closed) return;
    if (this.syncing) {
      this.again = true;
      return;
    }
    this.syncing = this.catchUp().finally(() => {
      this.syncing = null;
      if (this.again) {
        this.again = false;
        this.wake();
      }
    });
  }

  /** Resolves once every change committed before the call is applied (or the feed failed). */
  async sync(): Promise<void> {
    while (this.syncing) await this.syncing;
    this.wake();
    await this.syncing;
  }

  status(): ViewStatus {
    const ageMs = Math.max(0, this.nowMs() - this.lastSyncAt);
    const state: ViewState = !this.failing && ageMs <= STALL_MS ? 'current' : ageMs <= this.staleMs ? 'stale' : 'expired';
    return { state, ageMs, seq: this.seq, users: this.users.size, ips: this.ips.size, reloads: this.reloads };
  }

  /** The proxy user's row as admission needs it, or null (unknown username). */
  userForAuth(username: string): AdmissionUser | null {
    const packed = this.users.get(username);
    if (packed === undefined) return null;
    const u = unpackUser(packed);
    return { account_id: u.accountId, password_hash: u.hash, status: u.active ? 'active' : 'disabled', account_status: this.accountStatus(u.accountId) };
  }

  /** The owner of the IP's live entry (held claim), or null. */
  admissionByIp(ip: string): { accountId: number; entryActive: boolean; accountActive: boolean } | null {
    const e = this.ips.get(ip);
    if (e === undefined) return null;
    const accountId = Math.floor(e / 2);
    return { accountId, entryActive: (e & 1) === 1, accountActive: this.accounts.get(accountId) === true };
  }

  /** The target rules a connection of this account is checked against (docs/gateway.md, "Target rules"). */
  targetRules(accountId: number): TargetRuleSets {
    return { service: this.rules.get(SERVICE_RULES_ID) ?? null, account: this.rules.get(accountId) ?? null };
  }

  /** Throws AdmissionUnavailable once the feed has failed for longer than the stale window. */
  assertAdmitting(): void {
    if (this.status().state === 'expired') throw new AdmissionUnavailable();
  }

  private accountStatus(id: number): string {
    const a = this.accounts.get(id);
    return a === undefined ? 'unknown' : a ? 'active' : 'inactive';
  }

  private async catchUp(): Promise<void> {
    const batch = this.opts.batch ?? 5_000;
    try {
      for (;;) {
        const ch = await this.feed.changesSince(this.seq, batch);
        if (this.closed) return;
        if (ch === 'behind') {
          this.opts.log?.warn({ event: 'admission_view_behind', seq: this.seq }, 'admission view behind the trimmed change log: reloading in full');
          await this.reload();
          break;
        }
        this.apply(ch);
        if (ch.rows < batch) break;
      }
      this.lastSyncAt = this.nowMs();
      if (this.failing !== null) {
        this.opts.log?.info({ event: 'admission_view_current', seq: this.seq }, 'admission view current again');
        this.failing = null;
      }
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (this.failing === null) {
        this.opts.log?.warn(
          { event: 'admission_view_stale', err: message, staleAdmissionSec: this.opts.staleAdmissionSec },
          'admission feed failing: admitting from the last view until --stale-admission runs out',
        );
      }
      this.failing = message;
    }
  }

  /**
   * A full load, built beside the view in use and swapped in at the end: a slice of rows per turn of the event
   * loop, so the gateway keeps admitting from the old view meanwhile (a million users took about a second of
   * one turn: every connection waited for it).
   */
  private async reload(): Promise<void> {
    const t0 = this.nowMs();
    const snap = await this.feed.snapshot();
    const users = new Map<string, UserEntry>();
    await inSlices(snap.users, (r) => users.set(r.username, userEntry(r)));
    const ips = new Map<string, number>();
    await inSlices(snap.ips, (r) => ips.set(r.ip, ipEntry(r)));
    const accounts = new Map<number, boolean>();
    await inSlices(snap.accounts, (r) => accounts.set(r.id, r.status === 'active'));
    const rules = new Map<number, TargetRuleSet>();
    await inSlices(snap.rules, (r) => {
      const set = ruleSet(r);
      if (set) rules.set(r.account_id, set);
    });
    if (this.closed) return;
    this.users = users;
    this.ips = ips;
    this.accounts = accounts;
    this.rules = rules;
    this.seq = snap.seq;
    this.reloads++;
    if (this.reloads > 1) this.opts.log?.info({ event: 'admission_view_reloaded', users: users.size, ips: ips.size, ms: this.nowMs() - t0 }, 'admission view reloaded in full');
  }

  /** A full reload now (SIGHUP), after any catch-up under way; resolves when the new view is in use. */
  async reloadNow(): Promise<void> {
    while (this.syncing) await this.syncing;
    this.syncing = this.reload()
      .then(() => void (this.lastSyncAt = this.nowMs()))
      .catch((err: unknown) => this.opts.log?.warn({ event: 'admission_view_reload_failed', err: err instanceof Error ? err.message : String(err) }, 'admission view reload failed: keeping the view in use'))
      .finally(() => {
        this.syncing = null;
        // A change signalled during the reload is caught up now, not at the next signal.
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
    await this.syncing;
  }

  private apply(ch: AdmissionChangeRows): void {
    for (const { username, row } of ch.users) {
      if (!row) this.users.delete(username);
      else this.users.set(username, userEntry(row));
    }
    for (const { ip, row } of ch.ips) {
      if (!row) this.ips.delete(ip);
      else this.ips.set(ip, ipEntry(row));
    }
    for (const { id, row } of ch.accounts) {
      if (!row) this.accounts.delete(id);
      else this.accounts.set(id, row.status === 'active');
    }
    for (const { id, row } of ch.rules) {
      const set = ruleSet(row);
      if (set) this.rules.set(id, set);
      else this.rules.delete(id);
    }
    this.seq = ch.seq;
  }
}
