// api_keys (migration 17): made and revoked with their audit records in one transaction; read per request.
import { apiKeyInfo, API_KEY_COLUMNS, type ApiKeyDbRow } from '../api-keys-sql.js';
import type { ApiKeyInfo, ApiKeyStore, ApiKeyWithAccount, AuditDraft, NewApiKey } from '../types.js';
import type { SqliteAuditLog } from './audit.js';
import type { Db } from './db.js';
import { stmt } from './statements.js';

export class SqliteApiKeyStore implements ApiKeyStore {
  constructor(
    private readonly db: Db,
    private readonly nowSec: () => number,
    private readonly audit: SqliteAuditLog,
    /** A connection that never waits for a lock: a use's record is worth no stall of the event loop. */
    private readonly noWait: () => Db,
  ) {}

  async create(k: NewApiKey, max: number, audit?: AuditDraft): Promise<ApiKeyInfo | 'too_many' | 'exists'> {
    const now = this.nowSec();
    return this.db
      .transaction((): ApiKeyInfo | 'too_many' | 'exists' => {
        const live = stmt<[number, number], { n: number }>(
          this.db,
          'SELECT count(*) AS n FROM api_keys WHERE account_id = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)',
        ).get(k.accountId, now)!.n;
        if (live >= max) return 'too_many';
        if (stmt<[string], { id: string }>(this.db, 'SELECT id FROM api_keys WHERE id = ?').get(k.id)) return 'exists';
        stmt(
          this.db,
          'INSERT INTO api_keys (id, account_id, name, scopes, secret_hash, created_at, expires_at, allowed_ips) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
        ).run(k.id, k.accountId, k.name, k.scopes.join(','), k.secretHash, now, k.expiresAt, k.allowedIps.join(','));
        if (audit) this.audit.write({ ...audit, accountId: k.accountId });
        return apiKeyInfo(
          stmt<[string], ApiKeyDbRow>(this.db, `SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE id = ?`).get(k.id)!,
        );
      })
      .immediate();
  }

  async forAuth(id: string): Promise<ApiKeyWithAccount | null> {
    const r = stmt<
      [string],
      ApiKeyDbRow & { secret_hash: Buffer; account_status: ApiKeyWithAccount['account_status'] }
    >(
      this.db,
      `SELECT k.id, k.account_id, k.name, k.scopes, k.created_at, k.expires_at, k.allowed_ips, k.revoked_at, k.last_used_at, k.last_used_ip,
              k.secret_hash, a.status AS account_status
         FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.id = ?`,
    ).get(id);
    return r ? { ...apiKeyInfo(r), secret_hash: r.secret_hash, account_status: r.account_status } : null;
  }

  async list(accountId: number): Promise<ApiKeyInfo[]> {
    return stmt<[number], ApiKeyDbRow>(
      this.db,
      `SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE account_id = ? ORDER BY created_at DESC, id`,
    )
      .all(accountId)
      .map(apiKeyInfo);
  }

  async revoke(accountId: number, id: string, audit?: AuditDraft): Promise<ApiKeyInfo | null> {
    const now = this.nowSec();
    return this.audit.audited(
      accountId,
      audit,
      () => {
        const r = stmt<[number, string, number], ApiKeyDbRow>(
          this.db,
          `UPDATE api_keys SET revoked_at = ? WHERE id = ? AND account_id = ? AND revoked_at IS NULL RETURNING ${API_KEY_COLUMNS}`,
        ).get(now, id, accountId) as ApiKeyDbRow | undefined;
        return r ? apiKeyInfo(r) : null;
      },
      (r) => (r ? audit! : null),
    );
  }

  async touch(id: string, atSec: number, ip: string): Promise<void> {
    // Busy (another process writing): this use goes unrecorded; the next one a minute on records itself.
    stmt(
      this.noWait(),
      'UPDATE api_keys SET last_used_at = ?, last_used_ip = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at <= ?)',
    ).run(atSec, ip, id, atSec);
  }
}
