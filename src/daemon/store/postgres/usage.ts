// Usage buckets on PostgreSQL: every node flushes into the same buckets; a flush is one transaction that
// records its id first, so a flush sent again after the client deadline (the first may still commit) adds nothing.
// A flush writes minute buckets only (one row per user, in one statement), their deltas counted in roll_* too;
// rollUp, on one node at a time, folds finished minutes into hour and day buckets (docs/decisions.md#d-027, "Usage
// writes"), and reads of hours and days add what is not folded yet.
import type {
  DomainUsageRow,
  FlushDomains,
  UsageDelta,
  UsagePeriod,
  UsageQuery,
  UsageRow,
  UsageStore,
} from '../types.js';
import {
  FLUSH_ID_KEEP_MS,
  OTHER_DOMAIN,
  PERIOD_MS,
  UNROLLED,
  bucketStart,
  capDomains,
  domainQueryText,
  namedPerSubject,
  nearCap,
  perSubject,
  toDomainRow,
  toUsageRow,
  FIRST_USAGE_TEXT,
  dailyTotalsText,
  usageQuery,
} from '../usage-sql.js';
import type postgres from '#postgres';
import { guard } from './db.js';
import { splitUsageKey, usageKey, usageTargetKey } from '../../../rules/usage-key.js';
import { BATCH_MS, unlessBusy, PgFamily } from './family.js';

/** The roll-up's advisory lock: any fixed 64-bit number of our own. */
const ROLLUP_LOCK_KEY = 0x70726f787975; // "proxyu"
/**
 * Minute rows folded per transaction, with a pause between transactions: a minute of 60,000 active users folded in
 * one statement kept a core busy for 5 s and stretched the flushes beside it (docs/benchmarks/fleet-scale.md, "Fleet scale").
 */
const ROLLUP_ROWS = 5_000;
const ROLLUP_PAUSE_MS = 250;
/** Transactions per roll-up at most (the next one, a minute later, goes on). */
const ROLLUP_ROUNDS = 200;

export class PgUsageStore extends PgFamily implements UsageStore {
  async addFlush(
    node: string,
    flushId: string,
    atMs: number,
    deltas: readonly UsageDelta[],
    domains?: FlushDomains,
  ): Promise<'ok' | 'duplicate' | 'busy'> {
    const minute = bucketStart('minute', atMs);
    const buckets = perSubject(deltas);
    const rows = JSON.stringify(
      buckets.map((d) => ({ a: d.accountId, s: d.subject, u: d.bytesUp, d: d.bytesDown, c: d.connections })),
    );
    const byDomain = domains ?? { atMs, deltas };
    const r = await unlessBusy(
      () =>
        this.sql.begin(async (tx) => {
          const marked =
            await tx`INSERT INTO usage_flushes (flush_id, at_ms) VALUES (${flushId}, ${atMs}) ON CONFLICT DO NOTHING RETURNING 1`;
          if (marked.length === 0) return 'duplicate' as const;
          // One row per user, whatever the flush's size (one JSON parameter); the roll-up adds roll_* to the hour and day.
          if (buckets.length > 0) {
            await tx`
            INSERT INTO usage_buckets (account_id, period, start_ms, subject, node, bytes_up, bytes_down, connections, roll_up, roll_down, roll_conn, unrolled)
            SELECT a, 'minute', ${minute}, s, ${node}, u, d, c, u, d, c, true
            FROM jsonb_to_recordset(${rows}::text::jsonb) AS t(a integer, s text, u bigint, d bigint, c bigint)
            ON CONFLICT (account_id, period, start_ms, subject, node) DO UPDATE SET bytes_up = usage_buckets.bytes_up + excluded.bytes_up,
              bytes_down = usage_buckets.bytes_down + excluded.bytes_down, connections = usage_buckets.connections + excluded.connections,
              roll_up = usage_buckets.roll_up + excluded.roll_up, roll_down = usage_buckets.roll_down + excluded.roll_down, roll_conn = usage_buckets.roll_conn + excluded.roll_conn, unrolled = true`;
          }
          if (byDomain.deltas.length > 0) await this.addDomains(tx, node, byDomain.atMs, byDomain.deltas);
          return 'ok' as const;
        }),
      BATCH_MS, // a flush of thousands of users is one transaction of several statements, like a batch
    );
    return r;
  }

