// proxy_users: gateway credentials of an account.
import {
  DETAIL_COLUMNS,
  hasSettings,
  limitValues,
  patched,
  toDetail,
  touchesSettings,
  type DetailRow,
} from '../proxy-users-sql.js';
import type {
  AuditDraft,
  ProxyUser,
  ProxyUserDetail,
  ProxyUserFilter,
  ProxyUserPatch,
  ProxyUserSettings,
  ProxyUserStore,
} from '../types.js';
import type { SqliteAuditLog } from './audit.js';
import type { Db } from './db.js';
import { stmt } from './statements.js';

export class SqliteProxyUserStore implements ProxyUserStore {
  constructor(
    private readonly db: Db,
    private readonly nowSec: () => number,
    private readonly audit: SqliteAuditLog,
  ) {}

  async create(
    accountId: number,
    username: string,
    passwordHash: string,
    audit?: AuditDraft,
  ): Promise<ProxyUser | 'exists'> {
    const now = this.nowSec();
    try {
      return this.audit.audited(accountId, audit, () => {
        const info = stmt(
          this.db,
          "INSERT INTO proxy_users (account_id, username, password_hash, status, created_at, updated_at) VALUES (?, ?, ?, 'active', ?, ?)",
        ).run(accountId, username, passwordHash, now, now);
        return this.byId(Number(info.lastInsertRowid))!;
      });
    } catch (e) {
      if ((e as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE') return 'exists';
      throw e;
    }
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
    try {
      return this.audit.audited(accountId, audit, () =>
        this.db.transaction(() => {
          const info = stmt(
            this.db,
            'INSERT INTO proxy_users (account_id, username, password_hash, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)',
          ).run(accountId, username, passwordHash, status, now, now);
          const id = Number(info.lastInsertRowid);
          if (hasSettings(settings)) this.putSettings(id, settings);
          return this.detailById(id)!;
        })(),
      );
    } catch (e) {
      if ((e as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE') return 'exists';
      throw e;
    }
  }

  private putSettings(id: number, s: ProxyUserSettings): void {
    stmt(
      this.db,
      `INSERT INTO user_limits (proxy_user_id, traffic_limit, max_connections, rate_limit, expires_at_ms, allow, deny) VALUES (?, ?, ?, ?, ?, ?, ?)
      ON CONFLICT (proxy_user_id) DO UPDATE SET traffic_limit = excluded.traffic_limit, max_connections = excluded.max_connections, rate_limit = excluded.rate_limit,
        expires_at_ms = excluded.expires_at_ms, allow = excluded.allow, deny = excluded.deny`,
    ).run(id, ...limitValues(s));
  }

  private detailById(id: number): ProxyUserDetail | null {
    const r = stmt<[number], DetailRow>(
      this.db,
      `SELECT ${DETAIL_COLUMNS} FROM proxy_users u LEFT JOIN user_limits l ON l.proxy_user_id = u.id WHERE u.id = ?`,
    ).get(id);
    return r ? toDetail(r) : null;
  }

  private detailByName(accountId: number, username: string): ProxyUserDetail | null {
    const r = stmt<[number, string], DetailRow>(
      this.db,
      `SELECT ${DETAIL_COLUMNS} FROM proxy_users u LEFT JOIN user_limits l ON l.proxy_user_id = u.id WHERE u.account_id = ? AND u.username = ?`,
    ).get(accountId, username);
    return r ? toDetail(r) : null;
  }

  async detail(accountId: number, username: string): Promise<ProxyUserDetail | null> {
    return this.detailByName(accountId, username);
  }

  async page(accountId: number, f: ProxyUserFilter): Promise<{ items: ProxyUserDetail[]; total: number }> {
    const where = ['u.account_id = ?'];
    const params: Array<string | number> = [accountId];
    if (f.status) {
      where.push('u.status = ?');
      params.push(f.status);
    }
    // An exact prefix: LIKE would read `_` and `%` in a name as patterns (and ignore case).
    if (f.prefix) {
      where.push('substr(u.username, 1, ?) = ?');
      params.push(f.prefix.length, f.prefix);
    }
    const w = where.join(' AND ');
    const total = stmt<unknown[], { n: number }>(this.db, `SELECT count(*) AS n FROM proxy_users u WHERE ${w}`).get(
      ...params,
    )!.n;
    const rows = stmt<unknown[], DetailRow>(
      this.db,
      `SELECT ${DETAIL_COLUMNS} FROM proxy_users u LEFT JOIN user_limits l ON l.proxy_user_id = u.id WHERE ${w} ORDER BY u.username LIMIT ? OFFSET ?`,
    ).all(...params, f.limit, f.offset);
    return { items: rows.map(toDetail), total };
  }

  async update(
    accountId: number,
    username: string,
    patch: ProxyUserPatch,
    audit?: AuditDraft,
  ): Promise<ProxyUserDetail | null> {
    return this.audit.audited(
      accountId,
      audit,
      () =>
        this.db.transaction(() => {
          const was = this.detailByName(accountId, username);
          if (!was) return null;
          if (patch.status !== undefined && patch.status !== was.status) {
            stmt(this.db, 'UPDATE proxy_users SET status = ?, updated_at = ? WHERE id = ?').run(
              patch.status,
              this.nowSec(),
              was.id,
            );
          }
          const next = patched(was, patch);
          // user_limits written only when a setting changes (each write moves the plan version: every node re-reads).
          if (touchesSettings(patch) && hasSettings(next)) this.putSettings(was.id, next);
          else if (touchesSettings(patch) && hasSettings(was))
            stmt(this.db, 'DELETE FROM user_limits WHERE proxy_user_id = ?').run(was.id);
          return this.detailById(was.id);
        })(),
      (found) => (found ? audit! : null),
    );
  }

  async get(id: number): Promise<ProxyUser | null> {
    return this.byId(id);
  }

  private byId(id: number): ProxyUser | null {
    return (
      stmt<[number], ProxyUser>(
        this.db,
        'SELECT id, account_id, username, status, created_at FROM proxy_users WHERE id = ?',
      ).get(id) ?? null
    );
  }

  async listForAccount(accountId: number): Promise<ProxyUser[]> {
    return stmt<[number], ProxyUser>(
      this.db,
      'SELECT id, account_id, username, status, created_at FROM proxy_users WHERE account_id = ? ORDER BY id DESC',
    ).all(accountId);
  }

  async setPassword(accountId: number, id: number, passwordHash: string, audit?: AuditDraft): Promise<boolean> {
    return this.audit.audited(
      accountId,
      audit,
      () =>
        stmt(this.db, 'UPDATE proxy_users SET password_hash = ?, updated_at = ? WHERE id = ? AND account_id = ?').run(
          passwordHash,
          this.nowSec(),
          id,
          accountId,
        ).changes === 1,
      (changed) => (changed ? audit! : null),
    );
  }

  async delete(accountId: number, id: number, audit?: AuditDraft): Promise<boolean> {
    return this.audit.audited(
      accountId,
      audit,
      () => stmt(this.db, 'DELETE FROM proxy_users WHERE id = ? AND account_id = ?').run(id, accountId).changes === 1,
      (changed) => (changed ? audit! : null),
    );
  }
}
