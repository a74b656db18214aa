// Plans and limits on this node (docs/decisions.md#d-028, "Plans and limits"), enforced fleet-wide with two kinds of lease from the store.
//
// The plan tables: read when their version moves (a counter the database bumps on every change), so a table
// of 100,000 limited users is read once per change, not twice a second. Expiry is decided from memory.
//
// Bytes and usage: a connection under a traffic limit relays under a byte budget (gateway/byte-budget.ts) of
// its account and, when the user has a limit, of its user. The node grants a budget at most `grantBytes`
// (default 3 MiB), never more than the limit leaves, and only after a sync: this node's bytes of that account
// flushed, then the fleet's usage of it read back. A budget asks for the next sync when half its grant is
// used and, when it runs out, parks its readers until the sync answers. So no node relays more than one grant
// past what the fleet has confirmed: past a limit, at most one grant per node (the 4 MiB bound, with room for
// the forward path's one read per exchange). Every active budget is synced at least every 500 ms, so an
// account that goes over anywhere is refused (403) and its open connections here closed within a second. An
// admission of a limited key this node has no budget for waits for one sync first, so it is refused here too
// when over. With the store away no new grant comes: limited traffic pauses, unlimited traffic goes on, and
// the limit holds.
//
// Connections: each capped key (an account's `max_connections`, a user's) has slots leased from the store
// (`leaseSlots`: atomically, what the cap leaves after the other nodes' leases). A node admits within what it
// holds without asking anyone; past it, it asks for more (one call per key at a time, for every connection
// waiting), and every 500 ms gives back what it does not use. Fleet-wide the open connections never exceed
// the cap; a slot freed on one node is free for the others within 0.5 s; a node that dies holds its slots
// until its lease expires (10 s).
import type { PlanLimits } from '../../gateway/types.js';
import { usageKey, userSubject } from '../../rules/usage-key.js';
import {
  ByteBudget,
  RateBucket,
  TargetRuleSet,
  type ByteBudget as Budget,
  type RateBudget,
} from '../../gateway/index.js';
import type { Plan, PlanPeriod, Store, UserLimits } from '../store/index.js';
import { bucketStart } from '../store/usage-sql.js';

/** Where the plan's current period started (UTC): today, the last anchor day of the month, or never. */
export function periodStart(period: PlanPeriod, anchorDay: number, nowMs: number): number {
  if (period === 'lifetime') return 0;
  if (period === 'day') return bucketStart('day', nowMs);
  const d = new Date(nowMs);
  const start = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), anchorDay);
  return start <= nowMs ? start : Date.UTC(d.getUTCFullYear(), d.getUTCMonth() - 1, anchorDay);
}

/** The period of an account without a plan: the calendar month, UTC (its users' limits count in it too). */
export const NO_PLAN_PERIOD: Readonly<Pick<Plan, 'period' | 'anchorDay'>> = { period: 'month', anchorDay: 1 };

/** Where the account's current period started: its plan's, or without a plan the calendar month's. */
export function accountPeriodStart(plan: Pick<Plan, 'period' | 'anchorDay'> | null | undefined, nowMs: number): number {
  const p = plan ?? NO_PLAN_PERIOD;
  return periodStart(p.period, p.anchorDay, nowMs);
}

/**
 * Where the account's current period starts as people are shown it (the usage API's default range, the console,
 * `proxyd admin plan show`): as `accountPeriodStart`, but a lifetime plan's period starts on the day of the
 * account's first usage kept, else the day it was created, not at the epoch (which the enforcer may sum from:
 * there is no usage before either, so the totals agree).
 */
export async function shownPeriodStart(
  store: Store,
  accountId: number,
  plan: Pick<Plan, 'period' | 'anchorDay'> | null | undefined,
  nowMs: number,
): Promise<number> {
  if (plan?.period !== 'lifetime') return accountPeriodStart(plan, nowMs);
  const first = await store.usage.firstUsage(accountId);
  if (first !== null) return bucketStart('day', first);
  const account = await store.accounts.get(accountId);
  return account ? bucketStart('day', account.created_at * 1000) : bucketStart('day', nowMs);
}

