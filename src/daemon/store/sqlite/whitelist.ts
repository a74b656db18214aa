// whitelist_entries + ip_claims: each item is claimed and recorded in its own IMMEDIATE transaction,
// so two accounts (or two processes) racing for one IP always leave exactly one owner.
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
import type { SqliteAuditLog } from './audit.js';
import { isBusyError, type Db } from './db.js';
import { stmt } from './statements.js';

interface ClaimRow {
  ip: string;
  account_id: number;
  state: 'held' | 'releasing';
  releasing_since: number | null;
  version: number;
}

export class SqliteWhitelistStore implements WhitelistStore {
  private readonly claimOf;
  private readonly insertClaim;
  private readonly takeOverClaim;
  private readonly insertEntry;
  private readonly liveEntry;
  private readonly softDelete;
  private readonly dropClaim;
  private readonly claimTx;
  private readonly releaseTx;

  constructor(
    private readonly db: Db,
    private readonly nowSec: () => number,
    /** Seconds an IP of a closed account stays "being released". */
    private readonly releaseGraceSec: () => number,
    private readonly audit: SqliteAuditLog,
  ) {
    this.claimOf = stmt<[string], ClaimRow>(db, 'SELECT * FROM ip_claims WHERE ip = ?');
    this.insertClaim = stmt(
      db,
      "INSERT INTO ip_claims (ip, account_id, state, releasing_since, version) VALUES (?, ?, 'held', NULL, 1)",
    );
    this.takeOverClaim = stmt(
      db,
      "UPDATE ip_claims SET account_id = ?, state = 'held', releasing_since = NULL, version = version + 1 WHERE ip = ? AND version = ?",
    );
    this.insertEntry = stmt(
      db,
      'INSERT INTO whitelist_entries (account_id, ip, remark, status, created_at, deleted_at, claim_version) VALUES (?, ?, ?, 1, ?, NULL, ?)',
    );
    this.liveEntry = stmt<[number, string], { id: number }>(
      db,
      'SELECT id FROM whitelist_entries WHERE account_id = ? AND ip = ? AND deleted_at IS NULL',
    );
    this.softDelete = stmt(db, 'UPDATE whitelist_entries SET deleted_at = ? WHERE id = ?');
    this.dropClaim = stmt(db, 'DELETE FROM ip_claims WHERE ip = ? AND account_id = ?');

    this.claimTx = db.transaction((accountId: number, ip: string, remark: string): Exclude<ClaimOutcome, 'busy'> => {
      const now = this.nowSec();
      const claim = this.claimOf.get(ip);
      let version = 1;
      if (claim) {
        if (claim.state === 'held') return claim.account_id === accountId ? 'already_listed' : 'unavailable';
        const freeAt = (claim.releasing_since ?? 0) + this.releaseGraceSec();
        if (now < freeAt) return 'unavailable';
        this.takeOverClaim.run(accountId, ip, claim.version);
        version = claim.version + 1;
      } else {
        this.insertClaim.run(ip, accountId);
      }
      this.insertEntry.run(accountId, ip, remark, now, version);
      return 'added';
    });

    this.releaseTx = db.transaction((accountId: number, ip: string): Exclude<ReleaseOutcome, 'busy'> => {
      const entry = this.liveEntry.get(accountId, ip);
      if (!entry) return 'absent';
      this.softDelete.run(this.nowSec(), entry.id);
      this.dropClaim.run(ip, accountId);
      return 'deleted';
    });
  }

  async claimIp(accountId: number, ip: string, remark: string): Promise<ClaimOutcome> {
    try {
      return this.claimTx.immediate(accountId, ip, remark);
    } catch (e) {
      if (isBusyError(e)) return 'busy';
      throw e;
    }
  }

  async claimIps(
    accountId: number,
    items: ReadonlyArray<{ ip: string; remark: string }>,
    audit?: AuditDraft,
  ): Promise<ClaimOutcome[]> {
    if (audit)
      return this.batchWithRecord(
        accountId,
        items.map((i) => i.ip),
        (k) => this.claimTx(accountId, items[k]!.ip, items[k]!.remark),
        'added',
        audit,
      );
    const out: ClaimOutcome[] = [];
    for (const item of items) out.push(await this.claimIp(accountId, item.ip, item.remark));
    return out;
  }

  async releaseIps(accountId: number, ips: readonly string[], audit?: AuditDraft): Promise<ReleaseOutcome[]> {
    if (audit) return this.batchWithRecord(accountId, ips, (k) => this.releaseTx(accountId, ips[k]!), 'deleted', audit);
    const out: ReleaseOutcome[] = [];
    for (const ip of ips) out.push(await this.releaseClaim(accountId, ip));
    return out;
  }

  /** A batch and its one record in one IMMEDIATE transaction, each item in a savepoint of it (its own transaction function, nested). */
  private batchWithRecord<T extends string>(
    accountId: number,
    ips: readonly string[],
    item: (k: number) => T,
    done: T,
    audit: AuditDraft,
  ): T[] {
    try {
      return this.audit.audited(
        accountId,
        audit,
        () => ips.map((_, k) => item(k)),
        (outcomes) => batchRecord(audit, ips, outcomes, done),
      );
    } catch (e) {
      if (isBusyError(e)) return ips.map(() => 'busy' as T);
      throw e;
    }
  }

