// Proxy users (PostgreSQL).
import { hasSettings, limitValues, patched, toDetail, touchesSettings, type DetailRow } from '../proxy-users-sql.js';
import type {
  AuditDraft,
  ProxyUser,
  ProxyUserDetail,
  ProxyUserFilter,
  ProxyUserPatch,
  ProxyUserSettings,
  ProxyUserStore,
} from '../types.js';
import { audited } from './audit.js';
import { guard, type Sql } from './db.js';
import { PgFamily } from './family.js';

export class PgProxyUserStore extends PgFamily implements ProxyUserStore {
  async create(
    accountId: number,
    username: string,
    passwordHash: string,
    audit?: AuditDraft,
  ): Promise<ProxyUser | 'exists'> {
    const now = this.nowSec();
    const [u] = await audited(
      this.sql,
      this.nowMs,
      accountId,
      audit,
      (q) => q<ProxyUser[]>`
        INSERT INTO proxy_users (account_id, username, password_hash, status, created_at, updated_at)
        VALUES (${accountId}, ${username}, ${passwordHash}, 'active', ${now}, ${now})
        ON CONFLICT (username) DO NOTHING
        RETURNING id, account_id, username, status, created_at`,
      (r) => (r.length ? audit! : null),
    );
    return u ?? 'exists';
  }

  async createDetailed(
    accountId: number,
    username: string,
    passwordHash: string,
    status: 'active' | 'disabled',
    settings: ProxyUserSettings,
    audit?: AuditDraft,
  ): Promise<ProxyUserDetail | 'exists'> {
    const now = this.nowSec();
    const work = async (q: Sql): Promise<ProxyUserDetail | null> => {
      const [u] = await q<{ id: number }[]>`
        INSERT INTO proxy_users (account_id, username, password_hash, status, created_at, updated_at)
        VALUES (${accountId}, ${username}, ${passwordHash}, ${status}, ${now}, ${now})
        ON CONFLICT (username) DO NOTHING
        RETURNING id`;
      if (!u) return null;
      if (hasSettings(settings)) await putSettings(q, u.id, settings);
      return detailWhere(q, u.id);
    };
    // Without a record the insert and its settings still commit together.
    const r = audit
      ? await audited(this.sql, this.nowMs, accountId, audit, work, (d) => (d ? audit! : null))
      : await guard(() => this.sql.begin((tx) => work(tx as unknown as Sql)) as Promise<ProxyUserDetail | null>);
    return r ?? 'exists';
  }

  async detail(accountId: number, username: string): Promise<ProxyUserDetail | null> {
    const [r] = await guard(
      () => this.sql<DetailRow[]>`
      SELECT u.id, u.account_id, u.username, u.status, u.created_at, l.traffic_limit, l.max_connections, l.rate_limit, l.expires_at_ms, l.allow, l.deny
      FROM proxy_users u LEFT JOIN user_limits l ON l.proxy_user_id = u.id WHERE u.account_id = ${accountId} AND u.username = ${username}`,
    );
    return r ? toDetail(r) : null;
  }

  async page(accountId: number, f: ProxyUserFilter): Promise<{ items: ProxyUserDetail[]; total: number }> {
    const status = f.status ?? null;
    const prefix = f.prefix ?? '';
    // An exact prefix: LIKE would read `_` and `%` in a name as patterns.
    const [count, rows] = await Promise.all([
      guard(
        () => this.sql<{ n: string }[]>`
        SELECT count(*) AS n FROM proxy_users u WHERE u.account_id = ${accountId} AND (${status}::text IS NULL OR u.status = ${status})
          AND left(u.username, ${prefix.length}) = ${prefix}`,
      ),
      guard(
        () => this.sql<DetailRow[]>`
        SELECT u.id, u.account_id, u.username, u.status, u.created_at, l.traffic_limit, l.max_connections, l.rate_limit, l.expires_at_ms, l.allow, l.deny
        FROM proxy_users u LEFT JOIN user_limits l ON l.proxy_user_id = u.id
        WHERE u.account_id = ${accountId} AND (${status}::text IS NULL OR u.status = ${status}) AND left(u.username, ${prefix.length}) = ${prefix}
        ORDER BY u.username COLLATE "C" LIMIT ${f.limit} OFFSET ${f.offset}`,
      ),
    ]);
    return { items: rows.map(toDetail), total: Number(count[0]!.n) };
  }

