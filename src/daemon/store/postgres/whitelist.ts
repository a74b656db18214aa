// Whitelist entries and the global IP claims (PostgreSQL): claims and releases are server-side functions.
import { batchRecord } from '../audit-sql.js';
import type {
  AuditDraft,
  ClaimOutcome,
  Inconsistencies,
  ListFilter,
  ReleaseOutcome,
  Repairs,
  WhitelistEntry,
  WhitelistStore,
} from '../types.js';
import { audited } from './audit.js';
import { guard, type Sql } from './db.js';
import { type NowSec, BATCH_MS, START_CHECK_MS, unlessBusy, PgFamily } from './family.js';

export class PgWhitelistStore extends PgFamily implements WhitelistStore {
  constructor(
    sql: Sql,
    nowSec: NowSec,
    private readonly releaseGraceSec: number,
    /** The background lane (db.ts): a batch holds its connection for tens of ms and must not hold up calls. */
    private readonly background: Sql,
    nowMs: () => number,
  ) {
    super(sql, nowSec, nowMs);
  }

  async claimIp(accountId: number, ip: string, remark: string): Promise<ClaimOutcome> {
    const r = await unlessBusy(
      () => this.sql<{ r: ClaimOutcome }[]>`
        SELECT proxyd_claim_ip(${accountId}::int, ${ip}, ${remark}, ${this.nowSec()}::bigint, ${this.releaseGraceSec}::bigint, NULL::int) AS r`,
    );
    return r === 'busy' ? r : r[0]!.r;
  }

  async claimIps(
    accountId: number,
    items: ReadonlyArray<{ ip: string; remark: string }>,
    audit?: AuditDraft,
  ): Promise<ClaimOutcome[]> {
    if (items.length === 0) return [];
    const payload = JSON.stringify(items.map((i) => [i.ip, i.remark]));
    if (audit) {
      const grace = this.releaseGraceSec;
      return this.withRecord(
        accountId,
        audit,
        items.map((i) => i.ip),
        'added',
        (q, now) =>
          q<
            { outcomes: ClaimOutcome[] }[]
          >`SELECT proxyd_claim_items(${accountId}::int, ${payload}::text::jsonb, ${now}::bigint, ${grace}::bigint) AS outcomes`,
      );
    }
    const [row] = await guard(
      () => this.background<{ outcomes: ClaimOutcome[] }[]>`
        CALL proxyd_claim_batch(${accountId}::int, ${payload}::text::jsonb, ${this.nowSec()}::bigint, ${this.releaseGraceSec}::bigint, NULL)`,
      BATCH_MS,
    );
    return row!.outcomes;
  }

  async releaseIps(accountId: number, ips: readonly string[], audit?: AuditDraft): Promise<ReleaseOutcome[]> {
    if (ips.length === 0) return [];
    if (audit) {
      const payload = JSON.stringify(ips);
      return this.withRecord(
        accountId,
        audit,
        ips,
        'deleted',
        (q, now) =>
          q<
            { outcomes: ReleaseOutcome[] }[]
          >`SELECT proxyd_release_items(${accountId}::int, ${payload}::text::jsonb, ${now}::bigint) AS outcomes`,
      );
    }
    const [row] = await guard(
      () => this.background<{ outcomes: ReleaseOutcome[] }[]>`
        CALL proxyd_release_batch(${accountId}::int, ${JSON.stringify(ips)}::text::jsonb, ${this.nowSec()}::bigint, NULL)`,
      BATCH_MS,
    );
    return row!.outcomes;
  }

  /** A batch with its record: one transaction, each item in a subtransaction (migration 20), the record last. */
  private async withRecord<T extends string>(
    accountId: number,
    audit: AuditDraft,
    ips: readonly string[],
    done: T,
    call: (q: Sql, nowSec: number) => Promise<ReadonlyArray<{ outcomes: T[] }>>,
  ): Promise<T[]> {
    const [row] = await audited(
      this.background,
      this.nowMs,
      accountId,
      audit,
      (q) => call(q, this.nowSec()),
      (r) => batchRecord(audit, ips, r[0]!.outcomes, done),
      BATCH_MS,
    );
    return row!.outcomes;
  }

  async releaseClaim(accountId: number, ip: string): Promise<ReleaseOutcome> {
    const r = await unlessBusy(
      () =>
        this.sql<
          { r: ReleaseOutcome }[]
        >`SELECT proxyd_release_ip(${accountId}::int, ${ip}, ${this.nowSec()}::bigint) AS r`,
    );
    return r === 'busy' ? r : r[0]!.r;
  }

