// egress_addresses on PostgreSQL (migration 22): the same rows as SQLite's. Writes lock the rows they read
// (FOR UPDATE), so two operators (or an operator and a customer's replacement) racing for one address leave one holder.
import { EGRESS_COLUMNS, sortByAddress, egressRow, egressState, type EgressRow } from '../egress-sql.js';
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
import { appendAudit } from './audit.js';
import { guard, type Sql } from './db.js';
import { BATCH_MS, PgFamily } from './family.js';

type Bare = Pick<EgressRow, 'address' | 'node' | 'account_id' | 'quarantine_until' | 'country' | 'withdrawn'>;

export class PgEgressStore extends PgFamily implements EgressStore {
  private tx<T>(work: (q: Sql) => Promise<T>): Promise<T> {
    return guard(() => this.sql.begin((tx) => work(tx as unknown as Sql)) as Promise<T>, BATCH_MS);
  }

  async register(
    node: string,
    addresses: readonly string[],
    loc: { country: string | null; city: string | null },
    opts: { prune?: boolean } = {},
  ): Promise<void> {
    const now = this.nowSec();
    // The node's rows, read once (by the node index); what changes is worked out here and written by primary key,
    // so a pool of 65,536 addresses costs lookups, not a search of the offer per row.
    const offered = new Set(addresses);
    const rows = await guard(
      () =>
        this.sql<
          Array<
            Pick<EgressRow, 'address' | 'country' | 'city' | 'account_id' | 'quarantine_until'> & { withdrawn: boolean }
          >
        >`SELECT address, country, city, account_id, quarantine_until, withdrawn FROM egress_addresses WHERE node = ${node}`,
    );
    let same = 0;
    const drop: string[] = [];
    const withdraw: string[] = [];
    for (const r of rows) {
      if (offered.has(r.address)) {
        if (!r.withdrawn && r.country === loc.country && r.city === loc.city) same++;
      } else if (opts.prune) {
        const q = r.quarantine_until === null ? null : Number(r.quarantine_until); // bigint arrives as text
        if (egressState({ account_id: r.account_id, quarantine_until: q }, now) === 'free') drop.push(r.address);
        else if (!r.withdrawn) withdraw.push(r.address);
      }
    }
    // Nothing new (a node starting again): no write, so the version (a statement trigger) stays and no node reloads.
    if (same === offered.size && drop.length === 0 && withdraw.length === 0) return;
    const list = (chunk: readonly string[]) => JSON.stringify(chunk);
    await this.tx(async (q) => {
      for (let i = 0; i < addresses.length; i += 1000) {
        const chunk = addresses.slice(i, i + 1000);
        await q`
          INSERT INTO egress_addresses (address, node, country, city, registered_at)
          SELECT a, ${node}, ${loc.country}, ${loc.city}, ${now} FROM jsonb_array_elements_text(${list(chunk)}::text::jsonb) AS a
          ON CONFLICT (address) DO UPDATE SET node = excluded.node, country = excluded.country, city = excluded.city,
            withdrawn = false
          WHERE egress_addresses.node IS DISTINCT FROM excluded.node OR egress_addresses.country IS DISTINCT FROM excluded.country
             OR egress_addresses.city IS DISTINCT FROM excluded.city OR egress_addresses.withdrawn`;
      }
      // Checked again in the statement: one assigned meanwhile stays.
      for (let i = 0; i < drop.length; i += 1000)
        await q`
          DELETE FROM egress_addresses
          WHERE address = ANY(ARRAY(SELECT jsonb_array_elements_text(${list(drop.slice(i, i + 1000))}::text::jsonb)))
            AND node = ${node} AND account_id IS NULL AND (quarantine_until IS NULL OR quarantine_until <= ${now})`;
      for (let i = 0; i < withdraw.length; i += 1000)
        await q`
          UPDATE egress_addresses SET withdrawn = true
          WHERE address = ANY(ARRAY(SELECT jsonb_array_elements_text(${list(withdraw.slice(i, i + 1000))}::text::jsonb)))
            AND node = ${node} AND NOT withdrawn`;
    });
  }

  async nodeKnown(node: string): Promise<boolean> {
    const rows = await guard(() => this.sql`SELECT 1 FROM egress_addresses WHERE node = ${node} LIMIT 1`);
    return rows.length > 0;
  }