export type PlanState = 'ok' | 'over_traffic' | 'expired';

/** A plan's state, given what its current period has used. */
export function planState(plan: Plan, used: number, nowMs: number): PlanState {
  if (plan.expiresAt !== null && nowMs >= plan.expiresAt) return 'expired';
  return plan.trafficLimit !== null && used >= plan.trafficLimit ? 'over_traffic' : 'ok';
}

/** What one account's plan period has used so far, every node's flushed usage (the admin's view of one plan). */
export async function periodUsed(store: Store, plan: Plan, nowMs: number): Promise<{ start: number; used: number }> {
  const start = periodStart(plan.period, plan.anchorDay, nowMs);
  const rows = await store.usage.dailyTotals([plan.accountId], bucketStart('day', start));
  return { start, used: rows.reduce((n, r) => n + r.bytes, 0) };
}

/** Connection slots this node holds for one capped key. */
interface SlotLease {
  readonly dbKey: string;
  /** What it caps: an account's connections, or (subject set) one user's. */
  readonly accountId: number;
  readonly subject: string | undefined;
  max: number;
  held: number;
  /** Admissions waiting for the next answer. */
  waiting: number;
  growing: Promise<void> | null;
}

interface BudgetEntry {
  budget: Budget;
  accountId: number;
  /** null: the account's budget; else the proxy user's (`user:NAME`). */
  subject: string | null;
  /** A sync has read its usage since it was made (until then its state is unknown: admission waits for one). */
  synced: boolean;
  /** Its limit is used up (as of the last sync): refused, and it asks no more syncs until the next refresh. */
  over: boolean;
  bornAt: number;
}

export const DEFAULT_GRANT_BYTES = 3 * 2 ** 20;
const LEASE_TTL_MS = 10_000;
/** Syncs asked for by budgets run at most this often while the store fails. */
const RETRY_MS = 200;
/** A budget with no open connection on this node is dropped after this long (its state is read again when needed). */
const BUDGET_IDLE_MS = 5_000;

/** Why a plan (or a proxy user's own limits) refuses an account's connections: what closes its open ones too. */
export type PlanRefusal = 'traffic_limit' | 'plan_expired';

export interface PlanEnforcerOptions {
  intervalMs?: number;
  nowMs?: () => number;
  /** Bytes a node may relay for a limited key past what the fleet confirmed (the overshoot bound per node). */
  grantBytes?: number;
  /** This node's name in slot leases (unique per process). */
  node?: string;
  /** Writes this node's usage of these accounts now (the meter's flushAccounts); false: not written. */
  flushAccounts?: (accounts: ReadonlySet<number>) => Promise<boolean>;
  /** Connections open on this node (the gateway's openConnections). */
  openConnections?: (accountId: number, subject?: string) => number;
  /** Closes open connections that match, with the refusal that closes them (the gateway's closeWhere). */
  close?: (match: (accountId: number, subject: string) => PlanRefusal | null) => number;
  /** Puts open connections under the budget this gives (the gateway's rebudget), when the plan tables change. */
  rebudget?: (budgetFor: (accountId: number, subject: string) => Budget | null) => void;
  /** Puts open connections under the rate this gives (the gateway's rerate), when the plan tables change. */
  rerate?: (rateFor: (accountId: number, subject: string) => RateBudget | null) => void;
  log?: { warn(obj: object, msg?: string): void };
}

