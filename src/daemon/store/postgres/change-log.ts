// change_log on PostgreSQL (migration 2): what every node's admission view is loaded from and kept current by.
// Keys travel as JSON arrays (no array type lookup at connect). Identity values are handed out before commit, so a higher seq can become visible before a lower one: the
// reader remembers the holes below its position and reads them again until they fill or every transaction
// that was running when the hole was seen has ended (then it was a rollback), so no committed change is
// ever skipped, however long its transaction ran. LISTEN/NOTIFY wakes readers early.
import type {
  AdmissionAccountRow,
  AdmissionChangeRows,
  AdmissionIpRow,
  AdmissionSnapshotRows,
  AdmissionUserRow,
  ChangeKind,
  ChangeLogStore,
  SnapshotSource,
  TargetRulesRow,
} from '../types.js';
import type postgres from '#postgres';
import { guard, type Sql } from './db.js';

/** The pool or a transaction on it. */
type Q = Sql | postgres.TransactionSql<{ int8: number }>;

const CHANNEL = 'proxyd_changes';
/**
 * Memory bound only: a hole still open after this is dropped even if some transaction older than it is still
 * running (someone's session idle in a transaction). Longer than any transaction of ours (start-up repair: 5 min).
 */
const HOLE_MAX_AGE_MS = 10 * 60_000;
/** Memory bound: at most this many gaps (the newest) are kept from a snapshot. */
const SNAPSHOT_MAX_HOLES = 100_000;
const SNAPSHOT_TIMEOUT_MS = 30_000;
/** Users per cursor fetch when the reader takes them a page at a time. */
const STREAM_PAGE = 1_000;
/**
 * A snapshot whose reader takes the users a page at a time paces itself (a reload beside a serving view: a
 * million users take tens of seconds at a quarter of a core); the view follows the log meanwhile, so only a
 * hung connection is caught by this.
 */
const SNAPSHOT_STREAM_TIMEOUT_MS = 10 * 60_000;

export class PgChangeLogStore implements ChangeLogStore {
  /** seq → when it was first seen missing below the reader's position, and that snapshot's xmax (see noteHoles). */
  private readonly holes = new Map<number, { at: number; xmax: number }>();
  /**
   * Counts snapshots adopted (adoptSnapshot): a read of changes begun before one leaves `holes` alone, since it
   * read on from the position of the view being replaced.
   */
  private epoch = 0;

  constructor(
    private readonly sql: Sql,
    private readonly nowMs: () => number = Date.now,
    /** The database URL, for another thread's connection (snapshotSource); null: none can be opened. */
    private readonly url: string | null = null,
  ) {}

  async snapshot(
    onUsers?: (rows: readonly AdmissionUserRow[]) => void | Promise<void>,
  ): Promise<AdmissionSnapshotRows> {
    // One REPEATABLE READ transaction: the head and the rows come from the same database snapshot.
    return guard(
      () =>
        this.sql.begin('isolation level repeatable read read only', async (tx) => {
          const xids = await this.snapshotXids(tx);
          const seq = await this.head(tx);
          this.holes.clear();
          const gaps = { seqs: [] as number[], xmax: xids.xmax };
          // Only a transaction running now can fill a gap later, however far below the head its seq is.
          if (xids.xmin < xids.xmax) {
            const missing = await tx<{ seq: number }[]>`
              SELECT s AS seq FROM generate_series(${await this.trimmedThrough(tx)} + 1, ${seq}) s
               WHERE NOT EXISTS (SELECT 1 FROM change_log WHERE change_log.seq = s) ORDER BY s DESC LIMIT ${SNAPSHOT_MAX_HOLES}`;
            const at = this.nowMs();
            for (const r of missing) this.holes.set(r.seq, { at, xmax: xids.xmax });
            gaps.seqs = missing.map((r) => r.seq);
          }
          return {
            seq,
            gaps,
            // Streamed through a cursor when the reader takes pages: a million rows are never held at once.
            users: onUsers
              ? await tx<AdmissionUserRow[]>`SELECT username, account_id, password_hash, status FROM proxy_users`
                  .cursor(STREAM_PAGE, (rows) => onUsers(rows))
                  .then(() => [])
              : await tx<AdmissionUserRow[]>`SELECT username, account_id, password_hash, status FROM proxy_users`,
            ips: await tx<AdmissionIpRow[]>`${this.ipsQuery(tx)}`,
            accounts: await tx<AdmissionAccountRow[]>`SELECT id, status FROM accounts`,
            rules: await tx<TargetRulesRow[]>`SELECT account_id, deny, allow FROM target_rules`,
          };
        }) as Promise<AdmissionSnapshotRows>,
      onUsers ? SNAPSHOT_STREAM_TIMEOUT_MS : SNAPSHOT_TIMEOUT_MS,
    );
  }

