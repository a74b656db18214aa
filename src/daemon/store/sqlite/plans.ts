// plans / user_limits: an account's plan and its proxy users' limits inside it.
import { USER_LIMIT_COLUMNS, USER_LIMITED, toPlan, toUserLimits, type PlanRow, type UserRow } from '../plans-sql.js';
import type { AuditDraft, Plan, PlanStore, UserLimits } from '../types.js';
import type { SqliteAuditLog } from './audit.js';
import type { Db } from './db.js';
import { stmt } from './statements.js';

const PLAN_COLUMNS = 'account_id, traffic_limit, period, anchor_day, max_connections, expires_at_ms, rate_limit';
const USER_SELECT = `SELECT ${USER_LIMIT_COLUMNS} FROM user_limits l JOIN proxy_users u ON u.id = l.proxy_user_id`;

export class SqlitePlanStore implements PlanStore {
  constructor(
    private readonly db: Db,
    private readonly nowSec: () => number,
    private readonly audit: SqliteAuditLog,
  ) {}

  async get(accountId: number): Promise<Plan | null> {
    const r = stmt<[number], PlanRow>(this.db, `SELECT ${PLAN_COLUMNS} FROM plans WHERE account_id = ?`).get(accountId);
    return r ? toPlan(r) : null;
  }

  async set(p: Plan, audit?: AuditDraft): Promise<void> {
    this.audit.audited(p.accountId, audit, () => this.write(p));
  }

  private write(p: Plan): void {
    stmt(
      this.db,
      `INSERT INTO plans (${PLAN_COLUMNS}, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (account_id) DO UPDATE SET traffic_limit = excluded.traffic_limit, period = excluded.period, anchor_day = excluded.anchor_day,
        max_connections = excluded.max_connections, expires_at_ms = excluded.expires_at_ms, rate_limit = excluded.rate_limit, updated_at = excluded.updated_at`,
    ).run(
      p.accountId,
      p.trafficLimit,
      p.period,
      p.anchorDay,
      p.maxConnections,
      p.expiresAt,
      p.rateLimit ?? null,
      this.nowSec(),
    );
  }

  async setUserLimits(
    accountId: number,
    username: string,
    l: { trafficLimit: number | null; maxConnections: number | null; rateLimit?: number | null },
    audit?: AuditDraft,
  ): Promise<boolean> {
    return this.audit.audited(
      accountId,
      audit,
      () => {
        const u = stmt<[number, string], { id: number }>(
          this.db,
          'SELECT id FROM proxy_users WHERE account_id = ? AND username = ?',
        ).get(accountId, username);
        if (!u) return false;
        stmt(
          this.db,
          `INSERT INTO user_limits (proxy_user_id, traffic_limit, max_connections, rate_limit) VALUES (?, ?, ?, ?)
          ON CONFLICT (proxy_user_id) DO UPDATE SET traffic_limit = excluded.traffic_limit, max_connections = excluded.max_connections, rate_limit = excluded.rate_limit`,
        ).run(u.id, l.trafficLimit, l.maxConnections, l.rateLimit ?? null);
        return true;
      },
      (found) => (found ? audit! : null),
    );
  }

  async userLimits(accountId: number): Promise<UserLimits[]> {
    return stmt<[number], UserRow>(this.db, `${USER_SELECT} WHERE u.account_id = ? ORDER BY u.username`)
      .all(accountId)
      .map(toUserLimits);
  }

  async all(): Promise<{ plans: Plan[]; users: UserLimits[] }> {
    return {
      plans: stmt<[], PlanRow>(this.db, `SELECT ${PLAN_COLUMNS} FROM plans`).all().map(toPlan),
      users: stmt<[], UserRow>(this.db, `${USER_SELECT} WHERE ${USER_LIMITED}`).all().map(toUserLimits),
    };
  }

  async version(): Promise<number> {
    return stmt<[], { seq: number }>(this.db, 'SELECT seq FROM plan_version WHERE id = 1').get()!.seq;
  }

  async leaseSlots(
    node: string,
    key: string,
    want: number,
    max: number,
    ttlMs: number,
    nowMs: number,
  ): Promise<number> {
    // IMMEDIATE: the write lock first, so two processes on this file never both count the same free slots.
    return this.db
      .transaction(() => {
        stmt(this.db, 'DELETE FROM slot_leases WHERE key = ? AND expires_at_ms <= ?').run(key, nowMs);
        const others = stmt<[string, string], { n: number }>(
          this.db,
          'SELECT COALESCE(SUM(slots), 0) AS n FROM slot_leases WHERE key = ? AND node <> ?',
        ).get(key, node)!.n;
        const held = Math.max(0, Math.min(want, max - others));
        this.putLease(node, key, held, nowMs + ttlMs);
        return held;
      })
      .immediate();
  }

  async renewSlots(
    node: string,
    leases: ReadonlyArray<{ key: string; slots: number }>,
    ttlMs: number,
    nowMs: number,
  ): Promise<void> {
    this.db
      .transaction(() => {
        for (const l of leases) {
          const cur = stmt<[string, string], { slots: number }>(
            this.db,
            'SELECT slots FROM slot_leases WHERE key = ? AND node = ?',
          ).get(l.key, node);
          this.putLease(node, l.key, Math.min(l.slots, cur?.slots ?? l.slots), nowMs + ttlMs);
        }
      })
      .immediate();
  }

  private putLease(node: string, key: string, slots: number, expiresAtMs: number): void {
    if (slots <= 0) stmt(this.db, 'DELETE FROM slot_leases WHERE key = ? AND node = ?').run(key, node);
    else {
      stmt(
        this.db,
        `INSERT INTO slot_leases (key, node, slots, expires_at_ms) VALUES (?, ?, ?, ?)
        ON CONFLICT (key, node) DO UPDATE SET slots = excluded.slots, expires_at_ms = excluded.expires_at_ms`,
      ).run(key, node, slots, expiresAtMs);
    }
  }
}
