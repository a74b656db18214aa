// egress_addresses (migration 18): dedicated egress addresses, what each node offers and who holds it.
import { byAddress, EGRESS_COLUMNS, sortByAddress, egressRow, egressState, type EgressRow } from '../egress-sql.js';
import { DAY_MS } from '../../../rules/time.js';
import type {
  AssignRefusal,
  AuditDraft,
  EgressAddressRow,
  EgressHolderRow,
  EgressStore,
  EgressUsageDelta,
  EgressUsageRow,
  ReplaceOutcome,
} from '../types.js';
import type { SqliteAuditLog } from './audit.js';
import type { Db } from './db.js';
import { stmt } from './statements.js';

type Bare = Pick<EgressRow, 'address' | 'node' | 'account_id' | 'quarantine_until' | 'country' | 'withdrawn'>;

export class SqliteEgressStore implements EgressStore {
  constructor(
    private readonly db: Db,
    private readonly nowSec: () => number,
    private readonly audit: SqliteAuditLog,
    /** The gateway's no-wait connection for usage by address: a lock held elsewhere throws at once, never sleeps the event loop. */
    private readonly writer: () => Db = () => db,
  ) {}

  async register(
    node: string,
    addresses: readonly string[],
    loc: { country: string | null; city: string | null },
    opts: { prune?: boolean } = {},
  ): Promise<void> {
    const now = this.nowSec();
    const put = stmt(
      this.db,
      `INSERT INTO egress_addresses (address, node, country, city, registered_at) VALUES (?, ?, ?, ?, ?)
      ON CONFLICT (address) DO UPDATE SET node = excluded.node, country = excluded.country, city = excluded.city,
        withdrawn = 0
      WHERE node IS NOT excluded.node OR country IS NOT excluded.country OR city IS NOT excluded.city OR withdrawn <> 0`,
    );
    // What the node no longer offers (an offer the operator named): deleted when free; held or quarantined, marked
    // withdrawn (never handed to anyone new) until a later start finds it free.
    const offered = new Set(addresses);
    const mine = stmt<[string], Bare & { withdrawn: number }>(
      this.db,
      'SELECT address, node, account_id, quarantine_until, country, withdrawn FROM egress_addresses WHERE node = ?',
    );
    const drop = stmt(this.db, 'DELETE FROM egress_addresses WHERE address = ?');
    const withdraw = stmt(this.db, 'UPDATE egress_addresses SET withdrawn = 1 WHERE address = ?');
    this.db
      .transaction(() => {
        for (const a of addresses) put.run(a, node, loc.country, loc.city, now);
        if (!opts.prune) return;
        for (const r of mine.all(node)) {
          if (offered.has(r.address)) continue;
          if (egressState(r, now) === 'free') drop.run(r.address);
          else if (!r.withdrawn) withdraw.run(r.address);
        }
      })
      .immediate();
  }

  async nodeKnown(node: string): Promise<boolean> {
    return stmt(this.db, 'SELECT 1 FROM egress_addresses WHERE node = ? LIMIT 1').get(node) !== undefined;
  }

  private bare(address: string): Bare | undefined {
    return stmt<[string], Bare>(
      this.db,
      'SELECT address, node, account_id, quarantine_until, country, withdrawn FROM egress_addresses WHERE address = ?',
    ).get(address);
  }

  async assign(
    accountId: number,
    node: string,
    addresses: readonly string[],
    audit?: AuditDraft,
  ): Promise<AssignRefusal | null> {
    const now = this.nowSec();
    const set = stmt(
      this.db,
      'UPDATE egress_addresses SET account_id = ?, assigned_at = ?, quarantine_until = NULL WHERE address = ?',
    );
    return this.db
      .transaction((): AssignRefusal | null => {
        const fresh: string[] = [];
        for (const a of addresses) {
          const r = this.bare(a);
          // A withdrawn address is no longer the node's to give (its holder keeps it).
          if (!r || r.node !== node || (r.withdrawn && r.account_id !== accountId))
            return { why: 'not_on_node', address: a };
          if (r.account_id !== null && r.account_id !== accountId) return { why: 'held', address: a };
          const state = egressState(r, now);
          if (state === 'quarantined') return { why: 'quarantined', address: a, until: r.quarantine_until! };
          if (r.account_id === null) fresh.push(a);
        }
        if (fresh.length === 0) return null;
        this.audit.audited(accountId, audit && { ...audit, details: { ...audit.details, addresses: fresh } }, () => {
          for (const a of fresh) set.run(accountId, now, a);
        });
        return null;
      })
      .immediate();
  }

  async release(
    addresses: readonly string[],
    quarantineUntil: number | null,
    audit?: (accountId: number, addresses: string[]) => AuditDraft,
  ): Promise<{ unknown: string[]; released: number }> {
    const free = stmt(
      this.db,
      'UPDATE egress_addresses SET account_id = NULL, assigned_at = NULL, quarantine_until = ? WHERE address = ?',
    );
    return this.db
      .transaction(() => {
        const rows = addresses.map((a) => [a, this.bare(a)] as const);
        const unknown = rows.filter(([, r]) => !r).map(([a]) => a);
        if (unknown.length > 0) return { unknown, released: 0 };
        const byAccount = new Map<number, string[]>();
        for (const [a, r] of rows)
          if (r!.account_id !== null) byAccount.set(r!.account_id, [...(byAccount.get(r!.account_id) ?? []), a]);
        for (const [a] of rows) free.run(quarantineUntil, a);
        if (audit)
          for (const [accountId, list] of byAccount)
            this.audit.audited(accountId, audit(accountId, list), () => undefined);
        return { unknown, released: [...byAccount.values()].reduce((n, l) => n + l.length, 0) };
      })
      .immediate();
  }