  private async lockRows(q: Sql, addresses: readonly string[]): Promise<Map<string, Bare>> {
    const rows = await q<Bare[]>`
      SELECT address, node, account_id, quarantine_until, country, withdrawn FROM egress_addresses WHERE address = ANY(ARRAY(SELECT jsonb_array_elements_text(${JSON.stringify(addresses)}::text::jsonb)))
      ORDER BY address FOR UPDATE`;
    return new Map(
      rows.map((r) => [
        r.address,
        {
          ...r,
          account_id: r.account_id === null ? null : Number(r.account_id),
          quarantine_until: r.quarantine_until === null ? null : Number(r.quarantine_until),
        },
      ]),
    );
  }

  async assign(
    accountId: number,
    node: string,
    addresses: readonly string[],
    audit?: AuditDraft,
  ): Promise<AssignRefusal | null> {
    const now = this.nowSec();
    return this.tx(async (q) => {
      const rows = await this.lockRows(q, addresses);
      const fresh: string[] = [];
      for (const a of addresses) {
        const r = rows.get(a);
        // A withdrawn address is no longer the node's to give (its holder keeps it).
        if (!r || r.node !== node || (r.withdrawn && r.account_id !== accountId))
          return { why: 'not_on_node', address: a } as const;
        if (r.account_id !== null && r.account_id !== accountId) return { why: 'held', address: a } as const;
        if (egressState(r, now) === 'quarantined')
          return { why: 'quarantined', address: a, until: r.quarantine_until! } as const;
        if (r.account_id === null) fresh.push(a);
      }
      if (fresh.length === 0) return null;
      await q`UPDATE egress_addresses SET account_id = ${accountId}, assigned_at = ${now}, quarantine_until = NULL WHERE address = ANY(ARRAY(SELECT jsonb_array_elements_text(${JSON.stringify(fresh)}::text::jsonb)))`;
      if (audit)
        await appendAudit(q, this.nowMs(), { ...audit, details: { ...audit.details, addresses: fresh }, accountId });
      return null;
    });
  }

  async release(
    addresses: readonly string[],
    quarantineUntil: number | null,
    audit?: (accountId: number, addresses: string[]) => AuditDraft,
  ): Promise<{ unknown: string[]; released: number }> {
    return this.tx(async (q) => {
      const rows = await this.lockRows(q, addresses);
      const unknown = addresses.filter((a) => !rows.has(a));
      if (unknown.length > 0) return { unknown, released: 0 };
      const byAccount = new Map<number, string[]>();
      for (const a of addresses) {
        const owner = rows.get(a)!.account_id;
        if (owner !== null) byAccount.set(owner, [...(byAccount.get(owner) ?? []), a]);
      }
      await q`UPDATE egress_addresses SET account_id = NULL, assigned_at = NULL, quarantine_until = ${quarantineUntil} WHERE address = ANY(ARRAY(SELECT jsonb_array_elements_text(${JSON.stringify(addresses)}::text::jsonb)))`;
      if (audit)
        for (const [accountId, list] of byAccount)
          await appendAudit(q, this.nowMs(), { ...audit(accountId, list), accountId });
      return { unknown, released: [...byAccount.values()].reduce((n, l) => n + l.length, 0) };
    });
  }

  async list(filter: { accountId?: number | undefined; node?: string | undefined }): Promise<EgressAddressRow[]> {
    const acc = filter.accountId ?? null;
    const node = filter.node ?? null;
    const rows = await guard(() =>
      this.sql.unsafe<EgressRow[]>(
        `SELECT ${EGRESS_COLUMNS} FROM egress_addresses e LEFT JOIN accounts a ON a.id = e.account_id
       WHERE ($1::bigint IS NULL OR e.account_id = $1) AND ($2::text IS NULL OR e.node = $2)`,
        [acc, node],
      ),
    );
    const now = this.nowSec();
    return sortByAddress(rows.map((r) => egressRow(r, now)));
  }

  async holders(): Promise<EgressHolderRow[]> {
    const rows = await guard(
      () => this.sql<{ address: string; node: string; account_id: number | null; quarantine_until: string | null }[]>`
      SELECT address, node, account_id, quarantine_until FROM egress_addresses`,
    );
    return rows.map((r) => ({
      address: r.address,
      node: r.node,
      accountId: r.account_id === null ? null : Number(r.account_id),
      quarantineUntil: r.quarantine_until === null ? null : Number(r.quarantine_until),
    }));
  }