  /** A flush's domain rows, under the per-user cap (DOMAINS_PER_USER_DAY), in the day of `atMs`. */
  private async addDomains(
    tx: postgres.TransactionSql<{ int8: number }>,
    node: string,
    atMs: number,
    deltas: readonly UsageDelta[],
  ): Promise<void> {
    // The domain cap: how many domains this node keeps already for these users' day (one read), and only for
    // users that might pass the cap, which of this flush's domains are among them.
    const day = bucketStart('day', atMs);
    const named = namedPerSubject(deltas);
    const subjects = JSON.stringify(
      [...named.keys()].map((k) => {
        const { accountId, subject } = splitUsageKey(k);
        return { a: accountId, s: subject };
      }),
    );
    // A count per user through the primary key (a join over the whole table's day would scan it).
    const keptRows =
      named.size === 0
        ? []
        : await tx<{ a: number; s: string; n: string }[]>`
      SELECT i.a, i.s, (SELECT COUNT(*) FROM usage_domains u WHERE u.account_id = i.a AND u.day_ms = ${day} AND u.subject = i.s AND u.node = ${node} AND u.domain <> '') AS n
      FROM jsonb_to_recordset(${subjects}::text::jsonb) AS i(a integer, s text)`;
    const kept = new Map(keptRows.map((r) => [usageKey(r.a, r.s), Number(r.n)]));
    const near = nearCap(named, kept);
    const asked = deltas
      .filter((d) => d.target && near.has(usageKey(d.accountId, d.subject)))
      .map((d) => ({ a: d.accountId, s: d.subject, dom: d.target }));
    const presentRows =
      asked.length === 0
        ? []
        : await tx<{ a: number; s: string; dom: string }[]>`
      SELECT i.a, i.s, i.dom FROM jsonb_to_recordset(${JSON.stringify(asked)}::text::jsonb) AS i(a integer, s text, dom text)
      WHERE EXISTS (SELECT 1 FROM usage_domains u WHERE u.account_id = i.a AND u.day_ms = ${day} AND u.subject = i.s AND u.node = ${node} AND u.domain = i.dom)`;
    const present = new Set(presentRows.map((r) => usageTargetKey(r.a, r.s, r.dom)));
    const domainRows = JSON.stringify(
      capDomains(deltas, kept, (d) => present.has(usageTargetKey(d.accountId, d.subject, d.target!))).map((d) => ({
        a: d.accountId,
        s: d.subject,
        dom: d.target ?? OTHER_DOMAIN,
        u: d.bytesUp,
        d: d.bytesDown,
        c: d.connections,
      })),
    );
    // One statement, one parameter, whatever the number of rows.
    await tx`
      INSERT INTO usage_domains (account_id, day_ms, subject, node, domain, bytes_up, bytes_down, connections)
      SELECT a, ${day}, s, ${node}, dom, u, d, c FROM jsonb_to_recordset(${domainRows}::text::jsonb) AS t(a integer, s text, dom text, u bigint, d bigint, c bigint)
      ON CONFLICT (account_id, day_ms, subject, node, domain) DO UPDATE SET bytes_up = usage_domains.bytes_up + excluded.bytes_up,
        bytes_down = usage_domains.bytes_down + excluded.bytes_down, connections = usage_domains.connections + excluded.connections`;
  }

  /**
   * Folds minute buckets that ended over a minute ago (by the database's clock, with 10 s for flushes in flight)
   * into their hour and day buckets, one node at a time (a transaction-scoped advisory lock, tried: never waited
   * for). Rows a flush holds at that moment are skipped (SKIP LOCKED: a flush never waits for a roll-up, nor a
   * roll-up for a flush), and a minute written again after its fold (a late flush) is folded again: roll_* says
   * what is left. Each fold moves roll_* into the hour and day in one statement: exact whenever it is read.
   */
  rollUp(): Promise<number | 'skipped'> {
    return this.fold(null);
  }