  async list(accountId: number, f: ListFilter): Promise<{ items: WhitelistEntry[]; total: number }> {
    const sql = this.sql;
    const status = f.status ?? null;
    const ip = f.ip ?? null;
    // One statement text for every filter (no fragments built per call): the page and the total together;
    // a page past the end has no row to carry the total.
    const rows = await guard(
      () => sql<Array<WhitelistEntry & { total: number }>>`
        SELECT id, account_id, ip, remark, status, created_at, count(*) OVER ()::int AS total FROM whitelist_entries
         WHERE account_id = ${accountId} AND deleted_at IS NULL AND (${status}::smallint IS NULL OR status = ${status}::smallint)
           AND (${ip}::text IS NULL OR ip = ${ip}::text)
         ORDER BY created_at DESC, id DESC LIMIT ${f.limit} OFFSET ${f.offset}`,
    );
    if (rows.length === 0 && f.offset > 0) {
      const [c] = await guard(
        () => sql<{ n: number }[]>`
          SELECT count(*)::int AS n FROM whitelist_entries
           WHERE account_id = ${accountId} AND deleted_at IS NULL AND (${status}::smallint IS NULL OR status = ${status}::smallint)
             AND (${ip}::text IS NULL OR ip = ${ip}::text)`,
      );
      return { items: [], total: c!.n };
    }
    const total = rows[0]?.total ?? 0;
    const items: WhitelistEntry[] = [];
    for (const r of rows)
      items.push({
        id: r.id,
        account_id: r.account_id,
        ip: r.ip,
        remark: r.remark,
        status: r.status,
        created_at: r.created_at,
      });
    return { items, total };
  }

  async setStatus(accountId: number, ip: string, status: 1 | 2, audit?: AuditDraft): Promise<WhitelistEntry | null> {
    const [e] = await audited(
      this.sql,
      this.nowMs,
      accountId,
      audit,
      (q) => q<WhitelistEntry[]>`
        UPDATE whitelist_entries SET status = ${status} WHERE account_id = ${accountId} AND ip = ${ip} AND deleted_at IS NULL
        RETURNING id, account_id, ip, remark, status, created_at`,
      (r) => (r.length ? audit! : null),
    );
    return e ?? null;
  }

  async inconsistencies(): Promise<Inconsistencies> {
    const [r] = await guard(
      () =>
        this.sql.begin(async (tx) => {
          await tx`SELECT set_config('statement_timeout', ${String(START_CHECK_MS)}, true)`;
          return tx<Inconsistencies[]>`
        SELECT
          (SELECT count(*)::int FROM ip_claims c WHERE c.state = 'held' AND NOT EXISTS
             (SELECT 1 FROM whitelist_entries e WHERE e.ip = c.ip AND e.account_id = c.account_id AND e.deleted_at IS NULL)) AS "claimsWithoutEntry",
          (SELECT count(*)::int FROM whitelist_entries e WHERE e.deleted_at IS NULL AND NOT EXISTS
             (SELECT 1 FROM ip_claims c WHERE c.ip = e.ip AND c.account_id = e.account_id AND c.state = 'held')) AS "entriesWithoutClaim"`;
        }),
      START_CHECK_MS,
    );
    return r!;
  }

  async repair(): Promise<Repairs> {
    const now = this.nowSec();
    return guard(
      () =>
        this.sql.begin(async (tx) => {
          await tx`SELECT set_config('statement_timeout', ${String(START_CHECK_MS)}, true)`;
          const released = await tx`
            DELETE FROM ip_claims WHERE state = 'held' AND NOT EXISTS
              (SELECT 1 FROM whitelist_entries e WHERE e.ip = ip_claims.ip AND e.account_id = ip_claims.account_id AND e.deleted_at IS NULL)`;
          const restored = await tx`
            INSERT INTO ip_claims (ip, account_id, state, releasing_since, version)
            SELECT e.ip, e.account_id, 'held', NULL, e.claim_version FROM whitelist_entries e
             WHERE e.deleted_at IS NULL AND NOT EXISTS (SELECT 1 FROM ip_claims c WHERE c.ip = e.ip)
            ON CONFLICT (ip) DO NOTHING`;
          const removed = await tx`
            UPDATE whitelist_entries SET deleted_at = ${now} WHERE deleted_at IS NULL AND NOT EXISTS
              (SELECT 1 FROM ip_claims c WHERE c.ip = whitelist_entries.ip AND c.account_id = whitelist_entries.account_id AND c.state = 'held')`;
          return { claimsReleased: released.count, claimsRestored: restored.count, entriesRemoved: removed.count };
        }),
      START_CHECK_MS,
    );
  }
}
