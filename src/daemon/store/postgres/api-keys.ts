// api_keys (migration 21): made and revoked with their audit records in one transaction; read per request, so a
// revocation committed by any node (or `proxyd admin key revoke`) refuses the key on every node's next request.
import { apiKeyInfo, API_KEY_COLUMNS, type ApiKeyDbRow } from '../api-keys-sql.js';
import type {
  ApiKeyInfo,
  ApiKeyStore,
  ApiKeyWithAccount,
  AuditDraft,
  KeyCallCheck,
  KeyCallVerdict,
  NewApiKey,
} from '../types.js';
import { appendAudit, audited } from './audit.js';
import { guard, type Sql } from './db.js';
import { ADMIT_MS, PgFamily, unlessBusy } from './family.js';

export class PgApiKeyStore extends PgFamily implements ApiKeyStore {
  async checkCall(q: KeyCallCheck): Promise<KeyCallVerdict | 'busy'> {
    const r = await unlessBusy(
      () => this.sql<
        Array<{
          o_verdict: 'locked' | 'invalid' | 'scope' | 'limited' | 'ok';
          o_account: number | null;
          o_scopes: string | null;
          o_oldest: number | null;
        }>
      >`
        SELECT o_verdict, o_account, o_scopes, o_oldest FROM proxyd_key_admit(${q.badKey}, ${q.badLimit}::int, ${q.keyId}, ${q.secretHash}, ${q.source},
          ${q.scope}, ${q.rateKey}, ${q.rateLimit}::int, ${q.rate2Key}, ${q.rate2Limit}::int, ${q.windowMs}::bigint, ${q.nowMs}::bigint)`,
      ADMIT_MS,
    );
    if (r === 'busy') return r;
    const row = r[0]!;
    if (row.o_verdict === 'locked') return { kind: 'locked', oldestAtMs: row.o_oldest };
    if (row.o_verdict === 'invalid') return { kind: 'invalid' };
    const key = { keyId: q.keyId, accountId: row.o_account!, scopes: row.o_scopes ? row.o_scopes.split(',') : [] };
    if (row.o_verdict === 'limited') return { kind: 'limited', ...key, oldestAtMs: row.o_oldest };
    return { kind: row.o_verdict, ...key };
  }

  async create(k: NewApiKey, max: number, audit?: AuditDraft): Promise<ApiKeyInfo | 'too_many' | 'exists'> {
    const now = this.nowSec();
    return guard(
      () =>
        this.sql.begin(async (tx) => {
          // The account row lock serialises two creations of one account's keys: the limit holds.
          await tx`SELECT 1 FROM accounts WHERE id = ${k.accountId} FOR UPDATE`;
          const [c] = await tx<{ n: number }[]>`
            SELECT count(*)::int AS n FROM api_keys WHERE account_id = ${k.accountId} AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ${now})`;
          if (c!.n >= max) return 'too_many' as const;
          const rows = await tx<ApiKeyDbRow[]>`
            INSERT INTO api_keys (id, account_id, name, scopes, secret_hash, created_at, expires_at, allowed_ips)
            VALUES (${k.id}, ${k.accountId}, ${k.name}, ${k.scopes.join(',')}, ${k.secretHash}, ${now}, ${k.expiresAt}, ${k.allowedIps.join(',')})
            ON CONFLICT (id) DO NOTHING
            RETURNING ${tx.unsafe(API_KEY_COLUMNS)}`;
          if (!rows[0]) return 'exists' as const;
          if (audit) await appendAudit(tx as unknown as Sql, this.nowMs(), { ...audit, accountId: k.accountId });
          return apiKeyInfo(rows[0]);
        }) as Promise<ApiKeyInfo | 'too_many' | 'exists'>,
    );
  }

  async forAuth(id: string): Promise<ApiKeyWithAccount | null> {
    const [r] = await guard(
      () => this.sql<Array<ApiKeyDbRow & { secret_hash: Buffer; account_status: ApiKeyWithAccount['account_status'] }>>`
        SELECT k.id, k.account_id, k.name, k.scopes, k.created_at, k.expires_at, k.allowed_ips, k.revoked_at, k.last_used_at, k.last_used_ip,
               k.secret_hash, a.status AS account_status
          FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.id = ${id}`,
    );
    return r ? { ...apiKeyInfo(r), secret_hash: r.secret_hash, account_status: r.account_status } : null;
  }

  async list(accountId: number): Promise<ApiKeyInfo[]> {
    const rows = await guard(
      () =>
        this.sql<
          ApiKeyDbRow[]
        >`SELECT ${this.sql.unsafe(API_KEY_COLUMNS)} FROM api_keys WHERE account_id = ${accountId} ORDER BY created_at DESC, id`,
    );
    return rows.map(apiKeyInfo);
  }

  async revoke(accountId: number, id: string, audit?: AuditDraft): Promise<ApiKeyInfo | null> {
    const now = this.nowSec();
    const rows = await audited(
      this.sql,
      this.nowMs,
      accountId,
      audit,
      (q) => q<ApiKeyDbRow[]>`
        UPDATE api_keys SET revoked_at = ${now} WHERE id = ${id} AND account_id = ${accountId} AND revoked_at IS NULL
        RETURNING ${q.unsafe(API_KEY_COLUMNS)}`,
      (r) => (r[0] ? audit! : null),
    );
    return rows[0] ? apiKeyInfo(rows[0]) : null;
  }

  async touch(id: string, atSec: number, ip: string): Promise<void> {
    await guard(
      () =>
        this
          .sql`UPDATE api_keys SET last_used_at = ${atSec}, last_used_ip = ${ip} WHERE id = ${id} AND (last_used_at IS NULL OR last_used_at <= ${atSec})`,
    );
  }
}
