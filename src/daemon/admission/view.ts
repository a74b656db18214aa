// The admission view (docs/operations.md Fleet): what admits, in memory — proxy users with their password hashes, the IPs
// held by a live entry, and each account's status — loaded once and kept current from the change log.
// The gateway's admission reads only this, so a connection never waits for the database.
import { randomFill } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { ByteTable } from './byte-table.js';
import { getIp, getUser, putIp, putUser } from './entries.js';
import { TargetRuleSet, type TargetRuleSets } from '../../gateway/index.js';
import { splitItems } from '../store/target-rules-sql.js';
import {
  SERVICE_RULES_ID,
  type AdmissionChangeRows,
  type AdmissionSnapshotRows,
  type AdmissionUserRow,
  type ProxyUserAuth,
  type SnapshotSource,
  type TargetRulesRow,
} from '../store/index.js';
import type { ReloadWorkerData, ReloadWorkerMessage } from './reload-worker.js';
import { startLowered } from './thread-priority.js';

/** A proxy user as admission needs it; `account_status` is 'active' or why not ('inactive', 'unknown'). */
export type AdmissionUser = Omit<ProxyUserAuth, 'account_status'> & { account_status: string };

/** Where the view comes from: a snapshot, then the changes after a sequence (either backend's change log). */
export interface AdmissionFeed {
  /**
   * `onUsers`, when the feed pages its proxy users: each page as it is read (then `users` comes back empty), so a
   * full load never holds all rows at once.
   */
  snapshot(onUsers?: (rows: readonly AdmissionUserRow[]) => void | Promise<void>): Promise<AdmissionSnapshotRows>;
  /** 'behind': the log was trimmed past `seq` (or the database replaced); the view reloads in full. */
  changesSince(seq: number, limit: number): Promise<AdmissionChangeRows | 'behind'>;
  /** Calls `cb` when the log may have grown (a file watch on SQLite, LISTEN/NOTIFY on PostgreSQL). */
  onWake?(cb: () => void): void;
  /** Where a worker thread opens its own read connection to take the snapshot (absent or null: reloads run on this thread). */
  snapshotSource?(): SnapshotSource | null;
  /** At a swap: the feed follows on from this snapshot (PostgreSQL: the gaps it could not see yet). */
  adoptSnapshot?(snap: Pick<AdmissionSnapshotRows, 'gaps'>): void;
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
  /** Where the last full reload after the first load was built: in the reload worker, or on this thread (its fallback). */
  lastReload: 'worker' | 'thread' | null;
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
  /** Share of one core a full reload on this thread may take while the view serves (RELOAD_SHARE unless given; 1: flat out). */
  reloadShare?: number;
  /**
   * The reload worker's entry (RELOAD_WORKER unless given: reload-worker.js beside this file); null: full reloads
   * run on this thread, paced. Tests, which run from src/, point it at dist/ (or at a missing file).
   */
  reloadWorker?: URL | null;
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

const WAKE_DELAY_MS = 20;
/** Rows handled per turn of the event loop while a full load is built. */
const SLICE = 2_000;
const nextTurn = (): Promise<void> => new Promise<void>((r) => setImmediate(r));
/** Garbage in a table (replaced or deleted entries) above which it is rebuilt (and above this share of its live bytes). */
const COMPACT_MIN_BYTES = 1 << 20;
/** A reload on this thread beside the view in use takes at most this share of a core (a million users: ~4 × its CPU time). */
const RELOAD_SHARE = 0.25;
/** Built beside this file in dist/, where the daemon runs from. */
const RELOAD_WORKER = new URL('./reload-worker.js', import.meta.url);

/**
 * Keeps a reload to a share of one core: after each slice of work it waits in proportion to the time the slice
 * took. A full reload of a million users is seconds of CPU; run flat out on a small machine it takes that
 * CPU from the gateway's own connections (and anything else there), which then queue (docs/decisions.md#d-037). The
 * first load runs at full speed (share 1): nothing is admitted until it is done.
 */
class Pacer {
  private from = performance.now();
  private owed = 0;
  constructor(private readonly share: number) {}