  /** Folds unfolded minutes before `beforeMs` (null: those that ended over 70 s ago by the database's clock). */
  private async fold(beforeMs: number | null, waitForLock = false): Promise<number | 'skipped'> {
    let folded = 0;
    for (let round = 0; round < ROLLUP_ROUNDS; round++) {
      if (round > 0 && !waitForLock) await new Promise((r) => setTimeout(r, ROLLUP_PAUSE_MS));
      const r = await guard(
        () =>
          this.sql.begin(async (tx) => {
            if (waitForLock) await tx`SELECT pg_advisory_xact_lock(${ROLLUP_LOCK_KEY})`;
            else {
              const [lock] = await tx<{ ok: boolean }[]>`SELECT pg_try_advisory_xact_lock(${ROLLUP_LOCK_KEY}) AS ok`;
              if (!lock?.ok) return 'skipped' as const;
            }
            const cutoff =
              beforeMs === null
                ? tx`(extract(epoch FROM clock_timestamp()) * 1000)::bigint - 70000`
                : tx`${beforeMs}::bigint`;
            const [n] = await tx<{ minutes: number }[]>`
              WITH m AS (
                SELECT account_id, start_ms, subject, node, roll_up, roll_down, roll_conn FROM usage_buckets
                WHERE ${tx.unsafe(UNROLLED)} AND start_ms < ${cutoff}
                LIMIT ${ROLLUP_ROWS} FOR UPDATE SKIP LOCKED
              ), cleared AS (
                UPDATE usage_buckets b SET roll_up = 0, roll_down = 0, roll_conn = 0, unrolled = false FROM m
                WHERE b.account_id = m.account_id AND b.period = 'minute' AND b.start_ms = m.start_ms AND b.subject = m.subject AND b.node = m.node
                RETURNING 1
              ), rolled AS (
                INSERT INTO usage_buckets (account_id, period, start_ms, subject, node, bytes_up, bytes_down, connections)
                SELECT m.account_id, p.period, (m.start_ms / p.ms) * p.ms, m.subject, '', SUM(m.roll_up), SUM(m.roll_down), SUM(m.roll_conn)
                FROM m CROSS JOIN (VALUES ('hour', ${PERIOD_MS.hour}::bigint), ('day', ${PERIOD_MS.day}::bigint)) AS p(period, ms)
                GROUP BY m.account_id, p.period, (m.start_ms / p.ms) * p.ms, m.subject
                ON CONFLICT (account_id, period, start_ms, subject, node) DO UPDATE SET bytes_up = usage_buckets.bytes_up + excluded.bytes_up,
                  bytes_down = usage_buckets.bytes_down + excluded.bytes_down, connections = usage_buckets.connections + excluded.connections
                RETURNING 1
              )
              SELECT (SELECT count(*) FROM cleared)::int AS minutes, (SELECT count(*) FROM rolled)::int AS rolled`;
            return n?.minutes ?? 0;
          }),
        BATCH_MS * 6,
      );
      if (r === 'skipped') return round === 0 ? 'skipped' : folded;
      folded += r;
      if (r < ROLLUP_ROWS) break;
    }
    return folded;
  }

  async query(q: UsageQuery): Promise<UsageRow[]> {
    const { text, params } = usageQuery(q);
    let n = 0;
    const rows = await guard(() =>
      this.sql.unsafe(
        text.replace(/\?/g, () => `$${++n}`),
        params,
      ),
    );
    return (rows as unknown as Parameters<typeof toUsageRow>[0][]).map(toUsageRow);
  }

  async domains(q: { accountId: number; fromMs: number; toMs: number; subject?: string }): Promise<DomainUsageRow[]> {
    let n = 0;
    const text = domainQueryText(q.subject !== undefined).replace(/\?/g, () => `$${++n}`);
    const params: Array<string | number> = [
      q.accountId,
      q.fromMs,
      q.toMs,
      ...(q.subject !== undefined ? [q.subject] : []),
    ];
    const rows = await guard(() => this.sql.unsafe(text, params));
    return (rows as unknown as Parameters<typeof toDomainRow>[0][]).map(toDomainRow);
  }

  async firstUsage(accountId: number): Promise<number | null> {
    const rows = await guard(() => this.sql.unsafe(FIRST_USAGE_TEXT.replace(/\?/g, '$1'), [accountId]));
    const first = (rows as unknown as Array<{ first_ms: number | string | null }>)[0]?.first_ms;
    return first == null ? null : Number(first);
  }

  async dailyTotals(
    accountIds: readonly number[],
    sinceMs: number,
  ): Promise<Array<{ accountId: number; subject: string; startMs: number; bytes: number }>> {
    if (accountIds.length === 0) return [];
    const text = dailyTotalsText('SELECT jsonb_array_elements_text($2::text::jsonb)::int').replace(/\?/g, () => '$1');
    const rows = await guard(() => this.sql.unsafe(text, [sinceMs, JSON.stringify(accountIds)]));
    return (
      rows as unknown as Array<{
        account_id: number;
        subject: string;
        start_ms: number | string;
        bytes: number | string;
      }>
    ).map((r) => ({
      accountId: r.account_id,
      subject: r.subject,
      startMs: Number(r.start_ms),
      bytes: Number(r.bytes),
    }));
  }

  async prune(period: UsagePeriod, beforeMs: number): Promise<number | 'busy'> {
    // Minutes are folded into their hours and days before they go (one held by a flush right now stays, for the next prune).
    if (period === 'minute') await this.fold(beforeMs, true);
    const r = await unlessBusy(
      () => this.sql`DELETE FROM usage_buckets WHERE period = ${period} AND start_ms < ${beforeMs} AND NOT unrolled`,
    );
    if (r === 'busy') return r;
    // Domain rows are kept as long as day buckets.
    if (period === 'day') await unlessBusy(() => this.sql`DELETE FROM usage_domains WHERE day_ms < ${beforeMs}`);
    await unlessBusy(() => this.sql`DELETE FROM usage_flushes WHERE at_ms < ${Date.now() - FLUSH_ID_KEEP_MS}`);
    return r.count;
  }
}
