// connection_log on PostgreSQL: every node appends its batches (one multi-row INSERT each) into daily
// partitions (UTC days, made on demand); any node reads every node's records. Retention and the size cap drop
// whole days. Same filters and rows as SQLite (connection-log-sql.ts).
import type { ConnectionLogEntry, ConnectionLogFilter, ConnectionLogRow, ConnectionLogStore } from '../types.js';
import { DAY_MS } from '../../../rules/time.js';
import { connectionLogQuery, toConnectionLogRow, type ConnectionLogSqlRow } from '../connection-log-sql.js';
import { guard } from './db.js';
import { unlessBusy, PgFamily } from './family.js';

/** The size cap's advisory lock: any fixed 64-bit number of our own. */
const CAP_SIZE_LOCK_KEY = 0x70726f787963; // "proxyc"
/** A size check gives up its lock after this long (the next check, a minute later, goes on). */
const CAP_SIZE_MAX_MS = 300_000;
const dayOf = (ms: number): number => Math.floor(ms / DAY_MS) * DAY_MS;
/** `connection_log_YYYYMMDD` → the day's first millisecond. */
function partitionDay(name: string): number | null {
  const m = /^connection_log_(\d{4})(\d{2})(\d{2})$/.exec(name);
  return m ? Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])) : null;
}

export class PgConnectionLogStore extends PgFamily implements ConnectionLogStore {
  /** Days whose partition this process made or saw (a day dropped since is made again on a failed insert). */
  private readonly days = new Set<number>();

  private async ensureDays(entries: readonly ConnectionLogEntry[], again = false): Promise<void> {
    if (again) this.days.clear();
    for (const day of new Set(entries.map((e) => dayOf(e.startedAt)))) {
      if (this.days.has(day)) continue;
      await guard(() => this.sql`SELECT proxyd_connection_log_day(${day})`);
      this.days.add(day);
    }
  }

  async insert(node: string, entries: readonly ConnectionLogEntry[]): Promise<'ok' | 'busy'> {
    if (entries.length === 0) return 'ok';
    const rows = entries.map((e) => ({
      started_ms: e.startedAt,
      node,
      request_id: e.requestId,
      protocol: e.protocol,
      source_ip: e.sourceIp,
      username: e.username,
      account_id: e.accountId >= 0 ? e.accountId : null,
      target: e.target,
      reason: e.reason,
      bytes_up: e.bytesUp,
      bytes_down: e.bytesDown,
      duration_ms: e.durationMs,
      exit: e.exit ?? null,
      exit_moved_from: e.exitMovedFrom ?? null,
      datagrams_up: e.datagramsUp ?? null,
      datagrams_down: e.datagramsDown ?? null,
    }));
    // Idempotent: the deadline may abandon an insert the server still commits, and the writer then sends the
    // batch again; request ids are unique, so the second one adds nothing.
    await this.ensureDays(entries);
    const write = () =>
      unlessBusy(
        () => this.sql`INSERT INTO connection_log ${this.sql(rows)} ON CONFLICT (request_id, started_ms) DO NOTHING`,
      );
    let r: Awaited<ReturnType<typeof write>>;
    try {
      r = await write();
    } catch (e) {
      // 23514: no partition for a row (its day was dropped by retention on another node, then a late record came).
      if ((e as { code?: string }).code !== '23514') throw e;
      await this.ensureDays(entries, true);
      r = await write();
    }
    return r === 'busy' ? 'busy' : 'ok';
  }

  async query(f: ConnectionLogFilter): Promise<ConnectionLogRow[]> {
    const q = connectionLogQuery(f);
    let n = 0;
    const text = q.text.replace(/\?/g, () => `$${++n}`);
    const rows = await unlessBusy(() => this.sql.unsafe(text, q.params));
    if (rows === 'busy') return [];
    return (rows as unknown as ConnectionLogSqlRow[]).map(toConnectionLogRow);
  }

  async newestId(): Promise<number> {
    const [r] = await guard(() => this.sql<{ id: number | null }[]>`SELECT max(id) AS id FROM connection_log`);
    return r?.id ?? 0;
  }

  private async partitions(): Promise<Array<{ name: string; day: number }>> {
    const rows = await guard(
      () => this.sql<{ name: string }[]>`
      SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = 'connection_log'::regclass`,
    );
    return rows
      .map((r) => ({ name: r.name, day: partitionDay(r.name) }))
      .filter((p): p is { name: string; day: number } => p.day !== null)
      .sort((a, b) => a.day - b.day);
  }

  /** Drops a day's partition; its rows as the statistics estimate them (counting them would read the whole day). */
  private async dropPartition(name: string): Promise<number> {
    const [est] = await guard(
      () => this.sql<{ n: number }[]>`SELECT greatest(reltuples, 0)::bigint AS n FROM pg_class WHERE relname = ${name}`,
    );
    await guard(() => this.sql.unsafe(`DROP TABLE IF EXISTS ${JSON.stringify(name)}`));
    this.days.delete(partitionDay(name) ?? -1);
    return Number(est?.n ?? 0);
  }

  async prune(beforeMs: number): Promise<number | 'busy'> {
    let total = 0;
    // Whole days before the cut: dropped, in constant time.
    for (const p of await this.partitions()) {
      if (p.day + DAY_MS > beforeMs) break;
      total += await this.dropPartition(p.name);
    }
    // The day the cut falls in: its older records, in slices.
    for (;;) {
      const r = await unlessBusy(
        () => this.sql`
        DELETE FROM connection_log WHERE id IN (SELECT id FROM connection_log WHERE started_ms < ${beforeMs} LIMIT 5000)`,
      );
      if (r === 'busy') return total > 0 ? total : 'busy';
      total += r.count;
      if (r.count < 5000) return total;
    }
  }

  async sizeBytes(): Promise<number> {
    const [r] = await guard(
      () => this.sql<{ bytes: string }[]>`
      SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0) AS bytes FROM pg_inherits WHERE inhparent = 'connection_log'::regclass`,
    );
    return Number(r?.bytes ?? 0);
  }

  async alone<T>(work: () => Promise<T>): Promise<T | 'skipped'> {
    // The lock's transaction stays open (idle) while `work` runs on other connections: one node caps the log at a time.
    return guard(
      () =>
        this.sql.begin(async (tx) => {
          const [lock] = await tx<{ ok: boolean }[]>`SELECT pg_try_advisory_xact_lock(${CAP_SIZE_LOCK_KEY}) AS ok`;
          if (!lock?.ok) return 'skipped' as const;
          return work();
        }) as Promise<T | 'skipped'>,
      CAP_SIZE_MAX_MS,
    );
  }

  async dropOldestDay(keepFromMs: number): Promise<boolean> {
    const oldest = (await this.partitions())[0];
    if (!oldest || oldest.day >= dayOf(keepFromMs)) return false;
    await this.dropPartition(oldest.name);
    return true;
  }
}
