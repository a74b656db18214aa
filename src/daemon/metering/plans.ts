// Plans and limits on this node (SPEC 11), enforced fleet-wide with two kinds of lease from the store.
//
// State: every 500 ms the node reads every plan and per-user limit and what each limited account and user has
// used in its current period (the fleet's flushed usage, plus this node's not yet flushed), decides who is
// over or expired, answers the gateway's admission from that in memory (403 / SOCKS 0x02), and closes the
// open connections of whoever is over. Every node does the same, so they are closed everywhere within ~2 s.
//
// Bytes: a connection under a traffic limit relays under a byte budget (gateway/byte-budget.ts). The node
// grants it at most `grantBytes` (default 3 MiB), never more than the limit leaves, and only after this node's
// bytes of that account are flushed and the fleet's usage read back (a sync). When a grant runs low the node
// syncs again; when it runs out the readers park until the sync answers. So no node relays more than one
// grant past what the fleet has confirmed: past a limit, at most one grant per node (4 MiB bound, with room
// for the forward path's one read per exchange). With the store away no new grant comes: limited traffic
// pauses while unlimited traffic goes on, and the limit holds.
//
// Connections: each capped key (an account's `max_connections`, a user's) has slots leased from the store
// (`leaseSlots`: atomically, what the cap leaves after the other nodes' leases). A node admits within what it
// holds without asking anyone; past it, it asks for more (one call per key at a time, for every connection
// waiting), and every 500 ms gives back what it does not use. Fleet-wide the open connections never exceed
// the cap; a slot freed on one node is free for the others within 0.5 s; a node that dies holds its slots
// until its lease expires (10 s).
import type { ByteBudget as Budget } from '../../gateway/byte-budget.js';
import { ByteBudget } from '../../gateway/byte-budget.js';
import type { PlanLimits } from '../../gateway/types.js';
import { usageKey } from './meter.js';
import type { Plan, PlanPeriod, Store, UserLimits } from '../store/index.js';

const DAY = 86_400_000;

/** Where the plan's current period started (UTC): today, the last anchor day of the month, or never. */
export function periodStart(period: PlanPeriod, anchorDay: number, nowMs: number): number {
  if (period === 'lifetime') return 0;
  if (period === 'day') return Math.floor(nowMs / DAY) * DAY;
  const d = new Date(nowMs);
  const start = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), anchorDay);
  return start <= nowMs ? start : Date.UTC(d.getUTCFullYear(), d.getUTCMonth() - 1, anchorDay);
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
  const rows = await store.usage.dailyTotals([plan.accountId], Math.floor(start / DAY) * DAY);
  return { start, used: rows.reduce((n, r) => n + r.bytes, 0) };
}

interface AccountState {
  plan: Plan;
  state: PlanState;
}

interface UserState {
  limits: UserLimits;
  over: boolean;
}

/** Connection slots this node holds for one capped key. */
interface SlotLease {
  readonly dbKey: string;
  max: number;
  held: number;
  /** Admissions waiting for the next answer. */
  waiting: number;
  growing: Promise<void> | null;
}

interface BudgetEntry {
  budget: Budget;
  accountId: number;
  subject: string | null;
  /** The last sync found its limit reached: it asks no more syncs until the next refresh (a raised limit). */
  atLimit: boolean;
}

export const DEFAULT_GRANT_BYTES = 3 * 2 ** 20;
const LEASE_TTL_MS = 10_000;
/** Syncs asked for by budgets run at most this often while the store fails. */
const RETRY_MS = 200;

export interface PlanEnforcerOptions {
  intervalMs?: number;
  nowMs?: () => number;
  /** Bytes a node may relay for a limited key past what the fleet confirmed (the overshoot bound per node). */
  grantBytes?: number;
  /** This node's name in slot leases (unique per process). */
  node?: string;
  /** This node's usage not yet flushed. */
  unflushed?: () => Array<{ accountId: number; subject: string; bytes: number }>;
  /** Writes this node's usage of these accounts now (the meter's flushAccounts); false: not written. */
  flushAccounts?: (accounts: ReadonlySet<number>) => Promise<boolean>;
  /** Connections open on this node (the gateway's openConnections). */
  openConnections?: (accountId: number, subject?: string) => number;
  /** Closes open connections that match (the gateway's closeWhere). */
  close?: (match: (accountId: number, subject: string) => boolean) => number;
  log?: { warn(obj: object, msg?: string): void };
}

