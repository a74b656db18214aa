// whitelist_entries + ip_claims: each item is claimed and recorded in its own IMMEDIATE transaction,
// so two accounts (or two processes) racing for one IP always leave exactly one owner.
import type { Db } from './db.js';
import { stmt } from './statements.js';

export interface WhitelistEntry {
  id: number;
  account_id: number;
  ip: string;
  remark: string;
  status: 1 | 2;
  created_at: number;
}

export type ClaimOutcome = 'added' | 'already_listed' | 'unavailable';
export type ReleaseOutcome = 'deleted' | 'absent';

interface ClaimRow {
  ip: string;
  account_id: number;
  state: 'held' | 'releasing';
  releasing_since: number | null;
  version: number;
}

export interface ListFilter {
  status?: 1 | 2 | undefined;
  ip?: string | undefined;
  limit: number;
  offset: number;
}

export class WhitelistStore {
  private readonly claimOf;
  private readonly insertClaim;
  private readonly takeOverClaim;
  private readonly insertEntry;
  private readonly liveEntry;
  private readonly softDelete;
  private readonly dropClaim;
  private readonly admissionRow;
  private readonly claimTx;
  private readonly releaseTx;

  constructor(
    private readonly db: Db,
    private readonly nowSec: () => number,
    /** Seconds an IP of a closed account stays "being released". */
    private readonly releaseGraceSec: () => number,
  ) {
    this.claimOf = stmt<[string], ClaimRow>(db, 'SELECT * FROM ip_claims WHERE ip = ?');
    this.insertClaim = stmt(db, "INSERT INTO ip_claims (ip, account_id, state, releasing_since, version) VALUES (?, ?, 'held', NULL, 1)");
    this.takeOverClaim = stmt(db,
      "UPDATE ip_claims SET account_id = ?, state = 'held', releasing_since = NULL, version = version + 1 WHERE ip = ? AND version = ?",
    );
    this.insertEntry = stmt(db,
      'INSERT INTO whitelist_entries (account_id, ip, remark, status, created_at, deleted_at, claim_version) VALUES (?, ?, ?, 1, ?, NULL, ?)',
    );
    this.liveEntry = stmt<[number, string], { id: number }>(db,
      'SELECT id FROM whitelist_entries WHERE account_id = ? AND ip = ? AND deleted_at IS NULL',
    );
    this.softDelete = stmt(db, 'UPDATE whitelist_entries SET deleted_at = ? WHERE id = ?');
    this.dropClaim = stmt(db, 'DELETE FROM ip_claims WHERE ip = ? AND account_id = ?');
    this.admissionRow = stmt<[string], { account_id: number; entry_status: number; account_status: string }>(db,
      `SELECT c.account_id, e.status AS entry_status, a.status AS account_status
         FROM ip_claims c
         JOIN whitelist_entries e ON e.ip = c.ip AND e.account_id = c.account_id AND e.deleted_at IS NULL
         JOIN accounts a ON a.id = c.account_id
        WHERE c.ip = ? AND c.state = 'held'`,
    );

    this.claimTx = db.transaction((accountId: number, ip: string, remark: string): ClaimOutcome => {
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

    this.releaseTx = db.transaction((accountId: number, ip: string): ReleaseOutcome => {
      const entry = this.liveEntry.get(accountId, ip);
      if (!entry) return 'absent';
      this.softDelete.run(this.nowSec(), entry.id);
      this.dropClaim.run(ip, accountId);
      return 'deleted';
    });
  }

  /** Claims the IP for the account and records the entry, or says why not. One transaction per IP. */
  claimIp(accountId: number, ip: string, remark: string): ClaimOutcome {
    return this.claimTx.immediate(accountId, ip, remark);
  }

  /** Soft-deletes the account's entry and releases the global claim at once. */
  releaseClaim(accountId: number, ip: string): ReleaseOutcome {
    return this.releaseTx.immediate(accountId, ip);
  }

  list(accountId: number, f: ListFilter): { items: WhitelistEntry[]; total: number } {
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
    const total = stmt<unknown[], { n: number }>(this.db, `SELECT COUNT(*) AS n FROM whitelist_entries WHERE ${w}`).get(...params)!.n;
    // Newest first; id breaks ties between entries made in the same second, so paging is stable.
    const items = stmt<unknown[], WhitelistEntry>(this.db,
        `SELECT id, account_id, ip, remark, status, created_at FROM whitelist_entries WHERE ${w} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`,
      )
      .all(...params, f.limit, f.offset);
    return { items, total };
  }

  findLive(accountId: number, ip: string): WhitelistEntry | null {
    return (
      stmt<[number, string], WhitelistEntry>(this.db,
          'SELECT id, account_id, ip, remark, status, created_at FROM whitelist_entries WHERE account_id = ? AND ip = ? AND deleted_at IS NULL',
        )
        .get(accountId, ip) ?? null
    );
  }

  setStatus(accountId: number, ip: string, status: 1 | 2): WhitelistEntry | null {
    const changed = stmt(this.db, 'UPDATE whitelist_entries SET status = ? WHERE account_id = ? AND ip = ? AND deleted_at IS NULL')
      .run(status, accountId, ip).changes;
    return changed ? this.findLive(accountId, ip) : null;
  }

  /** Gateway admission by source IP: the owner of an active entry, and that owner's status. */
  admissionByIp(ip: string): { accountId: number; entryActive: boolean; accountActive: boolean } | null {
    const r = this.admissionRow.get(ip);
    if (!r) return null;
    return { accountId: r.account_id, entryActive: r.entry_status === 1, accountActive: r.account_status === 'active' };
  }

  /** Claims with no live entry, or live entries with no claim: what a crash must never leave. */
  inconsistencies(): { claimsWithoutEntry: number; entriesWithoutClaim: number } {
    const claimsWithoutEntry = stmt<[], { n: number }>(this.db,
        `SELECT COUNT(*) AS n FROM ip_claims c WHERE c.state = 'held' AND NOT EXISTS
           (SELECT 1 FROM whitelist_entries e WHERE e.ip = c.ip AND e.account_id = c.account_id AND e.deleted_at IS NULL)`,
      )
      .get()!.n;
    const entriesWithoutClaim = stmt<[], { n: number }>(this.db,
        `SELECT COUNT(*) AS n FROM whitelist_entries e WHERE e.deleted_at IS NULL AND NOT EXISTS
           (SELECT 1 FROM ip_claims c WHERE c.ip = e.ip AND c.account_id = e.account_id AND c.state = 'held')`,
      )
      .get()!.n;
    return { claimsWithoutEntry, entriesWithoutClaim };
  }

  /**
   * Start-up repair after a crash or a hand edit (none is expected: each item is one transaction).
   * The claim is the owner of record: a held claim with no live entry is released (the add never
   * completed); a live entry with no claim gets its claim back if the IP is unclaimed, else it is
   * soft-deleted (someone else owns the IP). One transaction.
   */
  repair(): { claimsReleased: number; claimsRestored: number; entriesRemoved: number } {
    return this.db
      .transaction(() => {
        const claimsReleased = stmt(this.db,
            `DELETE FROM ip_claims WHERE state = 'held' AND NOT EXISTS
               (SELECT 1 FROM whitelist_entries e WHERE e.ip = ip_claims.ip AND e.account_id = ip_claims.account_id AND e.deleted_at IS NULL)`,
          )
          .run().changes;
        const claimsRestored = stmt(this.db,
            `INSERT INTO ip_claims (ip, account_id, state, releasing_since, version)
             SELECT e.ip, e.account_id, 'held', NULL, e.claim_version FROM whitelist_entries e
              WHERE e.deleted_at IS NULL AND NOT EXISTS (SELECT 1 FROM ip_claims c WHERE c.ip = e.ip)`,
          )
          .run().changes;
        const entriesRemoved = stmt(this.db,
            `UPDATE whitelist_entries SET deleted_at = ? WHERE deleted_at IS NULL AND NOT EXISTS
               (SELECT 1 FROM ip_claims c WHERE c.ip = whitelist_entries.ip AND c.account_id = whitelist_entries.account_id AND c.state = 'held')`,
          )
          .run(this.nowSec()).changes;
        return { claimsReleased, claimsRestored, entriesRemoved };
      })
      .immediate();
  }
}
