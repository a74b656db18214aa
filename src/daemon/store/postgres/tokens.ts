// API tokens and the one-call check of an API call (PostgreSQL).
import type { ApiCallVerdict, ApiCallCheck, ApiToken, ApiTokenWithAccount, AuditDraft, TokenStore } from '../types.js';
import { appendAudit, audited } from './audit.js';
import { guard, type Sql } from './db.js';
import { ADMIT_MS, unlessBusy, PgFamily } from './family.js';

/** What proxyd_api_admit answers; a page row is [id, ip, remark, status, created_at]. */
interface CallCheckRow {
  o_verdict: 'locked' | 'invalid' | 'limited' | 'ok';
  o_account: number | null;
  o_oldest: number | null;
  o_page: Array<[number, string, string, 1 | 2, number]> | null;
  o_total: number | null;
}

export class PgTokenStore extends PgFamily implements TokenStore {
  async findByAccessKey(accessKey: string): Promise<ApiTokenWithAccount | null> {
    const [t] = await guard(
      () => this.sql<ApiTokenWithAccount[]>`
        SELECT t.id, t.account_id, t.access_key, t.secret_hash, t.status, t.expires_at, t.created_at, a.status AS account_status
          FROM api_tokens t JOIN accounts a ON a.id = t.account_id WHERE t.access_key = ${accessKey}`,
    );
    return t ?? null;
  }

  async checkCall(q: ApiCallCheck): Promise<ApiCallVerdict | 'busy'> {
    const l = q.list;
    const r = await unlessBusy(
      () => this.sql<CallCheckRow[]>`
        SELECT o_verdict, o_account, o_oldest, o_page, o_total FROM proxyd_api_admit(${q.badKey}, ${q.badLimit}::int, ${q.accessKey}, ${q.secretHash},
          ${q.rateKey}, ${q.rateLimit}::int, ${q.windowMs}::bigint, ${q.nowMs}::bigint,
          ${l !== undefined}::boolean, ${l?.status ?? null}::smallint, ${l?.ip ?? null}::text, ${l?.limit ?? 0}::int, ${l?.offset ?? 0}::int)`,
      ADMIT_MS,
    );
    if (r === 'busy') return r;
    const row = r[0]!;
    if (row.o_verdict === 'ok') {
      const out: ApiCallVerdict = { kind: 'ok', accountId: row.o_account!, accessKey: q.accessKey };
      if (l !== undefined && row.o_page !== null) {
        const accountId = row.o_account!;
        out.page = {
          items: row.o_page.map(([id, ip, remark, status, created_at]) => ({
            id,
            account_id: accountId,
            ip,
            remark,
            status,
            created_at,
          })),
          total: row.o_total ?? 0,
        };
      }
      return out;
    }
    if (row.o_verdict === 'invalid') return { kind: 'invalid' };
    return { kind: row.o_verdict, oldestAtMs: row.o_oldest };
  }

  async activeToken(accountId: number): Promise<ApiToken | null> {
    const [t] = await guard(
      () => this.sql<ApiToken[]>`
        SELECT id, account_id, access_key, secret_hash, status, expires_at, created_at
          FROM api_tokens WHERE account_id = ${accountId} AND status = 'active' ORDER BY id DESC LIMIT 1`,
    );
    return t ?? null;
  }

  async replace(
    accountId: number,
    accessKey: string,
    secretHash: Buffer,
    expiresAt: number | null = null,
    audit?: AuditDraft,
  ): Promise<void> {
    const now = this.nowSec();
    await guard(() =>
      this.sql.begin(async (tx) => {
        // The account row lock serialises two resets of one account: exactly one token stays active.
        await tx`SELECT 1 FROM accounts WHERE id = ${accountId} FOR UPDATE`;
        await tx`UPDATE api_tokens SET status = 'disabled' WHERE account_id = ${accountId} AND status = 'active'`;
        await tx`INSERT INTO api_tokens (account_id, access_key, secret_hash, status, expires_at, created_at)
                 VALUES (${accountId}, ${accessKey}, ${secretHash}, 'active', ${expiresAt}, ${now})`;
        if (audit) await appendAudit(tx as unknown as Sql, this.nowMs(), { ...audit, accountId });
      }),
    );
  }

  async disable(accountId: number, audit?: AuditDraft): Promise<string | null> {
    const rows = await audited(
      this.sql,
      this.nowMs,
      accountId,
      audit,
      (q) => q<{ access_key: string }[]>`
        UPDATE api_tokens SET status = 'disabled'
         WHERE id = (SELECT id FROM api_tokens WHERE account_id = ${accountId} AND status = 'active' ORDER BY id DESC LIMIT 1 FOR UPDATE)
        RETURNING access_key`,
      (r) => (r[0] ? { ...audit!, target: audit!.target ?? r[0].access_key } : null),
    );
    return rows[0]?.access_key ?? null;
  }
}
