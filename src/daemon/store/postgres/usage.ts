// Usage buckets on PostgreSQL: every node flushes into the same buckets; a flush is one transaction that
// records its id first, so a flush sent again after the client deadline (the first may still commit) adds nothing.
import type { DomainUsageRow, UsageDelta, UsagePeriod, UsageQuery, UsageRow, UsageStore } from '../types.js';
import {
  FLUSH_ID_KEEP_MS,
  OTHER_DOMAIN,
  PERIODS,
  bucketStart,
  capDomains,
  domainQueryText,
  namedPerSubject,
  nearCap,
  subjectKey,
  perSubject,
  toDomainRow,
  toUsageRow,
  usageQueryParams,
  usageQueryText,
} from '../usage-sql.js';
import { guard } from './db.js';
import { BATCH_MS, unlessBusy, PgFamily } from './family.js';

const ROWS_PER_STATEMENT = 4_000;

export class PgUsageStore extends PgFamily implements UsageStore {
  async addFlush(node: string, flushId: string, atMs: number, deltas: readonly UsageDelta[]): Promise<'ok' | 'duplicate' | 'busy'> {
    const rows = perSubject(deltas).flatMap((d) =>
      PERIODS.map((p) => ({
        account_id: d.accountId,
        period: p,
        start_ms: bucketStart(p, atMs),
        subject: d.subject,
        node,
        bytes_up: d.bytesUp,
        bytes_down: d.bytesDown,
        connections: d.connections,
      })),
    );
    const r = await unlessBusy(() =>
      this.sql.begin(async (tx) => {
        const marked = await tx`INSERT INTO usage_flushes (flush_id, at_ms) VALUES (${flushId}, ${atMs}) ON CONFLICT DO NOTHING RETURNING 1`;
        if (marked.length === 0) return 'duplicate' as const;
        // In statements of ROWS_PER_STATEMENT: one statement may carry at most 65,535 parameters (8 per row).
        for (let i = 0; i < rows.length; i += ROWS_PER_STATEMENT) {
          await tx`
            INSERT INTO usage_buckets ${tx(rows.slice(i, i + ROWS_PER_STATEMENT))}
            ON CONFLICT (account_id, period, start_ms, subject, node) DO UPDATE SET bytes_up = usage_buckets.bytes_up + excluded.bytes_up,
              bytes_down = usage_buckets.bytes_down + excluded.bytes_down, connections = usage_buckets.connections + excluded.connections`;
        }
        // The domain cap: how many domains this node keeps already for these users' day (one read), and only for
        // users that might pass the cap, which of this flush's domains are among them.
        const day = bucketStart('day', atMs);
        const named = namedPerSubject(deltas);
        const subjects = JSON.stringify([...named.keys()].map((k) => ({ a: Number(k.split('\0')[0]), s: k.slice(k.indexOf('\0') + 1) })));
        // A count per user through the primary key (a join over the whole table's day would scan it).
        const keptRows = named.size === 0 ? [] : await tx<{ a: number; s: string; n: string }[]>`
          SELECT i.a, i.s, (SELECT COUNT(*) FROM usage_domains u WHERE u.account_id = i.a AND u.day_ms = ${day} AND u.subject = i.s AND u.node = ${node} AND u.domain <> '') AS n
          FROM jsonb_to_recordset(${subjects}::text::jsonb) AS i(a integer, s text)`;
        const kept = new Map(keptRows.map((r) => [subjectKey({ accountId: r.a, subject: r.s }), Number(r.n)]));
        const near = nearCap(named, kept);
        const asked = deltas.filter((d) => d.target && near.has(subjectKey(d))).map((d) => ({ a: d.accountId, s: d.subject, dom: d.target }));
        const presentRows = asked.length === 0 ? [] : await tx<{ a: number; s: string; dom: string }[]>`
          SELECT i.a, i.s, i.dom FROM jsonb_to_recordset(${JSON.stringify(asked)}::text::jsonb) AS i(a integer, s text, dom text)
          WHERE EXISTS (SELECT 1 FROM usage_domains u WHERE u.account_id = i.a AND u.day_ms = ${day} AND u.subject = i.s AND u.node = ${node} AND u.domain = i.dom)`;
        const present = new Set(presentRows.map((r) => `${r.a}\0${r.s}\0${r.dom}`));
        const domainRows = capDomains(deltas, kept, (d) => present.has(`${subjectKey(d)}\0${d.target}`)).map((d) => ({
          account_id: d.accountId,
          day_ms: day,
          subject: d.subject,
          node,
          domain: d.target ?? OTHER_DOMAIN,
          bytes_up: d.bytesUp,
          bytes_down: d.bytesDown,
          connections: d.connections,
        }));
        for (let i = 0; i < domainRows.length; i += ROWS_PER_STATEMENT) {
          await tx`
            INSERT INTO usage_domains ${tx(domainRows.slice(i, i + ROWS_PER_STATEMENT))}
            ON CONFLICT (account_id, day_ms, subject, node, domain) DO UPDATE SET bytes_up = usage_domains.bytes_up + excluded.bytes_up,
              bytes_down = usage_domains.bytes_down + excluded.bytes_down, connections = usage_domains.connections + excluded.connections`;
        }
        return 'ok' as const;
      }),
      BATCH_MS, // a flush of thousands of users is one transaction of several statements, like a batch
    );
    return r;
  }

