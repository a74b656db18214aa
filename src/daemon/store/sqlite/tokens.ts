// api_tokens: access key, SHA-256 of the secret (the secret is 256 random bits, so a fast hash is enough), status, expiry.
import type {
  ApiToken as TokenRow,
  ApiTokenWithAccount as TokenWithAccount,
  AuditDraft,
  TokenStore,
} from '../types.js';
import type { SqliteAuditLog } from './audit.js';
import type { Db } from './db.js';
import { stmt } from './statements.js';

export class SqliteTokenStore implements TokenStore {
  private readonly byAccessKey;
  private readonly activeForAccount;
  constructor(
    private readonly db: Db,
    private readonly nowSec: () => number,
    private readonly audit: SqliteAuditLog,
  ) {
    this.byAccessKey = stmt<[string], TokenWithAccount>(
      db,
      'SELECT t.*, a.status AS account_status FROM api_tokens t JOIN accounts a ON a.id = t.account_id WHERE t.access_key = ?',
    );
    this.activeForAccount = stmt<[number], TokenRow>(
      db,
      "SELECT * FROM api_tokens WHERE account_id = ? AND status = 'active' ORDER BY id DESC LIMIT 1",
    );
  }

  async findByAccessKey(accessKey: string): Promise<TokenWithAccount | null> {
    return this.byAccessKey.get(accessKey) ?? null;
  }

  async activeToken(accountId: number): Promise<TokenRow | null> {
    return this.activeForAccount.get(accountId) ?? null;
  }

  async replace(
    accountId: number,
    accessKey: string,
    secretHash: Buffer,
    expiresAt: number | null = null,
    audit?: AuditDraft,
  ): Promise<void> {
    this.db
      .transaction(() => {
        stmt(this.db, "UPDATE api_tokens SET status = 'disabled' WHERE account_id = ? AND status = 'active'").run(
          accountId,
        );
        stmt(
          this.db,
          "INSERT INTO api_tokens (account_id, access_key, secret_hash, status, expires_at, created_at) VALUES (?, ?, ?, 'active', ?, ?)",
        ).run(accountId, accessKey, secretHash, expiresAt, this.nowSec());
        if (audit) this.audit.write({ ...audit, accountId });
      })
      .immediate();
  }

  async disable(accountId: number, audit?: AuditDraft): Promise<string | null> {
    return this.db
      .transaction(() => {
        const t = this.activeForAccount.get(accountId);
        if (!t) return null;
        stmt(this.db, "UPDATE api_tokens SET status = 'disabled' WHERE id = ?").run(t.id);
        if (audit) this.audit.write({ ...audit, accountId, target: audit.target ?? t.access_key });
        return t.access_key;
      })
      .immediate();
  }
}
