// change_log (migration 3): what the admission view is loaded from and kept current by. The triggers in the
// migration write the rows; this module reads snapshots and changes, and trims the log to a bounded size.
import type { Db } from './db.js';
import { stmt } from './statements.js';

export type ChangeKind = 'user' | 'ip' | 'account';

export interface AdmissionUserRow {
  username: string;
  account_id: number;
  password_hash: string;
  status: 'active' | 'disabled';
}

/** An IP that admits someone: a held claim with its owner's live entry. */
export interface AdmissionIpRow {
  ip: string;
  account_id: number;
  status: 1 | 2;
}

export interface AdmissionAccountRow {
  id: number;
  status: string;
}

export interface AdmissionSnapshotRows {
  seq: number;
  users: AdmissionUserRow[];
  ips: AdmissionIpRow[];
  accounts: AdmissionAccountRow[];
}

/** Current state of every key named by the log rows read; `null` state: the key no longer admits. */
export interface AdmissionChangeRows {
  /** Sequence of the last log row read (the reader's new position). */
  seq: number;
  /** Log rows read (a batch shorter than the limit means the reader is at the head). */
  rows: number;
  users: Array<{ username: string; row: AdmissionUserRow | null }>;
  ips: Array<{ ip: string; row: AdmissionIpRow | null }>;
  accounts: Array<{ id: number; row: AdmissionAccountRow | null }>;
}

const USERS = 'SELECT username, account_id, password_hash, status FROM proxy_users';
const IPS = `SELECT e.ip, e.account_id, e.status FROM ip_claims c
  JOIN whitelist_entries e ON e.ip = c.ip AND e.account_id = c.account_id AND e.deleted_at IS NULL
  WHERE c.state = 'held'`;
const ACCOUNTS = 'SELECT id, status FROM accounts';

export class ChangeLogStore {
  private readonly snapshotTx;
  private readonly changesTx;

  constructor(private readonly db: Db) {
    // One read transaction each: the sequence and the rows come from the same database snapshot (WAL).
    this.snapshotTx = db.transaction(
      (): AdmissionSnapshotRows => ({
        seq: this.headSeq(),
        users: stmt<[], AdmissionUserRow>(db, USERS).all(),
        ips: stmt<[], AdmissionIpRow>(db, IPS).all(),
        accounts: stmt<[], AdmissionAccountRow>(db, ACCOUNTS).all(),
      }),
    );
    this.changesTx = db.transaction((since: number, limit: number): AdmissionChangeRows | 'behind' => {
      if (since < this.horizon()) return 'behind';
      const log = stmt<[number, number], { seq: number; kind: ChangeKind; key: string }>(db,
        'SELECT seq, kind, key FROM change_log WHERE seq > ? ORDER BY seq LIMIT ?',
      ).all(since, limit);
      // A position past the head: the database was replaced or restored from a backup.
      if (log.length === 0) return since > this.headSeq() ? 'behind' : { seq: since, rows: 0, users: [], ips: [], accounts: [] };
      const out: AdmissionChangeRows = { seq: log[log.length - 1]!.seq, rows: log.length, users: [], ips: [], accounts: [] };
      const seen = new Set<string>();
      for (const { kind, key } of log) {
        const k = `${kind}\0${key}`;
        if (seen.has(k)) continue;
        seen.add(k);
        if (kind === 'user') out.users.push({ username: key, row: stmt<[string], AdmissionUserRow>(db, `${USERS} WHERE username = ?`).get(key) ?? null });
        else if (kind === 'ip') out.ips.push({ ip: key, row: stmt<[string], AdmissionIpRow>(db, `${IPS} AND c.ip = ?`).get(key) ?? null });
        else out.accounts.push({ id: Number(key), row: stmt<[number], AdmissionAccountRow>(db, `${ACCOUNTS} WHERE id = ?`).get(Number(key)) ?? null });
      }
      return out;
    });
  }

  /** Everything that admits, and the log sequence it is current to. */
  snapshot(): AdmissionSnapshotRows {
    return this.snapshotTx.deferred();
  }

  /** The current state of every key changed after `since` (up to `limit` log rows), or 'behind' when trimmed past it. */
  changesSince(since: number, limit: number): AdmissionChangeRows | 'behind' {
    return this.changesTx.deferred(since, limit);
  }

  /** Sequence of the newest row (the trim horizon when the log is empty). */
  headSeq(): number {
    const r = stmt<[], { seq: number | null }>(this.db, 'SELECT MAX(seq) AS seq FROM change_log').get();
    return r?.seq ?? this.horizon();
  }

  horizon(): number {
    return stmt<[], { t: number }>(this.db, 'SELECT trimmed_through AS t FROM change_log_horizon WHERE id = 1').get()?.t ?? 0;
  }

  /**
   * Keeps the newest `keep` rows (at least one, so the head sequence survives). Writes only when the log
   * has grown past `keep` by a tenth, so the many nodes that call this rarely contend for the write lock.
   */
  trim(keep: number): number {
    const head = this.headSeq();
    const through = head - Math.max(1, keep);
    if (through - this.horizon() < Math.max(1, Math.floor(keep / 10))) return 0;
    return this.db
      .transaction(() => {
        const n = stmt<[number]>(this.db, 'DELETE FROM change_log WHERE seq <= ?').run(through).changes;
        stmt<[number]>(this.db, 'UPDATE change_log_horizon SET trimmed_through = MAX(trimmed_through, ?) WHERE id = 1').run(through);
        return n;
      })
      .immediate();
  }
}