  async list(filter: { accountId?: number | undefined; node?: string | undefined }): Promise<EgressAddressRow[]> {
    const where: string[] = [];
    const params: Array<string | number> = [];
    if (filter.accountId !== undefined) {
      where.push('e.account_id = ?');
      params.push(filter.accountId);
    }
    if (filter.node !== undefined) {
      where.push('e.node = ?');
      params.push(filter.node);
    }
    const w = where.length ? `WHERE ${where.join(' AND ')}` : '';
    const rows = stmt<unknown[], EgressRow>(
      this.db,
      `SELECT ${EGRESS_COLUMNS} FROM egress_addresses e LEFT JOIN accounts a ON a.id = e.account_id ${w}`,
    ).all(...params);
    const now = this.nowSec();
    return sortByAddress(rows.map((r) => egressRow(r, now)));
  }

  async holders(): Promise<EgressHolderRow[]> {
    return stmt<[], EgressHolderRow>(
      this.db,
      'SELECT address, node, account_id AS accountId, quarantine_until AS quarantineUntil FROM egress_addresses',
    ).all();
  }

  async replace(
    accountId: number,
    address: string,
    o: { month: string; max: number; quarantineUntil: number },
    audit?: (r: { old: string; new: string }) => AuditDraft,
  ): Promise<ReplaceOutcome> {
    const now = this.nowSec();
    return this.db
      .transaction((): ReplaceOutcome => {
        const old = this.bare(address);
        if (!old || old.account_id !== accountId) return { ok: false, why: 'not_yours' };
        const used = this.used(accountId, o.month);
        if (used >= o.max) return { ok: false, why: 'allowance', used };
        const freeWhere =
          'account_id IS NULL AND (quarantine_until IS NULL OR quarantine_until <= ?) AND withdrawn = 0';
        let candidates = stmt<[number, string], { address: string }>(
          this.db,
          `SELECT address FROM egress_addresses WHERE ${freeWhere} AND node = ?`,
        )
          .all(now, old.node)
          .map((r) => r.address);
        if (candidates.length === 0 && old.country !== null) {
          candidates = stmt<[number, string], { address: string }>(
            this.db,
            `SELECT address FROM egress_addresses WHERE ${freeWhere} AND country = ?`,
          )
            .all(now, old.country)
            .map((r) => r.address);
        }
        if (candidates.length === 0) return { ok: false, why: 'no_free' };
        const fresh = candidates.map((a) => ({ address: a })).sort(byAddress)[0]!.address;
        const swap = { old: address, new: fresh };
        this.audit.audited(accountId, audit?.(swap) ?? undefined, () => {
          stmt(
            this.db,
            'UPDATE egress_addresses SET account_id = NULL, assigned_at = NULL, quarantine_until = ? WHERE address = ?',
          ).run(o.quarantineUntil, address);
          stmt(
            this.db,
            'UPDATE egress_addresses SET account_id = ?, assigned_at = ?, quarantine_until = NULL WHERE address = ?',
          ).run(accountId, now, fresh);
          stmt(
            this.db,
            `INSERT INTO egress_replacements (account_id, month, count) VALUES (?, ?, 1)
            ON CONFLICT (account_id, month) DO UPDATE SET count = count + 1`,
          ).run(accountId, o.month);
        });
        return { ok: true, ...swap };
      })
      .immediate();
  }

  private used(accountId: number, month: string): number {
    return (
      stmt<[number, string], { count: number }>(
        this.db,
        'SELECT count FROM egress_replacements WHERE account_id = ? AND month = ?',
      ).get(accountId, month)?.count ?? 0
    );
  }

  async replacementsUsed(accountId: number, month: string): Promise<number> {
    return this.used(accountId, month);
  }

  async addUsage(rows: readonly EgressUsageDelta[], dayMs: number): Promise<void> {
    const db = this.writer();
    const add = stmt(
      db,
      `INSERT INTO egress_usage (account_id, address, day_ms, bytes_up, bytes_down, connections) VALUES (?, ?, ?, ?, ?, ?)
      ON CONFLICT (account_id, day_ms, address) DO UPDATE SET bytes_up = bytes_up + excluded.bytes_up, bytes_down = bytes_down + excluded.bytes_down,
        connections = connections + excluded.connections`,
    );
    db.transaction(() => {
      for (const r of rows) add.run(r.accountId, r.address, dayMs, r.bytesUp, r.bytesDown, r.connections);
    }).immediate();
  }

  async usageByAddress(accountId: number, fromMs: number, toMs: number): Promise<EgressUsageRow[]> {
    const from = fromMs - (fromMs % DAY_MS);
    return stmt<[number, number, number], EgressUsageRow>(
      this.db,
      `SELECT address, sum(bytes_up) AS bytesUp, sum(bytes_down) AS bytesDown, sum(connections) AS connections
      FROM egress_usage WHERE account_id = ? AND day_ms >= ? AND day_ms < ? GROUP BY address ORDER BY sum(bytes_up) + sum(bytes_down) DESC, address`,
    ).all(accountId, from, toMs);
  }

  async pruneUsage(beforeMs: number): Promise<number> {
    return stmt(this.writer(), 'DELETE FROM egress_usage WHERE day_ms < ?').run(beforeMs).changes;
  }

  async version(): Promise<number> {
    return stmt<[], { seq: number }>(this.db, 'SELECT seq FROM egress_version WHERE id = 1').get()?.seq ?? 0;
  }
}