  async changesSince(since: number, limit: number): Promise<AdmissionChangeRows | 'behind'> {
    // The epoch as the caller asks, not when the transaction gets going: the view notes its generation before this
    // call, and a snapshot adopted while BEGIN (or a pool connection) was awaited must make this answer stale here
    // too, or it would clear gaps of the adopted snapshot that the view then discards with the answer.
    const epoch = this.epoch;
    return guard(
      () =>
        this.sql.begin('isolation level repeatable read read only', async (tx) => {
          const xids = await this.snapshotXids(tx);
          const horizon = await this.trimmedThrough(tx);
          if (since < horizon) return 'behind' as const;
          // A gap at or below the horizon may have committed and been trimmed away since: only a reload is sure.
          for (const seq of this.holes.keys()) if (seq <= horizon) return 'behind' as const;
          const holes = [...this.holes.keys()];
          const log = await tx<{ seq: number; kind: ChangeKind; key: string }[]>`
            SELECT seq, kind, key FROM (
              (SELECT seq, kind, key FROM change_log WHERE seq > ${since} ORDER BY seq LIMIT ${limit})
              UNION ALL
              SELECT seq, kind, key FROM change_log WHERE seq <= ${since} AND seq IN (SELECT jsonb_array_elements_text(${JSON.stringify(holes)}::text::jsonb)::bigint)
            ) l ORDER BY seq LIMIT ${limit}`;
          const ahead = log.filter((r) => r.seq > since).map((r) => r.seq);
          // A snapshot adopted meanwhile: its gaps are the ones to follow now, and this answer is discarded.
          const current = epoch === this.epoch;
          if (current) {
            for (const r of log) this.holes.delete(r.seq);
            this.expireHoles(xids.xmin);
          }
          // A position past the head: the database was replaced or restored from a backup.
          if (ahead.length === 0 && log.length === 0)
            return since > (await this.head(tx)) ? ('behind' as const) : empty(since);
          if (current) this.noteHoles(since, ahead, xids.xmax);
          const out: AdmissionChangeRows = {
            seq: ahead.length ? ahead[ahead.length - 1]! : since,
            rows: ahead.length,
            users: [],
            ips: [],
            accounts: [],
            rules: [],
          };
          const keys = { user: new Set<string>(), ip: new Set<string>(), account: new Set<string>() };
          for (const r of log) keys[r.kind].add(r.key);
          if (keys.user.size) {
            const names = [...keys.user];
            const rows = await tx<
              AdmissionUserRow[]
            >`SELECT username, account_id, password_hash, status FROM proxy_users WHERE username IN (SELECT jsonb_array_elements_text(${JSON.stringify(names)}::text::jsonb))`;
            const by = new Map(rows.map((r) => [r.username, r]));
            out.users = names.map((username) => ({ username, row: by.get(username) ?? null }));
          }
          if (keys.ip.size) {
            const ips = [...keys.ip];
            const rows = await tx<
              AdmissionIpRow[]
            >`${this.ipsQuery(tx)} AND c.ip IN (SELECT jsonb_array_elements_text(${JSON.stringify(ips)}::text::jsonb))`;
            const by = new Map(rows.map((r) => [r.ip, r]));
            out.ips = ips.map((ip) => ({ ip, row: by.get(ip) ?? null }));
          }
          if (keys.account.size) {
            const ids = [...keys.account].map(Number);
            const rows = await tx<
              AdmissionAccountRow[]
            >`SELECT id, status FROM accounts WHERE id IN (SELECT jsonb_array_elements_text(${JSON.stringify(ids)}::text::jsonb)::int)`;
            const by = new Map(rows.map((r) => [r.id, r]));
            out.accounts = ids.map((id) => ({ id, row: by.get(id) ?? null }));
            // An account's key also names its target rules (their own changes are logged under it).
            const rules = await tx<
              TargetRulesRow[]
            >`SELECT account_id, deny, allow FROM target_rules WHERE account_id IN (SELECT jsonb_array_elements_text(${JSON.stringify(ids)}::text::jsonb)::int)`;
            const byRules = new Map(rules.map((r) => [r.account_id, r]));
            out.rules = ids.map((id) => ({ id, row: byRules.get(id) ?? null }));
          }
          return out;
        }) as Promise<AdmissionChangeRows | 'behind'>,
    );
  }

