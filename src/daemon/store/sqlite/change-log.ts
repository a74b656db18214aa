// change_log (migration 3): what the admission view is loaded from and kept current by. The triggers in the
// migration write the rows; this module reads snapshots and changes, trims the log to a bounded size, and
// wakes readers on a watch of the data dir (every commit by any process appends to proxyd.db-wal).
import { watch } from 'node:fs';
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
import { DB_FILE, type Db } from './db.js';
import { stmt } from './statements.js';

const USERS = 'SELECT username, account_id, password_hash, status FROM proxy_users';
const IPS = `SELECT e.ip, e.account_id, e.status FROM ip_claims c
  JOIN whitelist_entries e ON e.ip = c.ip AND e.account_id = c.account_id AND e.deleted_at IS NULL
  WHERE c.state = 'held'`;
const ACCOUNTS = 'SELECT id, status FROM accounts';
const SNAPSHOT_PAGE = 10_000;
/** Users per page when handed over as read: about a millisecond of the event loop each (reading and storing). */
const STREAM_PAGE = 500;
const RULES = 'SELECT account_id, deny, allow FROM target_rules';
/**
 * The log after a position. Its LIMIT is written in (a statement per batch size, cached by stmt()): SQLite plans with a
 * bound LIMIT's value, so binding one expires the statement, and every catch-up (each poll and wake-up) parsed and
 * planned it again, ~30 µs (docs/benchmarks/tunnel-cost.md).
 */
const CHANGES = 'SELECT seq, kind, key FROM change_log WHERE seq > ? ORDER BY seq';
/** The log's head and how far it was trimmed, read together (one statement reads one snapshot). */
const HEAD_AND_HORIZON =
  'SELECT (SELECT MAX(seq) FROM change_log) AS head, (SELECT trimmed_through FROM change_log_horizon WHERE id = 1) AS t';

export class SqliteChangeLogStore implements ChangeLogStore {
  private readonly snapshotTx;
  private readonly changesTx;

  constructor(
    private readonly db: Db,
    private readonly dataDir: string,
  ) {
    // One read transaction each: the sequence and the rows come from the same database snapshot (WAL).
    this.snapshotTx = db.transaction((): AdmissionSnapshotRows => ({
      seq: this.head(),
      users: [],
      ips: stmt<[], AdmissionIpRow>(db, IPS).all(),
      accounts: stmt<[], AdmissionAccountRow>(db, ACCOUNTS).all(),
      rules: stmt<[], TargetRulesRow>(db, RULES).all(),
    }));
    this.changesTx = db.transaction((since: number, limit: number): AdmissionChangeRows | 'behind' => {
      if (since < this.trimmedThrough()) return 'behind';
      type LogRow = { seq: number; kind: ChangeKind; key: string };
      const log = Number.isSafeInteger(limit)
        ? stmt<[number], LogRow>(db, `${CHANGES} LIMIT ${limit}`).all(since)
        : stmt<[number, number], LogRow>(db, `${CHANGES} LIMIT ?`).all(since, limit);
      // A position past the head: the database was replaced or restored from a backup.
      if (log.length === 0)
        return since > this.head() ? 'behind' : { seq: since, rows: 0, users: [], ips: [], accounts: [], rules: [] };
      const out: AdmissionChangeRows = {
        seq: log[log.length - 1]!.seq,
        rows: log.length,
        users: [],
        ips: [],
        accounts: [],
        rules: [],
      };
      const seen = new Set<string>();
      for (const { kind, key } of log) {
        const k = `${kind}\0${key}`;
        if (seen.has(k)) continue;
        seen.add(k);
        if (kind === 'user')
          out.users.push({
            username: key,
            row: stmt<[string], AdmissionUserRow>(db, `${USERS} WHERE username = ?`).get(key) ?? null,
          });
        else if (kind === 'ip')
          out.ips.push({ ip: key, row: stmt<[string], AdmissionIpRow>(db, `${IPS} AND c.ip = ?`).get(key) ?? null });
        else {
          // An account's key also names its target rules (their own changes are logged under it).
          const id = Number(key);
          out.accounts.push({
            id,
            row: stmt<[number], AdmissionAccountRow>(db, `${ACCOUNTS} WHERE id = ?`).get(id) ?? null,
          });
          out.rules.push({
            id,
            row: stmt<[number], TargetRulesRow>(db, `${RULES} WHERE account_id = ?`).get(id) ?? null,
          });
        }
      }
      return out;
    });
  }

