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

export interface PlanEnforcerOptions {
  intervalMs?: number;
  nowMs?: () => number;
  /** This node's usage not yet flushed. */
  unflushed?: () => Array<{ accountId: number; subject: string; bytes: number }>;
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
    return this.users.get(usageKey(accountId, subject))?.over ? 'traffic_limit' : null;
  }

  maxConnections(accountId: number, subject: string): { account: number | null; user: number | null } {
    return {
      account: this.accounts.get(accountId)?.plan.maxConnections ?? null,
      user: this.users.get(usageKey(accountId, subject))?.limits.maxConnections ?? null,
    };
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