  async update(
    accountId: number,
    username: string,
    patch: ProxyUserPatch,
    audit?: AuditDraft,
  ): Promise<ProxyUserDetail | null> {
    const work = async (q: Sql): Promise<ProxyUserDetail | null> => {
      const [row] = await q<DetailRow[]>`
        SELECT u.id, u.account_id, u.username, u.status, u.created_at, l.traffic_limit, l.max_connections, l.rate_limit, l.expires_at_ms, l.allow, l.deny
        FROM proxy_users u LEFT JOIN user_limits l ON l.proxy_user_id = u.id WHERE u.account_id = ${accountId} AND u.username = ${username}
        FOR UPDATE OF u`;
      if (!row) return null;
      const was = toDetail(row);
      if (patch.status !== undefined && patch.status !== was.status) {
        await q`UPDATE proxy_users SET status = ${patch.status}, updated_at = ${this.nowSec()} WHERE id = ${was.id}`;
      }
      const next = patched(was, patch);
      // user_limits written only when a setting changes, and a row removed only when there was one: the plan version's
      // statement trigger makes every node read the plan tables again on any statement there.
      if (touchesSettings(patch) && hasSettings(next)) await putSettings(q, was.id, next);
      else if (touchesSettings(patch) && hasSettings(was))
        await q`DELETE FROM user_limits WHERE proxy_user_id = ${was.id}`;
      return detailWhere(q, was.id);
    };
    return audit
      ? audited(this.sql, this.nowMs, accountId, audit, work, (d) => (d ? audit! : null))
      : guard(() => this.sql.begin((tx) => work(tx as unknown as Sql)) as Promise<ProxyUserDetail | null>);
  }

  async get(id: number): Promise<ProxyUser | null> {
    const [u] = await guard(
      () =>
        this.sql<ProxyUser[]>`SELECT id, account_id, username, status, created_at FROM proxy_users WHERE id = ${id}`,
    );
    return u ?? null;
  }

  async listForAccount(accountId: number): Promise<ProxyUser[]> {
    const rows = await guard(
      () =>
        this.sql<
          ProxyUser[]
        >`SELECT id, account_id, username, status, created_at FROM proxy_users WHERE account_id = ${accountId} ORDER BY id DESC`,
    );
    return [...rows];
  }

  async setPassword(accountId: number, id: number, passwordHash: string, audit?: AuditDraft): Promise<boolean> {
    const r = await audited(
      this.sql,
      this.nowMs,
      accountId,
      audit,
      (q) =>
        q`UPDATE proxy_users SET password_hash = ${passwordHash}, updated_at = ${this.nowSec()} WHERE id = ${id} AND account_id = ${accountId}`,
      (r) => (r.count === 1 ? audit! : null),
    );
    return r.count === 1;
  }

  async delete(accountId: number, id: number, audit?: AuditDraft): Promise<boolean> {
    const r = await audited(
      this.sql,
      this.nowMs,
      accountId,
      audit,
      (q) => q`DELETE FROM proxy_users WHERE id = ${id} AND account_id = ${accountId}`,
      (r) => (r.count === 1 ? audit! : null),
    );
    return r.count === 1;
  }
}

async function putSettings(q: Sql, id: number, s: ProxyUserSettings): Promise<void> {
  const [traffic, conns, rate, expires, allow, deny] = limitValues(s);
  await q`
    INSERT INTO user_limits (proxy_user_id, traffic_limit, max_connections, rate_limit, expires_at_ms, allow, deny)
    VALUES (${id}, ${traffic}, ${conns}, ${rate}, ${expires}, ${allow}, ${deny})
    ON CONFLICT (proxy_user_id) DO UPDATE SET traffic_limit = excluded.traffic_limit, max_connections = excluded.max_connections, rate_limit = excluded.rate_limit,
      expires_at_ms = excluded.expires_at_ms, allow = excluded.allow, deny = excluded.deny`;
}

async function detailWhere(q: Sql, id: number): Promise<ProxyUserDetail> {
  const [r] = await q<DetailRow[]>`
    SELECT u.id, u.account_id, u.username, u.status, u.created_at, l.traffic_limit, l.max_connections, l.rate_limit, l.expires_at_ms, l.allow, l.deny
    FROM proxy_users u LEFT JOIN user_limits l ON l.proxy_user_id = u.id WHERE u.id = ${id}`;
  return toDetail(r!);
}