export class PlanEnforcer implements PlanLimits {
  /** The plan tables as last read (again only when their version moves). */
  private plans = new Map<number, Plan>();
  private limits = new Map<string, UserLimits>();
  /** Users' own target rules, compiled when first asked for (cleared when the plan tables are read again). */
  private ruleSets = new Map<string, TargetRuleSet>();
  /** Accounts with a traffic limit, their own or one of their users'. */
  private limited = new Set<number>();
  /** Accounts one of whose users has limits of its own: for any other, no user key is built or looked up per admission. */
  private usersLimited = new Set<number>();
  private version = -1;
  /** Byte budgets of limited keys active on this node (`a:ID`, or the user's usage key). */
  private readonly budgets = new Map<string, BudgetEntry>();
  /** Rate budgets of rate-limited keys active on this node (`a:ID`, or the user's usage key): one per key, shared. */
  private readonly rates = new Map<string, { rate: RateBudget; accountId: number; subject: string | null }>();
  private readonly leases = new Map<string, SlotLease>();
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private syncing: Promise<void> | null = null;
  private syncAgain = false;
  private syncGen = 0;
  private syncWaiters: Array<{ gen: number; resolve: () => void }> = [];
  private lastSyncFailure = 0;
  private lastWarn = 0;
  private readonly now: () => number;
  private readonly grant: number;
  readonly node: string;