  async turn(): Promise<void> {
    const now = performance.now();
    if (this.share < 1) this.owed += ((now - this.from) * (1 - this.share)) / this.share;
    if (this.owed >= 1) {
      await new Promise<void>((r) => setTimeout(r, this.owed));
      this.owed = Math.max(0, this.owed - (performance.now() - now));
    } else await nextTurn();
    this.from = performance.now();
  }
}

async function inSlices<T>(rows: ArrayLike<T>, each: (r: T, i: number) => void, pacer: Pacer): Promise<void> {
  for (let i = 0; i < rows.length; i++) {
    each(rows[i]!, i);
    if (i % SLICE === SLICE - 1) await pacer.turn();
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

/**
 * A rebuilt table's size: as many entries as the one it replaces and its live bytes with a little room, so a full
 * build never rehashes a million entries midway.
 */
function sizedLike(t: ByteTable): { expected: number; bytes: number } {
  return { expected: t.size, bytes: t.liveBytes * 1.05 };
}

/** A full load, ready to be swapped in. */
interface Built {
  seq: number;
  gaps: AdmissionSnapshotRows['gaps'];
  users: ByteTable;
  ips: ByteTable;
  accounts: Map<number, boolean>;
  rules: Map<number, TargetRuleSet>;
}

/** The target rules rows compiled, a slice per turn. */
async function compileRules(rows: readonly TargetRulesRow[], pacer: Pacer): Promise<Map<number, TargetRuleSet>> {
  const rules = new Map<number, TargetRuleSet>();
  await inSlices(
    rows,
    (r) => {
      const set = ruleSet(r);
      if (set) rules.set(r.account_id, set);
    },
    pacer,
  );
  return rules;
}

export class AdmissionView {
  private users = new ByteTable();
  private ips = new ByteTable();
  private accounts = new Map<number, boolean>();
  /** Compiled target rules by account id (SERVICE_RULES_ID: the service's). */
  private rules = new Map<number, TargetRuleSet>();
  private seq = 0;
  private lastSyncAt = 0;
  private failing: string | null = null;
  private reloads = 0;
  private lastReload: ViewStatus['lastReload'] = null;
  /** Reload workers building (close() ends them): one, but for a SIGHUP's beside a catch-up's that found the view behind. */
  private readonly workers = new Set<Worker>();
  private syncing: Promise<void> | null = null;
  /** A SIGHUP reload under way: catch-ups go on beside it (on the tables in use). */
  private reloading: Promise<void> | null = null;
  /** Counts swaps of the tables: a catch-up or compaction that began before one discards its work. */
  private generation = 0;
  private wakeTimer: NodeJS.Timeout | null = null;
  /** A signal arrived inside the current window: wake once more when it closes. */
  private pending = false;
  private again = false;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly nowMs: () => number;
  private readonly staleMs: number;
  /** Told of the proxy users a catch-up found disabled or deleted (their open connections are closed). */
  onUsersRevoked: ((usernames: ReadonlySet<string>) => void) | null = null;

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
    await this.warmReloadWorker();
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
    for (const w of this.workers) void w.terminate();
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
    const state: ViewState =
      !this.failing && ageMs <= STALL_MS ? 'current' : ageMs <= this.staleMs ? 'stale' : 'expired';
    return {
      state,
      ageMs,
      seq: this.seq,
      users: this.users.size,
      ips: this.ips.size,
      reloads: this.reloads,
      lastReload: this.lastReload,
    };
  }

  /** The proxy user's row as admission needs it, or null (unknown username). */
  userForAuth(username: string): AdmissionUser | null {
    const u = getUser(this.users, username);
    if (!u) return null;
    return {
      account_id: u.accountId,
      password_hash: u.hash,
      status: u.active ? 'active' : 'disabled',
      account_status: this.accountStatus(u.accountId),
    };
  }

  /** The owner of the IP's live entry (held claim), or null. */
  admissionByIp(ip: string): { accountId: number; entryActive: boolean; accountActive: boolean } | null {
    const e = getIp(this.ips, ip);
    return (
      e && { accountId: e.accountId, entryActive: e.active, accountActive: this.accounts.get(e.accountId) === true }
    );
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
        const gen = this.generation;
        const ch = await this.feed.changesSince(this.seq, batch);
        if (this.closed) return;
        // A reload swapped its tables in meanwhile: these changes were read for the old ones; the next catch-up
        // reads on from the reload's own sequence.
        if (gen !== this.generation) break;
        if (ch === 'behind') {
          this.opts.log?.warn(
            { event: 'admission_view_behind', seq: this.seq },
            'admission view behind the trimmed change log: reloading in full',
          );
          if (this.reloading) await this.reloading;
          else await this.reload();
          break;
        }
        this.apply(ch);
        if (ch.rows < batch) break;
      }
      await this.compact();
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
   * A full load, built beside the view in use and swapped in at the end. The first is built on this thread at full
   * speed (nothing is admitted until it is done); every later one (SIGHUP, or the view fell behind the trimmed log)
   * in the reload worker when the feed can be read from another thread, and on this thread, paced, when it cannot
   * or the worker fails: a reload is never lost, only slower on the gateway's thread.
   */
  private async reload(): Promise<void> {
    if (this.closed) return;
    const t0 = this.nowMs();
    const source = this.reloads > 0 && this.opts.reloadWorker !== null ? (this.feed.snapshotSource?.() ?? null) : null;
    if (source) {
      let built: { built: Built; nice: number | null } | null = null;
      try {
        built = await this.buildInWorker(source);
      } catch (err) {
        if (this.closed) return;
        this.opts.log?.warn(
          { event: 'admission_view_reload_worker_failed', err: err instanceof Error ? err.message : String(err) },
          'admission view reload worker failed: reloading on the main thread, paced',
        );
      }
      if (built) return this.swap(built.built, t0, 'worker', { nice: built.nice });
      // Closed meanwhile (the worker's answer was dropped): no fallback snapshot against a store about to close.
      if (this.closed) return;
    }
    const built = await this.buildHere();
    if (built) this.swap(built, t0, 'thread');
  }

  /**
   * The load on this thread, a slice of rows per turn of the event loop, so the gateway keeps admitting from the
   * old view meanwhile (a million users took about a second of one turn: every connection waited for it). Null:
   * the view was closed meanwhile.
   */
  private async buildHere(): Promise<Built | null> {
    // Built beside the tables in use, sized for as many entries as they hold (no rehash of a million mid-build);
    // a feed that pages its users hands each page over as it reads it, so no array of a million rows is built.
    const usersSize = sizedLike(this.users);
    const users = new ByteTable(usersSize.expected, usersSize.bytes);
    // The first load at full speed; a reload beside a serving view at a share of a core (Pacer).
    const pacer = new Pacer(this.reloads === 0 ? 1 : (this.opts.reloadShare ?? RELOAD_SHARE));
    const snap = await this.feed.snapshot((rows) => {
      for (const r of rows) putUser(users, r);
      // A page is word from the feed: a reload of a million users (paced: tens of seconds) after the view fell
      // behind the trimmed log does not make it look stale to /healthz and --stale-admission.
      this.lastSyncAt = this.nowMs();
      return pacer.turn();
    });
    await inSlices(snap.users, (r) => putUser(users, r), pacer);
    const ipsSize = sizedLike(this.ips);
    const ips = new ByteTable(ipsSize.expected, ipsSize.bytes);
    await inSlices(snap.ips, (r) => putIp(ips, r), pacer);
    const accounts = new Map<number, boolean>();
    await inSlices(snap.accounts, (r) => accounts.set(r.id, r.status === 'active'), pacer);
    const rules = await compileRules(snap.rules, pacer);
    return this.closed ? null : { seq: snap.seq, gaps: snap.gaps, users, ips, accounts, rules };
  }

  /**
   * Starts the reload worker once before the gateway serves, and lets it end: the first worker thread a process
   * starts costs its gateway thread more than later ones (a reload's first second showed p99 up to 8 ms where
   * later reloads' showed 3–5), and at start-up nothing waits for it. Any failure is left to the first reload.
   */
  private async warmReloadWorker(): Promise<void> {
    if (this.opts.reloadWorker === null || !this.feed.snapshotSource?.()) return;
    // libuv's thread pool started from this thread first: a new thread takes its creator's nice value, and a pool
    // first started by a worker at nice 19 would keep the gateway's lookups, file I/O and password checks there.
    await new Promise<void>((resolve) => randomFill(Buffer.alloc(1), () => resolve()));
    await new Promise<void>((resolve) => {
      let w: Worker;
      try {
        w = this.startWorker({ warmUp: true });
      } catch {
        return resolve();
      }
      const done = (): void => {
        clearTimeout(timer);
        void w.terminate();
        resolve();
      };
      const timer = setTimeout(done, 5_000);
      w.once('message', done);
      w.once('error', done);
      w.once('exit', done);
    });
  }

  /**
   * The reload worker's thread, started at nice 19 (thread-priority.ts) and unreferenced: a reload never keeps the
   * process alive; close() or the end of the process ends it.
   */
  private startWorker(workerData: ReloadWorkerData | { warmUp: true }): Worker {
    const w = startLowered(() => new Worker(this.opts.reloadWorker ?? RELOAD_WORKER, { workerData }));
    w.unref();
    return w;
  }

  /**
   * The load in the reload worker (reload-worker.ts): its own read connection, the same snapshot, the users and IPs
   * tables built there and handed over as their (shared) buffers. Accounts and target rules are few; they are
   * built here, paced like a reload on this thread. Null: the view was closed meanwhile. Throws when the worker
   * cannot start, fails, or ends without its tables.
   */
  private async buildInWorker(source: SnapshotSource): Promise<{ built: Built; nice: number | null } | null> {
    const data: ReloadWorkerData = {
      source,
      users: sizedLike(this.users),
      ips: sizedLike(this.ips),
    };
    let w: Worker | null = null;
    const msg = await new Promise<Extract<ReloadWorkerMessage, { type: 'built' }>>((resolve, reject) => {
      w = this.startWorker(data);
      this.workers.add(w);
      w.on('message', (m: ReloadWorkerMessage) => {
        if (m.type === 'progress') this.lastSyncAt = this.nowMs();
        else if (m.type === 'failed') reject(new Error(m.error));
        else resolve(m);
      });
      w.on('error', reject);
      w.on('exit', (code) => reject(new Error(`reload worker exited (code ${code}) without its tables`)));
    }).finally(() => {
      // It closed its connection before posting; whatever is left of it is not needed.
      if (!w) return;
      void w.terminate();
      this.workers.delete(w);
    });
    if (this.closed) return null;
    const users = ByteTable.fromState(msg.users);
    const ips = ByteTable.fromState(msg.ips);
    const pacer = new Pacer(this.opts.reloadShare ?? RELOAD_SHARE);
    const accounts = new Map<number, boolean>();
    await inSlices(msg.accountIds, (id, i) => accounts.set(id, msg.accountActive[i] === 1), pacer);
    const rules = await compileRules(msg.rules, pacer);
    return this.closed
      ? null
      : { built: { seq: msg.seq, gaps: msg.gaps, users, ips, accounts, rules }, nice: msg.nice };
  }

  /** The new tables in use; the view follows the log on from the snapshot's position (and its gaps). */
  private swap(b: Built, t0: number, via: 'worker' | 'thread', extra: object = {}): void {
    this.users = b.users;
    this.ips = b.ips;
    this.accounts = b.accounts;
    this.rules = b.rules;
    this.seq = b.seq;
    this.feed.adoptSnapshot?.(b);
    this.generation++;
    this.reloads++;
    if (this.reloads > 1) {
      this.lastReload = via;
      this.opts.log?.info(
        {
          event: 'admission_view_reloaded',
          users: b.users.size,
          ips: b.ips.size,
          ms: this.nowMs() - t0,
          via,
          ...extra,
        },
        'admission view reloaded in full',
      );
    }
  }

  /**
   * Changed and deleted entries leave their old bytes in a table; once those outweigh the live ones (and 1 MiB) the
   * table is copied without them, a slice per turn like a reload, and swapped in. Runs inside a catch-up, so
   * nothing else changes the table while it is copied (a reload's swap meanwhile discards the copy).
   */
  private async compact(): Promise<void> {
    for (const which of ['users', 'ips'] as const) {
      const t = this[which];
      if (t.garbageBytes < COMPACT_MIN_BYTES || t.garbageBytes < t.liveBytes) continue;
      const gen = this.generation;
      const pacer = new Pacer(this.opts.reloadShare ?? RELOAD_SHARE);
      const copy = await t.copyInSlices(SLICE, () => pacer.turn());
      if (this.closed || gen !== this.generation) return;
      this[which] = copy;
    }
  }

  /**
   * A full reload now (SIGHUP); resolves when the new view is in use (a reload already under way is joined).
   * Catch-ups go on meanwhile, on the tables in use: a reload paced to a share of a core takes seconds at a
   * million users, and a change must not wait for it (nor the view look stale). At the swap the view's
   * position becomes the snapshot's, and a catch-up from there follows at once.
   */
  async reloadNow(): Promise<void> {
    if (this.closed) return;
    if (this.reloading) return this.reloading;
    this.reloading = this.reload()
      .catch((err: unknown) =>
        this.opts.log?.warn(
          { event: 'admission_view_reload_failed', err: err instanceof Error ? err.message : String(err) },
          'admission view reload failed: keeping the view in use',
        ),
      )
      .finally(() => {
        this.reloading = null;
        this.wake();
      });
    await this.reloading;
  }

  private apply(ch: AdmissionChangeRows): void {
    let revoked: Set<string> | null = null;
    for (const { username, row } of ch.users) {
      if (!row) this.users.delete(username);
      else putUser(this.users, row);
      if (!row || row.status !== 'active') (revoked ??= new Set()).add(username);
    }
    for (const { ip, row } of ch.ips) {
      if (!row) this.ips.delete(ip);
      else putIp(this.ips, row);
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
    if (revoked && this.onUsersRevoked) {
      try {
        this.onUsersRevoked(revoked);
      } catch (err) {
        this.opts.log?.warn(
          { event: 'revoke_failed', err: err instanceof Error ? err.message : String(err) },
          'closing connections of revoked proxy users failed',
        );
      }
    }
  }
}
