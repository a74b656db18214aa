// plans / user_limits: an account's plan and its proxy users' limits inside it (SPEC 11).
import { toPlan, toUserLimits, type PlanRow, type UserRow } from '../plans-sql.js';
import type { Plan, PlanStore, UserLimits } from '../types.js';
import type { Db } from './db.js';
import { stmt } from './statements.js';

const PLAN_COLUMNS = 'account_id, traffic_limit, period, anchor_day, max_connections, expires_at_ms';
const USER_SELECT = 'SELECT u.account_id, u.username, l.traffic_limit, l.max_connections FROM user_limits l JOIN proxy_users u ON u.id = l.proxy_user_id';

export class SqlitePlanStore implements PlanStore {
  constructor(
    private readonly db: Db,
    private readonly nowSec: () => number,
  ) {}

  async get(accountId: number): Promise<Plan | null> {
    const r = stmt<[number], PlanRow>(this.db, `SELECT ${PLAN_COLUMNS} FROM plans WHERE account_id = ?`).get(accountId);
    return r ? toPlan(r) : null;
  }

  async set(p: Plan): Promise<void> {
    stmt(this.db, `INSERT INTO plans (${PLAN_COLUMNS}, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (account_id) DO UPDATE SET traffic_limit = excluded.traffic_limit, period = excluded.period, anchor_day = excluded.anchor_day,
        max_connections = excluded.max_connections, expires_at_ms = excluded.expires_at_ms, updated_at = excluded.updated_at`)
      .run(p.accountId, p.trafficLimit, p.period, p.anchorDay, p.maxConnections, p.expiresAt, this.nowSec());
  }

  async setUserLimits(accountId: number, username: string, l: { trafficLimit: number | null; maxConnections: number | null }): Promise<boolean> {
    const u = stmt<[number, string], { id: number }>(this.db, 'SELECT id FROM proxy_users WHERE account_id = ? AND username = ?').get(accountId, username);
    if (!u) return false;
    stmt(this.db, `INSERT INTO user_limits (proxy_user_id, traffic_limit, max_connections) VALUES (?, ?, ?)
      ON CONFLICT (proxy_user_id) DO UPDATE SET traffic_limit = excluded.traffic_limit, max_connections = excluded.max_connections`).run(u.id, l.trafficLimit, l.maxConnections);
    return true;
  }

  async userLimits(accountId: number): Promise<UserLimits[]> {
    return stmt<[number], UserRow>(this.db, `${USER_SELECT} WHERE u.account_id = ? ORDER BY u.username`).all(accountId).map(toUserLimits);
  }

  async all(): Promise<{ plans: Plan[]; users: UserLimits[] }> {
    return {
      plans: stmt<[], PlanRow>(this.db, `SELECT ${PLAN_COLUMNS} FROM plans`).all().map(toPlan),
      users: stmt<[], UserRow>(this.db, `${USER_SELECT} WHERE l.traffic_limit IS NOT NULL OR l.max_connections IS NOT NULL`).all().map(toUserLimits),
    };
  }
}