export class PlanEnforcer implements PlanLimits {
  private accounts = new Map<number, AccountState>();
  private users = new Map<string, UserState>();
  /** Byte budgets of limited keys (`a:ID`, or the user's usage key), kept while the limit lasts. */
  private readonly budgets = new Map<string, BudgetEntry>();
  private readonly leases = new Map<string, SlotLease>();
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private syncing: Promise<void> | null = null;
  private syncAgain = false;
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

  refusal(accountId: number, subject: string): 'traffic_limit' | 'plan_expired' | null {
    const a = this.accounts.get(accountId);
    if (a?.state === 'expired') return 'plan_expired';
    if (a?.state === 'over_traffic') return 'traffic_limit';
    return this.users.get(usageKey(accountId, subject))?.over ? 'traffic_limit' : null;
  }

  // ---- connection slots -------------------------------------------------------------------------------

  /** The capped keys of an admission, and which of the node's open counts each is about. */
  private capped(accountId: number, subject: string): Array<[SlotLease, 'account' | 'user']> {
    const out: Array<[SlotLease, 'account' | 'user']> = [];
    const a = this.accounts.get(accountId)?.plan.maxConnections ?? null;
    if (a !== null) out.push([this.lease(`a:${accountId}`, a), 'account']);
    const u = this.users.get(usageKey(accountId, subject))?.limits.maxConnections ?? null;
    if (u !== null) out.push([this.lease(`u:${accountId}:${subject}`, u), 'user']);
    return out;
  }