  async replace(
    accountId: number,
    address: string,
    o: { month: string; max: number; quarantineUntil: number },
    audit?: (r: { old: string; new: string }) => AuditDraft,
  ): Promise<ReplaceOutcome> {
    const now = this.nowSec();
    return this.tx(async (q): Promise<ReplaceOutcome> => {
      const old = (await this.lockRows(q, [address])).get(address);
      if (!old || old.account_id !== accountId) return { ok: false, why: 'not_yours' };
      // The account's allowance row is locked too: two replacements at once count one after the other.
      await q`INSERT INTO egress_replacements (account_id, month, count) VALUES (${accountId}, ${o.month}, 0) ON CONFLICT DO NOTHING`;
      const [u] = await q<
        { count: number }[]
      >`SELECT count FROM egress_replacements WHERE account_id = ${accountId} AND month = ${o.month} FOR UPDATE`;
      const used = Number(u?.count ?? 0);
      if (used >= o.max) return { ok: false, why: 'allowance', used };
      const free = async (where: 'node' | 'country'): Promise<string | null> => {
        // The lowest free address not being taken by another replacement right now: one row locked, not all.
        const rows = await q<{ address: string }[]>`
          SELECT address FROM egress_addresses
          WHERE account_id IS NULL AND (quarantine_until IS NULL OR quarantine_until <= ${now}) AND NOT withdrawn
            AND ${where === 'node' ? q`node = ${old.node}` : q`country = ${old.country}`}
          ORDER BY address::inet LIMIT 1
          FOR UPDATE SKIP LOCKED`;
        return rows[0]?.address ?? null;
      };
      const fresh = (await free('node')) ?? (old.country !== null ? await free('country') : null);
      if (fresh === null) return { ok: false, why: 'no_free' };
      await q`UPDATE egress_addresses SET account_id = NULL, assigned_at = NULL, quarantine_until = ${o.quarantineUntil} WHERE address = ${address}`;
      await q`UPDATE egress_addresses SET account_id = ${accountId}, assigned_at = ${now}, quarantine_until = NULL WHERE address = ${fresh}`;
      await q`UPDATE egress_replacements SET count = count + 1 WHERE account_id = ${accountId} AND month = ${o.month}`;
      const swap = { old: address, new: fresh };
      const d = audit?.(swap);
      if (d) await appendAudit(q, this.nowMs(), { ...d, accountId });
      return { ok: true, ...swap };
    });
  }

  async replacementsUsed(accountId: number, month: string): Promise<number> {
    const [r] = await guard(
      () =>
        this.sql<
          { count: number }[]
        >`SELECT count FROM egress_replacements WHERE account_id = ${accountId} AND month = ${month}`,
    );
    return Number(r?.count ?? 0);
  }

  async addUsage(rows: readonly EgressUsageDelta[], dayMs: number): Promise<void> {
    if (rows.length === 0) return;
    const json = JSON.stringify(
      rows.map((r) => ({ a: r.accountId, ip: r.address, u: r.bytesUp, d: r.bytesDown, c: r.connections })),
    );
    await guard(
      () => this.sql`
      INSERT INTO egress_usage (account_id, address, day_ms, bytes_up, bytes_down, connections)
      SELECT a, ip, ${dayMs}, u, d, c FROM jsonb_to_recordset(${json}::text::jsonb) AS t(a integer, ip text, u bigint, d bigint, c bigint)
      ON CONFLICT (account_id, day_ms, address) DO UPDATE SET bytes_up = egress_usage.bytes_up + excluded.bytes_up,
        bytes_down = egress_usage.bytes_down + excluded.bytes_down, connections = egress_usage.connections + excluded.connections`,
    );
  }

  async usageByAddress(accountId: number, fromMs: number, toMs: number): Promise<EgressUsageRow[]> {
    const from = fromMs - (fromMs % DAY_MS);
    const rows = await guard(
      () => this.sql<{ address: string; up: string; down: string; conns: string }[]>`
      SELECT address, sum(bytes_up) AS up, sum(bytes_down) AS down, sum(connections) AS conns FROM egress_usage
      WHERE account_id = ${accountId} AND day_ms >= ${from} AND day_ms < ${toMs}
      GROUP BY address ORDER BY sum(bytes_up) + sum(bytes_down) DESC, address`,
    );
    return rows.map((r) => ({
      address: r.address,
      bytesUp: Number(r.up),
      bytesDown: Number(r.down),
      connections: Number(r.conns),
    }));
  }

  async pruneUsage(beforeMs: number): Promise<number> {
    const r = await guard(() => this.sql`DELETE FROM egress_usage WHERE day_ms < ${beforeMs}`);
    return r.count;
  }

  async version(): Promise<number> {
    const [r] = await guard(() => this.sql<{ seq: string }[]>`SELECT seq FROM egress_version WHERE id = 1`);
    return Number(r?.seq ?? 0);
  }
}