  async releaseClaim(accountId: number, ip: string): Promise<ReleaseOutcome> {
    try {
      return this.releaseTx.immediate(accountId, ip);
    } catch (e) {
      if (isBusyError(e)) return 'busy';
      throw e;
    }
  }

  async list(accountId: number, f: ListFilter): Promise<{ items: WhitelistEntry[]; total: number }> {
    const where = ['account_id = ?', 'deleted_at IS NULL'];
    const params: Array<string | number> = [accountId];
    if (f.status !== undefined) {
      where.push('status = ?');
      params.push(f.status);
    }
    if (f.ip !== undefined) {
      where.push('ip = ?');
      params.push(f.ip);
    }
    const w = where.join(' AND ');
    const total = stmt<unknown[], { n: number }>(this.db, `SELECT COUNT(*) AS n FROM whitelist_entries WHERE ${w}`).get(
      ...params,
    )!.n;
    // Newest first; id breaks ties between entries made in the same second, so paging is stable.
    const items = stmt<unknown[], WhitelistEntry>(
      this.db,
      `SELECT id, account_id, ip, remark, status, created_at FROM whitelist_entries WHERE ${w} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`,
    ).all(...params, f.limit, f.offset);
    return { items, total };
  }

  private live(accountId: number, ip: string): WhitelistEntry | null {
    return (
      stmt<[number, string], WhitelistEntry>(
        this.db,
        'SELECT id, account_id, ip, remark, status, created_at FROM whitelist_entries WHERE account_id = ? AND ip = ? AND deleted_at IS NULL',
      ).get(accountId, ip) ?? null
    );
  }

  async setStatus(accountId: number, ip: string, status: 1 | 2, audit?: AuditDraft): Promise<WhitelistEntry | null> {
    return this.audit.audited(
      accountId,
      audit,
      () => {
        const changed = stmt(
          this.db,
          'UPDATE whitelist_entries SET status = ? WHERE account_id = ? AND ip = ? AND deleted_at IS NULL',
        ).run(status, accountId, ip).changes;
        return changed ? this.live(accountId, ip) : null;
      },
      (e) => (e ? audit! : null),
    );
  }

  async inconsistencies(): Promise<Inconsistencies> {
    const claimsWithoutEntry = stmt<[], { n: number }>(
      this.db,
      `SELECT COUNT(*) AS n FROM ip_claims c WHERE c.state = 'held' AND NOT EXISTS
           (SELECT 1 FROM whitelist_entries e WHERE e.ip = c.ip AND e.account_id = c.account_id AND e.deleted_at IS NULL)`,
    ).get()!.n;
    const entriesWithoutClaim = stmt<[], { n: number }>(
      this.db,
      `SELECT COUNT(*) AS n FROM whitelist_entries e WHERE e.deleted_at IS NULL AND NOT EXISTS
           (SELECT 1 FROM ip_claims c WHERE c.ip = e.ip AND c.account_id = e.account_id AND c.state = 'held')`,
    ).get()!.n;
    return { claimsWithoutEntry, entriesWithoutClaim };
  }

  /**
   * Start-up repair after a crash or a hand edit (none is expected: each item is one transaction).
   * The claim is the owner of record: a held claim with no live entry is released (the add never
   * completed); a live entry with no claim gets its claim back if the IP is unclaimed, else it is
   * soft-deleted (someone else owns the IP). One transaction.
   */
  async repair(): Promise<Repairs> {
    return this.db
      .transaction(() => {
        const claimsReleased = stmt(
          this.db,
          `DELETE FROM ip_claims WHERE state = 'held' AND NOT EXISTS
               (SELECT 1 FROM whitelist_entries e WHERE e.ip = ip_claims.ip AND e.account_id = ip_claims.account_id AND e.deleted_at IS NULL)`,
        ).run().changes;
        const claimsRestored = stmt(
          this.db,
          `INSERT INTO ip_claims (ip, account_id, state, releasing_since, version)
             SELECT e.ip, e.account_id, 'held', NULL, e.claim_version FROM whitelist_entries e
              WHERE e.deleted_at IS NULL AND NOT EXISTS (SELECT 1 FROM ip_claims c WHERE c.ip = e.ip)`,
        ).run().changes;
        const entriesRemoved = stmt(
          this.db,
          `UPDATE whitelist_entries SET deleted_at = ? WHERE deleted_at IS NULL AND NOT EXISTS
               (SELECT 1 FROM ip_claims c WHERE c.ip = whitelist_entries.ip AND c.account_id = whitelist_entries.account_id AND c.state = 'held')`,
        ).run(this.nowSec()).changes;
        return { claimsReleased, claimsRestored, entriesRemoved };
      })
      .immediate();
  }
}
