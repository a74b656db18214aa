// target_rules (migration 10): an account's deny and allow lists; account 0 holds the service's.
import { joinItems, splitItems } from '../target-rules-sql.js';
import type { AuditDraft, TargetRulesStore } from '../types.js';
import type { SqliteAuditLog } from './audit.js';
import type { Db } from './db.js';
import { stmt } from './statements.js';

export class SqliteTargetRulesStore implements TargetRulesStore {
  constructor(
    private readonly db: Db,
    private readonly nowSec: () => number,
    private readonly audit: SqliteAuditLog,
  ) {}

  async get(accountId: number): Promise<{ deny: string[]; allow: string[] }> {
    const r = stmt<[number], { deny: string; allow: string }>(
      this.db,
      'SELECT deny, allow FROM target_rules WHERE account_id = ?',
    ).get(accountId);
    return { deny: splitItems(r?.deny ?? ''), allow: splitItems(r?.allow ?? '') };
  }

  async set(
    accountId: number,
    rules: { deny: readonly string[]; allow: readonly string[] },
    audit?: AuditDraft,
  ): Promise<void> {
    this.audit.audited(accountId, audit, () => this.write(accountId, rules));
  }

  private write(accountId: number, rules: { deny: readonly string[]; allow: readonly string[] }): void {
    if (rules.deny.length === 0 && rules.allow.length === 0) {
      stmt<[number]>(this.db, 'DELETE FROM target_rules WHERE account_id = ?').run(accountId);
      return;
    }
    stmt(
      this.db,
      `INSERT INTO target_rules (account_id, deny, allow, updated_at) VALUES (?, ?, ?, ?)
      ON CONFLICT (account_id) DO UPDATE SET deny = excluded.deny, allow = excluded.allow, updated_at = excluded.updated_at`,
    ).run(accountId, joinItems(rules.deny), joinItems(rules.allow), this.nowSec());
  }
}
