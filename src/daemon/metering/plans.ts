// Plans and limits on this node (SPEC 11): every 500 ms the node reads every plan and per-user limit and what
// each limited account and user has used in its current period (the fleet's flushed usage, plus this node's
// not yet flushed), decides who is over, answers the gateway's admission from that in memory (403 / SOCKS
// 0x02 for an exhausted or expired plan), and closes the open connections of whoever is over.
//
// This version enforces from the fleet's flushed usage: a node may relay past a limit for as long as it takes
// the fleet's usage to reach it (one flush and one read, about 2 s), and connection caps hold per node. The
// fleet-wide bounds of SPEC 11 (4 MiB per node past a limit, `max + nodes − 1` connections) need leases
// from the store; they are not built yet (docs/operations.md, "Plans and limits").
import type { PlanLimits } from '../../gateway/types.js';
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

interface AccountState {
  plan: Plan;
  start: number;
  used: number;
  state: PlanState;
}

interface UserState {
  limits: UserLimits;
  used: number;
  over: boolean;
}

export interface PlanEnforcerOptions {
  intervalMs?: number;
  nowMs?: () => number;
  /** This node's usage not yet flushed, per `accountId\0subject`. */
  unflushed?: () => Map<string, number>;
  /** Closes open connections that match (the gateway's closeWhere). */
  close?: (match: (accountId: number, subject: string) => boolean) => number;
  log?: { warn(obj: object, msg?: string): void };
}

export class PlanEnforcer implements PlanLimits {
  private accounts = new Map<number, AccountState>();
  private users = new Map<string, UserState>();
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private lastWarn = 0;
  private readonly now: () => number;

  constructor(
    private readonly store: Store,
    private readonly opts: PlanEnforcerOptions = {},
  ) {
    this.now = opts.nowMs ?? Date.now;
  }

  start(): Promise<void> {
    this.timer = setInterval(() => void this.refresh(), this.opts.intervalMs ?? 500);
    this.timer.unref();
    return this.refresh();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  refusal(accountId: number, subject: string): 'traffic_limit' | 'plan_expired' | null {
    const a = this.accounts.get(accountId);
    if (a?.state === 'expired') return 'plan_expired';
    if (a?.state === 'over_traffic') return 'traffic_limit';
    return this.users.get(`${accountId}\0${subject}`)?.over ? 'traffic_limit' : null;
  }

  maxConnections(accountId: number, subject: string): { account: number | null; user: number | null } {
    return {
      account: this.accounts.get(accountId)?.plan.maxConnections ?? null,
      user: this.users.get(`${accountId}\0${subject}`)?.limits.maxConnections ?? null,
    };
  }

  /** The account's plan as `proxyd admin plan show` prints it, from this view. */
  stateOf(accountId: number): AccountState | undefined {
    return this.accounts.get(accountId);
  }

  refresh(): Promise<void> {
    return (this.running ??= this.load()
      .catch((e: unknown) => {
        // The database away: keep enforcing the last view (counts go on in memory, the meter keeps them).
        const now = Date.now();
        if (now - this.lastWarn >= 10_000) {
          this.lastWarn = now;
          this.opts.log?.warn({ event: 'plans_refresh_failed', detail: e instanceof Error ? e.message : String(e) }, 'plans: keeping the last view');
        }
      })
      .finally(() => {
        this.running = null;
      }));
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
    for (const t of totals) {
      if (t.startMs < Math.floor((starts.get(t.accountId) ?? 0) / DAY) * DAY) continue;
      byAccount.set(t.accountId, (byAccount.get(t.accountId) ?? 0) + t.bytes);
      const k = `${t.accountId}\0${t.subject}`;
      bySubject.set(k, (bySubject.get(k) ?? 0) + t.bytes);
    }
    for (const [k, bytes] of this.opts.unflushed?.() ?? []) {
      const id = Number(k.slice(0, k.indexOf('\0')));
      if (!starts.has(id)) continue;
      byAccount.set(id, (byAccount.get(id) ?? 0) + bytes);
      bySubject.set(k, (bySubject.get(k) ?? 0) + bytes);
    }
    const accounts = new Map<number, AccountState>();
    for (const p of plans) {
      const used = byAccount.get(p.accountId) ?? 0;
      const state: PlanState = p.expiresAt !== null && now >= p.expiresAt ? 'expired' : p.trafficLimit !== null && used >= p.trafficLimit ? 'over_traffic' : 'ok';
      accounts.set(p.accountId, { plan: p, start: starts.get(p.accountId)!, used, state });
    }
    const userStates = new Map<string, UserState>();
    for (const u of users) {
      const k = `${u.accountId}\0user:${u.username}`;
      const used = bySubject.get(k) ?? 0;
      userStates.set(k, { limits: u, used, over: u.trafficLimit !== null && used >= u.trafficLimit });
    }
    this.accounts = accounts;
    this.users = userStates;
    // Whoever is over now loses their open connections, on this node (every node does the same).
    this.opts.close?.((accountId, subject) => this.refusal(accountId, subject) !== null);
  }
}