  /**
   * Small tables in one read transaction; proxy users (a million, on a provider) in pages of SNAPSHOT_PAGE by
   * rowid with a turn of the event loop between them, read after the head: a user changed meanwhile is also in
   * the log past that head, and the catch-up that follows reads it again, so the view ends up exact.
   */
  async snapshot(
    onUsers?: (rows: readonly AdmissionUserRow[]) => void | Promise<void>,
  ): Promise<AdmissionSnapshotRows> {
    const snap = this.snapshotTx.deferred();
    const page = stmt<[number, number], AdmissionUserRow & { rid: number }>(
      this.db,
      `SELECT rowid AS rid, username, account_id, password_hash, status FROM proxy_users WHERE rowid > ? ORDER BY rowid LIMIT ?`,
    );
    const size = onUsers ? STREAM_PAGE : SNAPSHOT_PAGE;
    for (let after = 0; ;) {
      const rows = page.all(after, size);
      // The reader's own wait (it paces a reload) stands for the turn of the event loop between pages.
      const taken = onUsers?.(rows);
      if (!onUsers)
        for (const r of rows)
          snap.users.push({
            username: r.username,
            account_id: r.account_id,
            password_hash: r.password_hash,
            status: r.status,
          });
      if (taken) await taken;
      if (rows.length < size) break;
      after = rows[rows.length - 1]!.rid;
      if (!taken) await new Promise<void>((r) => setImmediate(r));
    }
    return snap;
  }

  async changesSince(since: number, limit: number): Promise<AdmissionChangeRows | 'behind'> {
    // Nothing new, what nearly every poll and wake-up finds (this process's own connection-log and usage writes wake
    // it too): one statement, no transaction. The transaction's answer all the same: at the head, not trimmed past it.
    const at = stmt<[], { head: number | null; t: number | null }>(this.db, HEAD_AND_HORIZON).get();
    if (at && at.head !== null && at.head === since && since >= (at.t ?? 0))
      return { seq: since, rows: 0, users: [], ips: [], accounts: [], rules: [] };
    return this.changesTx.deferred(since, limit);
  }

  async headSeq(): Promise<number> {
    return this.head();
  }

  async horizon(): Promise<number> {
    return this.trimmedThrough();
  }

  watch(wake: () => void, onError?: (err: Error) => void): () => void {
    try {
      const watcher = watch(this.dataDir, { persistent: false }, (_event, name) => {
        if (name === null || name.startsWith(DB_FILE)) wake();
      });
      watcher.on('error', (err) => {
        watcher.close();
        onError?.(err);
      });
      return () => watcher.close();
    } catch (err) {
      // No inotify (watch limit, network file system): the reader's poll alone keeps it current.
      onError?.(err as Error);
      return () => {};
    }
  }

  snapshotSource(): SnapshotSource {
    return { backend: 'sqlite', dataDir: this.dataDir };
  }

  /** Nothing to hand over: one writer at a time commits the log in sequence order, so a snapshot leaves no gaps. */
  adoptSnapshot(): void {}

  private head(): number {
    const r = stmt<[], { seq: number | null }>(this.db, 'SELECT MAX(seq) AS seq FROM change_log').get();
    return r?.seq ?? this.trimmedThrough();
  }

  private trimmedThrough(): number {
    return (
      stmt<[], { t: number }>(this.db, 'SELECT trimmed_through AS t FROM change_log_horizon WHERE id = 1').get()?.t ?? 0
    );
  }

  /**
   * Keeps the newest `keep` rows (at least one, so the head sequence survives). Writes only when the log
   * has grown past `keep` by a tenth, so the many nodes that call this rarely contend for the write lock.
   */
  async trim(keep: number): Promise<number> {
    const through = this.head() - Math.max(1, keep);
    if (through - this.trimmedThrough() < Math.max(1, Math.floor(keep / 10))) return 0;
    return this.db
      .transaction(() => {
        const n = stmt<[number]>(this.db, 'DELETE FROM change_log WHERE seq <= ?').run(through).changes;
        stmt<[number]>(
          this.db,
          'UPDATE change_log_horizon SET trimmed_through = MAX(trimmed_through, ?) WHERE id = 1',
        ).run(through);
        return n;
      })
      .immediate();
  }
}
