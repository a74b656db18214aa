// target_rules on PostgreSQL (migration 13): the same rows as SQLite's.
import { joinItems, splitItems } from '../target-rules-sql.js';
import type { AuditDraft, TargetRulesStore } from '../types.js';
import { audited } from './audit.js';
import { guard } from './db.js';
import { PgFamily } from './family.js';

export class PgTargetRulesStore extends PgFamily implements TargetRulesStore {
  async get(accountId: number): Promise<{ deny: string[]; allow: string[] }> {
    const [r] = await guard(
      () =>
        this.sql<
          { deny: string; allow: string }[]
        >`SELECT deny, allow FROM target_rules WHERE account_id = ${accountId}`,
    );
    return { deny: splitItems(r?.deny ?? ''), allow: splitItems(r?.allow ?? '') };
  }

  async set(
    accountId: number,
    rules: { deny: readonly string[]; allow: readonly string[] },
    audit?: AuditDraft,
  ): Promise<void> {
    if (rules.deny.length === 0 && rules.allow.length === 0) {
      await audited(
        this.sql,
        this.nowMs,
        accountId,
        audit,
        (q) => q`DELETE FROM target_rules WHERE account_id = ${accountId}`,
      );
      return;
    }
    await audited(
      this.sql,
      this.nowMs,
      accountId,
      audit,
      (q) => q`
      INSERT INTO target_rules (account_id, deny, allow, updated_at) VALUES (${accountId}, ${joinItems(rules.deny)}, ${joinItems(rules.allow)}, ${this.nowSec()})
      ON CONFLICT (account_id) DO UPDATE SET deny = excluded.deny, allow = excluded.allow, updated_at = excluded.updated_at`,
    );
  }
}
