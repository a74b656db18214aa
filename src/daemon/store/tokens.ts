// api_tokens: access key, SHA-256 of the secret (the secret is 256 random bits, so a fast hash is enough), status, expiry.
import type { Db } from './db.js';
import { stmt } from './statements.js';

export interface TokenRow {
  id: number;
  account_id: number;
  access_key: string;
  secret_hash: Buffer;
  status: 'active' | 'disabled';
  expires_at: number | null;
  created_at: number;
}

export interface TokenWithAccount extends TokenRow {
  account_status: string;
}

export class TokenStore {
  private readonly byAccessKey;
  private readonly activeForAccount;
  constructor(
    private readonly db: Db,
    private readonly nowSec: () => number,
  ) {
    this.byAccessKey = stmt<[string], TokenWithAccount>(db,
      'SELECT t.*, a.status AS account_status FROM api_tokens t JOIN accounts a ON a.id = t.account_id WHERE t.access_key = ?',
    );
    this.activeForAccount = stmt<[number], TokenRow>(db,
      "SELECT * FROM api_tokens WHERE account_id = ? AND status = 'active' ORDER BY id DESC LIMIT 1",
    );
  }

  findByAccessKey(accessKey: string): TokenWithAccount | null {
    return this.byAccessKey.get(accessKey) ?? null;
  }

  activeToken(accountId: number): TokenRow | null {
    return this.activeForAccount.get(accountId) ?? null;
  }

  /** Disables every active token of the account and stores the new one, atomically. */
  replace(accountId: number, accessKey: string, secretHash: Buffer, expiresAt: number | null = null): void {
    this.db.transaction(() => {
      stmt(this.db, "UPDATE api_tokens SET status = 'disabled' WHERE account_id = ? AND status = 'active'").run(accountId);
      stmt(this.db, "INSERT INTO api_tokens (account_id, access_key, secret_hash, status, expires_at, created_at) VALUES (?, ?, ?, 'active', ?, ?)")
        .run(accountId, accessKey, secretHash, expiresAt, this.nowSec());
    }).immediate();
  }

  /** Disables the active token; returns its access key, or null when there was none. */
  disable(accountId: number): string | null {
    return this.db.transaction(() => {
      const t = this.activeForAccount.get(accountId);
      if (!t) return null;
      stmt(this.db, "UPDATE api_tokens SET status = 'disabled' WHERE id = ?").run(t.id);
      return t.access_key;
    }).immediate();
  }
}