  constructor(
    private readonly store: Store,
    private readonly opts: PlanEnforcerOptions = {},
  ) {
    this.now = opts.nowMs ?? Date.now;
    this.grant = opts.grantBytes ?? DEFAULT_GRANT_BYTES;
    this.node = opts.node ?? `${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
  }

  start(): Promise<void> {
    this.timer = setInterval(() => void this.refresh(), this.opts.intervalMs ?? 500);
    this.timer.unref();
    return this.refresh();
  }

  /** Stops the timer and gives this node's connection slots back. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    const back = [...this.leases.values()].filter((l) => l.held > 0).map((l) => ({ key: l.dbKey, slots: 0 }));
    this.leases.clear();
    if (back.length > 0) await this.store.plans.renewSlots(this.node, back, LEASE_TTL_MS, this.now()).catch(() => {});
  }

  /** Whether the account or one of its users has a traffic limit (its usage is flushed every second: metering/meter.ts). */
  limitsTraffic(accountId: number): boolean {
    return this.limited.has(accountId);
  }

  refusal(accountId: number, subject: string): PlanRefusal | null {
    const expiresAt = this.plans.get(accountId)?.expiresAt ?? null;
    if (expiresAt !== null && this.now() >= expiresAt) return 'plan_expired';
    // A proxy user's own expiry behaves as its plan's (docs/api.md, "Proxy users").
    const userExpires = this.userLimits(accountId, subject)?.expiresAt ?? null;
    if (userExpires !== null && this.now() >= userExpires) return 'plan_expired';
    if (this.budgets.size === 0) return null; // no limited key active here: nothing can be over
    if (this.budgets.get(`a:${accountId}`)?.over) return 'traffic_limit';
    return this.budgets.get(usageKey(accountId, subject))?.over ? 'traffic_limit' : null;
  }

  /**
   * Under a traffic limit that this node has not read lately (no connection of it here): the usage is read
   * first (one sync), so an account or user over its limit gets its 403 here too. Null: nothing to wait for.
   */
  pending(accountId: number, subject: string): Promise<void> | null {
    if (this.budgetFor(accountId, subject) === null) return null;
    const a = this.budgets.get(`a:${accountId}`);
    const u = this.budgets.get(usageKey(accountId, subject));
    if ((a === undefined || a.synced) && (u === undefined || u.synced)) return null;
    return new Promise((resolve) => {
      this.syncWaiters.push({ gen: this.syncGen, resolve });
      this.requestSync();
    });
  }

  // ---- connection slots -------------------------------------------------------------------------------

  /** The capped keys of an admission, and which of the node's open counts each is about. */
  private capped(accountId: number, subject: string): Array<[SlotLease, 'account' | 'user']> {
    const out: Array<[SlotLease, 'account' | 'user']> = [];
    const a = this.plans.get(accountId)?.maxConnections ?? null;
    if (a !== null) out.push([this.lease(`a:${accountId}`, a, accountId, undefined), 'account']);
    const u = this.userLimits(accountId, subject)?.maxConnections ?? null;
    if (u !== null) out.push([this.lease(`u:${accountId}:${subject}`, u, accountId, subject), 'user']);
    return out;
  }

  private lease(dbKey: string, max: number, accountId: number, subject: string | undefined): SlotLease {
    let l = this.leases.get(dbKey);
    if (!l) this.leases.set(dbKey, (l = { dbKey, accountId, subject, max, held: 0, waiting: 0, growing: null }));
    l.max = max;
    return l;
  }

  slotFree(accountId: number, subject: string, open: { account: number; user: number }): boolean | null {
    let ask = false;
    for (const [l, of] of this.capped(accountId, subject)) {
      const n = open[of];
      if (n >= l.max) return false;
      if (n >= l.held) ask = true;
    }
    return ask ? null : true;
  }

  async moreSlots(accountId: number, subject: string, open: () => { account: number; user: number }): Promise<void> {
    for (const [l, of] of this.capped(accountId, subject)) {
      if (open()[of] < l.held) continue;
      l.waiting++;
      try {
        await this.grow(l, open()[of]);
      } finally {
        l.waiting--;
      }
    }
  }

  private grow(l: SlotLease, open: number): Promise<void> {
    return (l.growing ??= this.store.plans
      .leaseSlots(this.node, l.dbKey, Math.max(l.held, open + l.waiting), l.max, LEASE_TTL_MS, this.now())
      .then((held) => {
        l.held = held;
      })
      .catch((e: unknown) => this.warn('slot_lease_failed', e)) // the store away: no more than this node holds
      .finally(() => {
        l.growing = null;
      }));
  }

  /** Gives back what this node holds and does not use; renews the rest. */
  private async renewLeases(): Promise<void> {
    const open = this.opts.openConnections;
    if (!open || this.leases.size === 0) return;
    const renew: Array<{ key: string; slots: number }> = [];
    for (const [k, l] of this.leases) {
      if (l.growing) continue;
      const keep = Math.min(l.held, open(l.accountId, l.subject));
      if (keep === 0 && l.held === 0 && l.waiting === 0) {
        this.leases.delete(k);
        continue;
      }
      l.held = keep;
      renew.push({ key: l.dbKey, slots: keep });
    }
    await this.store.plans.renewSlots(this.node, renew, LEASE_TTL_MS, this.now());
  }

  // ---- rate budgets ------------------------------------------------------------------------------------

  /**
   * The rate budget a subject's connections share on this node: the user's (its buckets draw on the account's
   * too, so both limits hold), else the account's; null: neither has a rate limit.
   */
  rateFor(accountId: number, subject: string): RateBudget | null {
    const accountBits = this.plans.get(accountId)?.rateLimit ?? null;
    const account = accountBits === null ? null : this.ratePair(`a:${accountId}`, accountId, null, accountBits, null);
    const userBits = this.userLimits(accountId, subject)?.rateLimit ?? null;
    return userBits === null
      ? account
      : this.ratePair(usageKey(accountId, subject), accountId, subject, userBits, account);
  }

  private ratePair(
    key: string,
    accountId: number,
    subject: string | null,
    bits: number,
    parent: RateBudget | null,
  ): RateBudget {
    const bytes = bits / 8;
    const found = this.rates.get(key);
    if (!found) {
      const rate = { up: new RateBucket(bytes, parent?.up ?? null), down: new RateBucket(bytes, parent?.down ?? null) };
      this.rates.set(key, { rate, accountId, subject });
      return rate;
    }
    const { rate } = found;
    // A changed limit applies to the open connections under it at once.
    if (rate.up.rate !== bytes) {
      rate.up.setRate(bytes);
      rate.down.setRate(bytes);
    }
    rate.up.parent = parent?.up ?? null;
    rate.down.parent = parent?.down ?? null;
    return rate;
  }

  /** After the plan tables changed: open connections under the rates they say now; a lifted rate frees its readers. */
  private rerate(): void {
    this.opts.rerate?.((accountId, subject) => this.rateFor(accountId, subject));
    for (const [k, e] of this.rates) {
      const bits = e.subject === null ? this.plans.get(e.accountId)?.rateLimit : this.limits.get(k)?.rateLimit;
      if (bits != null) continue;
      this.rates.delete(k);
      e.rate.up.setRate(Infinity);
      e.rate.down.setRate(Infinity);
    }
  }

  // ---- byte budgets ------------------------------------------------------------------------------------

  budgetFor(accountId: number, subject: string): Budget | null {
    const account =
      this.plans.get(accountId)?.trafficLimit != null ? this.budget(`a:${accountId}`, accountId, null, null) : null;
    if (this.userLimits(accountId, subject)?.trafficLimit == null) return account;
    return this.budget(usageKey(accountId, subject), accountId, subject, account);
  }

  /** A proxy user's own target rules (`subject` `user:NAME`), compiled once per read of the plan tables; null: none. */
  userRules(accountId: number, subject: string): TargetRuleSet | null {
    const l = this.userLimits(accountId, subject);
    if (!l || (!l.allow?.length && !l.deny?.length)) return null;
    const key = usageKey(accountId, subject);
    let set = this.ruleSets.get(key);
    if (set === undefined) this.ruleSets.set(key, (set = new TargetRuleSet(l.deny ?? [], l.allow ?? [])));
    return set.empty ? null : set;
  }

  /** The user's own limits (a subject `user:NAME`), if it has any. */
  private userLimits(accountId: number, subject: string): UserLimits | undefined {
    return this.usersLimited.has(accountId) ? this.limits.get(usageKey(accountId, subject)) : undefined;
  }

  private budget(key: string, accountId: number, subject: string | null, parent: Budget | null): Budget {
    const found = this.budgets.get(key);
    if (found) return found.budget;
    // Starts empty: its first grant comes from a sync (this node's bytes of it flushed, the fleet's read).
    const e: BudgetEntry = {
      budget: new ByteBudget(
        parent,
        () => {
          if (!e.over) this.requestSync();
        },
        this.grant / 2,
      ),
      accountId,
      subject,
      synced: false,
      over: false,
      bornAt: this.now(),
    };
    this.budgets.set(key, e);
    return e.budget;
  }

  /** A budget ran low or out, or an admission waits: sync now (one at a time; one more after the one under way). */
  private requestSync(): void {
    if (this.syncing) {
      this.syncAgain = true;
      return;
    }
    // Never in the same turn: the connection path that asked goes on, and the loop serves I/O between syncs.
    const wait = this.lastSyncFailure + RETRY_MS - Date.now();
    let gen = 0;
    this.syncing = new Promise((r) => (wait > 0 ? setTimeout(r, wait) : setImmediate(r)))
      .then(() => {
        gen = ++this.syncGen;
        return this.syncBudgets();
      })
      .catch((e: unknown) => {
        this.lastSyncFailure = Date.now();
        this.warn('budget_sync_failed', e);
      })
      .finally(() => {
        this.syncing = null;
        // Admissions that asked before this sync began have their answer (or the store's failure: they go on,
        // and their bytes wait for a grant).
        const done = this.syncWaiters.filter((w) => w.gen < gen);
        this.syncWaiters = this.syncWaiters.filter((w) => w.gen >= gen);
        for (const w of done) w.resolve();
        const again = this.syncAgain;
        this.syncAgain = false;
        if (
          this.syncWaiters.length > 0 ||
          (again && [...this.budgets.values()].some((b) => !b.over && b.budget.parked > 0))
        )
          this.requestSync();
      });
  }

  /**
   * Grants every budget again: this node's bytes of their accounts flushed first, then the fleet's usage of
   * each read back; a grant is what the limit leaves (at most `grantBytes`), less what passed since the flush.
   */
  private async syncBudgets(): Promise<void> {
    if (this.budgets.size === 0) return;
    const taken = new Map<string, number>();
    for (const [k, b] of this.budgets) taken.set(k, b.budget.taken);
    const accountIds = new Set([...this.budgets.values()].map((b) => b.accountId));
    if (this.opts.flushAccounts && !(await this.opts.flushAccounts(accountIds)))
      throw new Error('usage flush not written');
    const now = this.now();
    const starts = new Map<number, number>();
    for (const id of accountIds) {
      // A user's limit counts in its account's period.
      starts.set(id, bucketStart('day', accountPeriodStart(this.plans.get(id), now)));
    }
    const rows = await this.store.usage.dailyTotals([...accountIds], Math.min(...starts.values()));
    const used = new Map<string, number>();
    for (const r of rows) {
      if (r.startMs < starts.get(r.accountId)!) continue;
      used.set(`a:${r.accountId}`, (used.get(`a:${r.accountId}`) ?? 0) + r.bytes);
      const k = usageKey(r.accountId, r.subject);
      used.set(k, (used.get(k) ?? 0) + r.bytes);
    }
    let reached = false;
    for (const [k, b] of this.budgets) {
      if (!taken.has(k)) continue; // made during this sync: the next one reads it
      const limit =
        b.subject === null
          ? (this.plans.get(b.accountId)?.trafficLimit ?? null)
          : (this.limits.get(k)?.trafficLimit ?? null);
      if (limit === null) {
        // No longer limited: its connections go on unbudgeted; new ones get none.
        b.budget.refill(Infinity);
        this.budgets.delete(k);
        continue;
      }
      const u = used.get(k) ?? 0;
      if (u >= limit && !b.over) reached = true;
      b.over = u >= limit;
      b.synced = true;
      b.budget.refill(Math.max(0, Math.min(this.grant, limit - u)) - (b.budget.taken - taken.get(k)!));
    }
    // Someone reached a limit: their open connections close now, not at the next refresh.
    if (reached) this.closeRefused();
  }

  private closeRefused(): void {
    this.opts.close?.((accountId, subject) => this.refusal(accountId, subject));
  }

  // ---- the plans, every 500 ms -------------------------------------------------------------------------

  refresh(): Promise<void> {
    return (this.running ??= this.load()
      .then(() => this.renewLeases())
      .catch((e: unknown) => this.warn('plans_refresh_failed', e)) // the database away: keep enforcing the last view
      .finally(() => {
        this.running = null;
        // Every active budget is read again (a raised limit, a new period, the others' usage): parked ones get
        // their grant, and whoever went over elsewhere is closed here.
        if (this.budgets.size > 0) this.requestSync();
      }));
  }

  private warn(event: string, e: unknown): void {
    const now = Date.now();
    if (now - this.lastWarn < 10_000) return;
    this.lastWarn = now;
    this.opts.log?.warn({ event, detail: e instanceof Error ? e.message : String(e) }, 'plans: keeping the last view');
  }

  /** The plan tables when they changed; expired plans closed; budgets no connection here uses dropped. */
  private async load(): Promise<void> {
    const version = await this.store.plans.version();
    if (version !== this.version) {
      const { plans, users } = await this.store.plans.all();
      this.plans = new Map(plans.map((p) => [p.accountId, p]));
      this.limits = new Map(users.map((u) => [usageKey(u.accountId, userSubject(u.username)), u]));
      this.ruleSets = new Map();
      this.limited = new Set([
        ...plans.filter((p) => p.trafficLimit !== null).map((p) => p.accountId),
        ...users.filter((u) => u.trafficLimit !== null).map((u) => u.accountId),
      ]);
      this.usersLimited = new Set(users.map((u) => u.accountId));
      this.version = version;
      // Connections already open when a limit is set (or raised, lifted) relay under what it says now: a limit
      // set on an account whose tunnels are streaming stops them too.
      this.opts.rebudget?.((accountId, subject) => this.budgetFor(accountId, subject));
      this.rerate();
    }
    const now = this.now();
    const open = this.opts.openConnections;
    if (open) {
      for (const [k, b] of this.budgets) {
        if (now - b.bornAt < BUDGET_IDLE_MS || b.budget.parked > 0) continue;
        if ((b.subject === null ? open(b.accountId) : open(b.accountId, b.subject)) === 0) this.budgets.delete(k);
      }
      for (const [k, e] of this.rates) {
        if (e.rate.up.parked + e.rate.down.parked > 0) continue;
        if ((e.subject === null ? open(e.accountId) : open(e.accountId, e.subject)) === 0) this.rates.delete(k);
      }
    }
    // Whoever is refused now (an expiry passed, or over as of the last sync) loses their open connections here.
    this.closeRefused();
  }
}