  snapshotSource(): SnapshotSource | null {
    return this.url === null ? null : { backend: 'postgres', url: this.url };
  }

  /**
   * The gaps of a snapshot taken on another connection become the ones this reader reads again; any it held
   * belonged to the position of the view being replaced (a gap the snapshot saw filled is in its rows already).
   */
  adoptSnapshot(snap: Pick<AdmissionSnapshotRows, 'gaps'>): void {
    this.epoch++;
    this.holes.clear();
    const at = this.nowMs();
    for (const seq of snap.gaps?.seqs ?? []) this.holes.set(seq, { at, xmax: snap.gaps!.xmax });
  }

  async headSeq(): Promise<number> {
    return guard(() => this.head(this.sql));
  }

  async horizon(): Promise<number> {
    return guard(() => this.trimmedThrough(this.sql));
  }

  async trim(keep: number): Promise<number> {
    return guard(() =>
      this.sql.begin(async (tx) => {
        const through = (await this.head(tx)) - Math.max(1, keep);
        if (through - (await this.trimmedThrough(tx)) < Math.max(1, Math.floor(keep / 10))) return 0;
        // The horizon row is the lock: two nodes trimming at once take turns.
        await tx`UPDATE change_log_horizon SET trimmed_through = greatest(trimmed_through, ${through}) WHERE id = 1`;
        const r = await tx`DELETE FROM change_log WHERE seq <= ${through}`;
        return r.count;
      }),
    );
  }

  watch(wake: () => void, onError?: (err: Error) => void): () => void {
    let stopped = false;
    let unlisten: (() => Promise<void>) | null = null;
    let retry: NodeJS.Timeout | null = null;
    const subscribe = () => {
      // postgres.js keeps LISTEN on a connection of its own and re-subscribes after a reconnect; onlisten
      // runs on every (re)subscription, when changes may have been missed: the reader catches up from the log.
      this.sql
        .listen(
          CHANNEL,
          () => wake(),
          () => wake(),
        )
        .then((meta) => {
          if (stopped) void meta.unlisten().catch(() => {});
          else unlisten = meta.unlisten;
        })
        .catch((err: Error) => {
          onError?.(err);
          if (!stopped) retry = setTimeout(subscribe, 5_000).unref();
        });
    };
    subscribe();
    return () => {
      stopped = true;
      if (retry) clearTimeout(retry);
      void unlisten?.().catch(() => {});
    };
  }

  private ipsQuery(tx: Q) {
    return tx`SELECT e.ip, e.account_id, e.status FROM ip_claims c
      JOIN whitelist_entries e ON e.ip = c.ip AND e.account_id = c.account_id AND e.deleted_at IS NULL
      WHERE c.state = 'held'`;
  }

  private async head(tx: Q): Promise<number> {
    const [r] = await tx<{ seq: number | null }[]>`SELECT max(seq) AS seq FROM change_log`;
    return r?.seq ?? (await this.trimmedThrough(tx));
  }

  private async trimmedThrough(tx: Q): Promise<number> {
    const [r] = await tx<{ t: number }[]>`SELECT trimmed_through AS t FROM change_log_horizon WHERE id = 1`;
    return r?.t ?? 0;
  }

  /** The reading transaction's snapshot: xmin (oldest transaction still running), xmax (first not yet started). */
  private async snapshotXids(tx: Q): Promise<{ xmin: number; xmax: number }> {
    const [r] = await tx<{ xmin: number; xmax: number }[]>`
      SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin, pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xmax`;
    return r!;
  }

  /**
   * Every seq in (from, last seen] not among `seen` (ascending) is a hole: in flight, or rolled back. Its
   * writer had its transaction id before a higher seq committed, so that id is below this snapshot's xmax.
   */
  private noteHoles(from: number, seen: number[], xmax: number): void {
    const now = this.nowMs();
    let expect = from + 1;
    for (const s of seen) {
      for (; expect < s; expect++) if (!this.holes.has(expect)) this.holes.set(expect, { at: now, xmax });
      expect = s + 1;
    }
  }

  /**
   * Called after the holes were read in a snapshot whose oldest running transaction is `xmin`: a hole whose
   * every possible writer (ids below its xmax) has ended would have been read had it committed: a rollback.
   */
  private expireHoles(xmin: number): void {
    const oldest = this.nowMs() - HOLE_MAX_AGE_MS;
    for (const [seq, h] of this.holes) if (h.xmax <= xmin || h.at < oldest) this.holes.delete(seq);
  }
}

function empty(seq: number): AdmissionChangeRows {
  return { seq, rows: 0, users: [], ips: [], accounts: [], rules: [] };
}
