// Plans and proxy-user limits on PostgreSQL: the same rows as SQLite's.
import type { AuditDraft, Plan, PlanStore, UserLimits } from '../types.js';
import { audited } from './audit.js';
import { toPlan, toUserLimits, type PlanRow, type UserRow } from '../plans-sql.js';
import { guard } from './db.js';
import { PgFamily } from './family.js';

export class PgPlanStore extends PgFamily implements PlanStore {
  async get(accountId: number): Promise<Plan | null> {
    const [r] = await guard(
      () => this.sql<PlanRow[]>`
      SELECT account_id, traffic_limit, period, anchor_day, max_connections, expires_at_ms, rate_limit FROM plans WHERE account_id = ${accountId}`,
    );
    return r ? toPlan(r) : null;
  }

  async set(p: Plan, audit?: AuditDraft): Promise<void> {
    await audited(
      this.sql,
      this.nowMs,
      p.accountId,
      audit,
      (q) => q`
      INSERT INTO plans (account_id, traffic_limit, period, anchor_day, max_connections, expires_at_ms, rate_limit, updated_at)
      VALUES (${p.accountId}, ${p.trafficLimit}, ${p.period}, ${p.anchorDay}, ${p.maxConnections}, ${p.expiresAt}, ${p.rateLimit ?? null}, ${this.nowSec()})
      ON CONFLICT (account_id) DO UPDATE SET traffic_limit = excluded.traffic_limit, period = excluded.period, anchor_day = excluded.anchor_day,
        max_connections = excluded.max_connections, expires_at_ms = excluded.expires_at_ms, rate_limit = excluded.rate_limit, updated_at = excluded.updated_at`,
    );
  }

  async setUserLimits(
    accountId: number,
    username: string,
    l: { trafficLimit: number | null; maxConnections: number | null; rateLimit?: number | null },
    audit?: AuditDraft,
  ): Promise<boolean> {
    const r = await audited(
      this.sql,
      this.nowMs,
      accountId,
      audit,
      (q) => q`
      INSERT INTO user_limits (proxy_user_id, traffic_limit, max_connections, rate_limit)
      SELECT id, ${l.trafficLimit}, ${l.maxConnections}, ${l.rateLimit ?? null} FROM proxy_users WHERE account_id = ${accountId} AND username = ${username}
      ON CONFLICT (proxy_user_id) DO UPDATE SET traffic_limit = excluded.traffic_limit, max_connections = excluded.max_connections, rate_limit = excluded.rate_limit`,
      (r) => (r.count > 0 ? audit! : null),
    );
    return r.count > 0;
  }

  async userLimits(accountId: number): Promise<UserLimits[]> {
    const rows = await guard(
      () => this.sql<UserRow[]>`
      SELECT u.account_id, u.username, l.traffic_limit, l.max_connections, l.rate_limit, l.expires_at_ms, l.allow, l.deny FROM user_limits l JOIN proxy_users u ON u.id = l.proxy_user_id
      WHERE u.account_id = ${accountId} ORDER BY u.username`,
    );
    return rows.map(toUserLimits);
  }

  async all(): Promise<{ plans: Plan[]; users: UserLimits[] }> {
    const [plans, users] = await Promise.all([
      guard(
        () =>
          this.sql<
            PlanRow[]
          >`SELECT account_id, traffic_limit, period, anchor_day, max_connections, expires_at_ms, rate_limit FROM plans`,
      ),
      guard(
        () => this.sql<UserRow[]>`
        SELECT u.account_id, u.username, l.traffic_limit, l.max_connections, l.rate_limit, l.expires_at_ms, l.allow, l.deny FROM user_limits l JOIN proxy_users u ON u.id = l.proxy_user_id
        WHERE l.traffic_limit IS NOT NULL OR l.max_connections IS NOT NULL OR l.rate_limit IS NOT NULL OR l.expires_at_ms IS NOT NULL OR l.allow <> '' OR l.deny <> ''`,
      ),
    ]);
    return { plans: plans.map(toPlan), users: users.map(toUserLimits) };
  }

  async version(): Promise<number> {
    const [r] = await guard(() => this.sql<{ seq: string }[]>`SELECT seq FROM plan_version WHERE id = 1`);
    return Number(r!.seq);
  }

  async leaseSlots(
    node: string,
    key: string,
    want: number,
    max: number,
    ttlMs: number,
    nowMs: number,
  ): Promise<number> {
    return guard(() =>
      this.sql.begin(async (tx) => {
        // One lease change per key at a time across the fleet: two nodes never both count the same free slots.
        await tx`SELECT pg_advisory_xact_lock(hashtext(${`proxyd-slots:${key}`}))`;
        await tx`DELETE FROM slot_leases WHERE key = ${key} AND expires_at_ms <= ${nowMs}`;
        const [r] = await tx<
          { n: string }[]
        >`SELECT COALESCE(SUM(slots), 0) AS n FROM slot_leases WHERE key = ${key} AND node <> ${node}`;
        const held = Math.max(0, Math.min(want, max - Number(r!.n)));
        if (held === 0) await tx`DELETE FROM slot_leases WHERE key = ${key} AND node = ${node}`;
        else {
          await tx`INSERT INTO slot_leases (key, node, slots, expires_at_ms) VALUES (${key}, ${node}, ${held}, ${nowMs + ttlMs})
            ON CONFLICT (key, node) DO UPDATE SET slots = excluded.slots, expires_at_ms = excluded.expires_at_ms`;
        }
        return held;
      }),
    );
  }

  async renewSlots(
    node: string,
    leases: ReadonlyArray<{ key: string; slots: number }>,
    ttlMs: number,
    nowMs: number,
  ): Promise<void> {
    if (leases.length === 0) return;
    // As one JSON parameter (the pool does not fetch array types); shrink or keep, never grow (growing takes
    // the key's lock, in leaseSlots); a lease given back goes.
    const rows = JSON.stringify(leases.map((l) => ({ k: l.key, s: l.slots })));
    await guard(() =>
      this.sql.begin(async (tx) => {
        await tx`
          INSERT INTO slot_leases (key, node, slots, expires_at_ms)
          SELECT r.k, ${node}, r.s, ${nowMs + ttlMs} FROM jsonb_to_recordset(${rows}::text::jsonb) AS r(k text, s int) WHERE r.s > 0
          ON CONFLICT (key, node) DO UPDATE SET slots = LEAST(slot_leases.slots, excluded.slots), expires_at_ms = excluded.expires_at_ms`;
        await tx`
          DELETE FROM slot_leases l USING jsonb_to_recordset(${rows}::text::jsonb) AS r(k text, s int)
          WHERE l.node = ${node} AND l.key = r.k AND r.s <= 0`;
      }),
    );
  }
}