  private lease(dbKey: string, max: number): SlotLease {
    let l = this.leases.get(dbKey);
    if (!l) this.leases.set(dbKey, (l = { dbKey, max, held: 0, waiting: 0, growing: null }));
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
      const m = /^a:(\d+)$/.exec(k) ?? /^u:(\d+):(.*)$/s.exec(k);
      const n = m ? open(Number(m[1]), m[2]) : 0;
      const keep = Math.min(l.held, Math.max(n, 0));
      if (keep === 0 && l.held === 0 && l.waiting === 0) {
        this.leases.delete(k);
        continue;
      }
      l.held = keep;
      renew.push({ key: l.dbKey, slots: keep });
    }
    await this.store.plans.renewSlots(this.node, renew, LEASE_TTL_MS, this.now());
  }

  // ---- byte budgets ------------------------------------------------------------------------------------

  budgetFor(accountId: number, subject: string): Budget | null {
    const account = this.accounts.get(accountId)?.plan.trafficLimit != null ? this.budget(`a:${accountId}`, accountId, null, null) : null;
    const key = usageKey(accountId, subject);
    if (this.users.get(key)?.limits.trafficLimit == null) return account;
    return this.budget(key, accountId, subject, account);
  }

  private budget(key: string, accountId: number, subject: string | null, parent: Budget | null): Budget {
    const found = this.budgets.get(key);
    if (found) return found.budget;
    // Starts empty: its first grant comes from a sync (this node's bytes of it flushed, the fleet's read).
    const e: BudgetEntry = {
      budget: new ByteBudget(parent, () => {
        if (!e.atLimit) this.requestSync();
      }, this.grant / 2),
      accountId,
      subject,
      atLimit: false,
    };
    this.budgets.set(key, e);
    return e.budget;
  }

  /** A budget ran low or out: sync now (one at a time; one more after the one under way). */
  private requestSync(): void {
    if (this.syncing) {
      this.syncAgain = true;
      return;
    }
    // Never in the same turn: the connection path that asked goes on, and the loop serves I/O between syncs.
    const wait = this.lastSyncFailure + RETRY_MS - Date.now();
    this.syncing = new Promise((r) => (wait > 0 ? setTimeout(r, wait) : setImmediate(r)))
      .then(() => this.syncBudgets())
      .catch((e: unknown) => {
        this.lastSyncFailure = Date.now();
        this.warn('budget_sync_failed', e);
      })
      .finally(() => {
        this.syncing = null;
        if (this.syncAgain) {
          this.syncAgain = false;
          if ([...this.budgets.values()].some((b) => !b.atLimit && b.budget.parked > 0)) this.requestSync();
        }
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
    if (this.opts.flushAccounts && !(await this.opts.flushAccounts(accountIds))) throw new Error('usage flush not written');
    const now = this.now();
    const starts = new Map<number, number>();
    for (const id of accountIds) {
      const p = this.accounts.get(id)?.plan;
      starts.set(id, p ? periodStart(p.period, p.anchorDay, now) : periodStart('month', 1, now));
    }
    const since = Math.floor(Math.min(...starts.values()) / DAY) * DAY;
    const rows = await this.store.usage.dailyTotals([...accountIds], since);
    const used = new Map<string, number>();
    for (const r of rows) {
      if (r.startMs < Math.floor(starts.get(r.accountId)! / DAY) * DAY) continue;
      used.set(`a:${r.accountId}`, (used.get(`a:${r.accountId}`) ?? 0) + r.bytes);
      const k = usageKey(r.accountId, r.subject);
      used.set(k, (used.get(k) ?? 0) + r.bytes);
    }
    let reached = false;
    for (const [k, b] of this.budgets) {
      const limit = b.subject === null ? (this.accounts.get(b.accountId)?.plan.trafficLimit ?? null) : (this.users.get(k)?.limits.trafficLimit ?? null);
      if (limit === null) {
        // No longer limited: its connections go on unbudgeted; new ones get none.
        b.budget.refill(Infinity);
        this.budgets.delete(k);
        continue;
      }
      const u = used.get(k) ?? 0;
      const since = b.budget.taken - taken.get(k)!;
      if (u >= limit && !b.atLimit) reached = true;
      b.atLimit = u >= limit;
      b.budget.refill(Math.max(0, Math.min(this.grant, limit - u)) - since);
    }
    // Someone reached a limit: the full read marks them over and closes what is open, now rather than in 0.5 s.
    if (reached) setImmediate(() => void this.refresh());
  }

  // ---- the plans, every 500 ms -------------------------------------------------------------------------

  refresh(): Promise<void> {
    return (this.running ??= this.load()
      .then(() => this.renewLeases())
      .catch((e: unknown) => this.warn('plans_refresh_failed', e)) // the database away: keep enforcing the last view
      .finally(() => {
        this.running = null;
        // A raised limit or a new period: parked budgets get their grant now.
        let parked = false;
        for (const b of this.budgets.values()) {
          b.atLimit = false;
          if (b.budget.parked > 0) parked = true;
        }
        if (parked) this.requestSync();
      }));
  }

  private warn(event: string, e: unknown): void {
    const now = Date.now();
    if (now - this.lastWarn < 10_000) return;
    this.lastWarn = now;
    this.opts.log?.warn({ event, detail: e instanceof Error ? e.message : String(e) }, 'plans: keeping the last view');
  }

  private async load(): Promise<void> {
    const now = this.now();
    const { plans, users } = await this.store.plans.all();
    const starts = new Map<number, number>();
    for (const p of plans) starts.set(p.accountId, periodStart(p.period, p.anchorDay, now));
    // A user's limit counts in its account's period (the calendar month when the account has no plan).
    for (const u of users) if (!starts.has(u.accountId)) starts.set(u.accountId, periodStart('month', 1, now));
    const since = Math.min(...starts.values(), now);
    const totals = await this.store.usage.dailyTotals([...starts.keys()], Math.floor(since / DAY) * DAY);
    const byAccount = new Map<number, number>();
    const bySubject = new Map<string, number>();
    // The fleet's flushed days of each period, and what this node has not flushed yet.
    const inPeriod = totals.filter((t) => t.startMs >= Math.floor(starts.get(t.accountId)! / DAY) * DAY);
    for (const t of [...inPeriod, ...(this.opts.unflushed?.() ?? []).filter((u) => starts.has(u.accountId))]) {
      byAccount.set(t.accountId, (byAccount.get(t.accountId) ?? 0) + t.bytes);
      const k = usageKey(t.accountId, t.subject);
      bySubject.set(k, (bySubject.get(k) ?? 0) + t.bytes);
    }
    const accounts = new Map<number, AccountState>();
    for (const p of plans) {
      const used = byAccount.get(p.accountId) ?? 0;
      accounts.set(p.accountId, { plan: p, state: planState(p, used, now) });
    }
    const userStates = new Map<string, UserState>();
    for (const u of users) {
      const k = usageKey(u.accountId, `user:${u.username}`);
      const used = bySubject.get(k) ?? 0;
      userStates.set(k, { limits: u, over: u.trafficLimit !== null && used >= u.trafficLimit });
    }
    this.accounts = accounts;
    this.users = userStates;
    // Whoever is over now loses their open connections, on this node (every node does the same).
    this.opts.close?.((accountId, subject) => this.refusal(accountId, subject) !== null);
  }
}