  async query(q: UsageQuery): Promise<UsageRow[]> {
    let n = 0;
    const text = usageQueryText(q.by, q.subject !== undefined).replace(/\?/g, () => `$${++n}`);
    const rows = await guard(() => this.sql.unsafe(text, usageQueryParams(q)));
    return (rows as unknown as Parameters<typeof toUsageRow>[0][]).map(toUsageRow);
  }

  async domains(q: { accountId: number; fromMs: number; toMs: number; subject?: string }): Promise<DomainUsageRow[]> {
    let n = 0;
    const text = domainQueryText(q.subject !== undefined).replace(/\?/g, () => `$${++n}`);
    const params: Array<string | number> = [q.accountId, q.fromMs, q.toMs, ...(q.subject !== undefined ? [q.subject] : [])];
    const rows = await guard(() => this.sql.unsafe(text, params));
    return (rows as unknown as Parameters<typeof toDomainRow>[0][]).map(toDomainRow);
  }

  async dailyTotals(accountIds: readonly number[], sinceMs: number): Promise<Array<{ accountId: number; subject: string; startMs: number; bytes: number }>> {
    if (accountIds.length === 0) return [];
    const rows = await guard(() => this.sql<{ account_id: number; subject: string; start_ms: number; bytes: string }[]>`
      SELECT account_id, subject, start_ms, SUM(bytes_up + bytes_down) AS bytes FROM usage_buckets
      WHERE period = 'day' AND start_ms >= ${sinceMs} AND account_id IN (SELECT jsonb_array_elements_text(${JSON.stringify(accountIds)}::text::jsonb)::int) GROUP BY account_id, subject, start_ms`);
    return rows.map((r) => ({ accountId: r.account_id, subject: r.subject, startMs: Number(r.start_ms), bytes: Number(r.bytes) }));
  }

  async prune(period: UsagePeriod, beforeMs: number): Promise<number | 'busy'> {
    const r = await unlessBusy(() => this.sql`DELETE FROM usage_buckets WHERE period = ${period} AND start_ms < ${beforeMs}`);
    if (r === 'busy') return r;
    // Domain rows are kept as long as day buckets.
    if (period === 'day') await unlessBusy(() => this.sql`DELETE FROM usage_domains WHERE day_ms < ${beforeMs}`);
    await unlessBusy(() => this.sql`DELETE FROM usage_flushes WHERE at_ms < ${Date.now() - FLUSH_ID_KEEP_MS}`);
    return r.count;
  }
}
