// audit_log + audit_heads (migration 16): records chained per account, written inside the transaction of the
// change they record. SQLite serialises writers (IMMEDIATE), so reading the head and writing after it is safe.
import {
  GENESIS_HASH,
  sealRecord,
  type AuditChainRow,
  type AuditEntry,
  type AuditHead,
  type AuditRecord,
} from '../audit-chain.js';
import { auditRecord, chainRow, headOf, type AuditRow, type HeadRow } from '../audit-sql.js';
import type { AuditDraft, AuditQuery, AuditStore } from '../types.js';
import type { Db } from './db.js';
import { stmt } from './statements.js';

const COLUMNS =
  'id, account_id, seq, time_ms, actor_type, actor_id, source_ip, request_id, action, target, details, prev_hash, hash';

/** Writes audit records onto their chains; the caller's transaction holds the write lock. */
export class SqliteAuditLog {
  constructor(
    private readonly db: Db,
    private readonly nowMs: () => number,
  ) {}

  /** Appends `entry` to its account's chain; must run inside a write transaction. */
  write(entry: AuditEntry, onceKey: string | null = null): void {
    if (!this.db.inTransaction) throw new Error('an audit record is written inside the transaction of its change');
    const head = stmt<[number], { seq: number; hash: string }>(
      this.db,
      'SELECT seq, hash FROM audit_heads WHERE account_id = ?',
    ).get(entry.accountId) ?? { seq: 0, hash: GENESIS_HASH };
    // The id is part of what is hashed, so it is chosen before the insert (the write lock is held: no one else picks it).
    const next = stmt<[], { id: number }>(
      this.db,
      "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'audit_log'), 0), coalesce((SELECT max(id) FROM audit_log), 0)) + 1 AS id",
    ).get()!.id;
    const { record: r, detailsJson } = sealRecord(head, next, this.nowMs(), entry);
    stmt(this.db, `INSERT INTO audit_log (${COLUMNS}, once_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`).run(
      r.id,
      r.accountId,
      r.seq,
      r.timeMs,
      r.actor.type,
      r.actor.id,
      r.sourceIp,
      r.requestId,
      r.action,
      r.target,
      detailsJson,
      r.prevHash,
      r.hash,
      onceKey,
    );
    stmt(
      this.db,
      `INSERT INTO audit_heads (account_id, seq, hash, anchor_seq, anchor_hash) VALUES (?, ?, ?, 0, ?)
      ON CONFLICT (account_id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash`,
    ).run(r.accountId, r.seq, r.hash, GENESIS_HASH);
  }

  /**
   * Runs `work` and writes its record in one IMMEDIATE transaction (a savepoint inside one already open). `record`
   * says what to write from the result (null: nothing changed, nothing written); without `draft`, `work` alone.
   */
  audited<T>(accountId: number, draft: AuditDraft | undefined, work: () => T, record?: (r: T) => AuditDraft | null): T {
    if (!draft) return work();
    return this.db
      .transaction(() => {
        const r = work();
        const d = record ? record(r) : draft;
        if (d) this.write({ ...d, accountId });
        return r;
      })
      .immediate();
  }
}

export class SqliteAuditStore implements AuditStore {
  constructor(
    private readonly db: Db,
    private readonly log: SqliteAuditLog,
  ) {}

  async append(entry: AuditEntry, onceKey?: string): Promise<boolean> {
    return this.db
      .transaction(() => {
        if (
          onceKey &&
          stmt(this.db, 'SELECT 1 FROM audit_log WHERE account_id = ? AND once_key = ?').get(entry.accountId, onceKey)
        )
          return false;
        this.log.write(entry, onceKey ?? null);
        return true;
      })
      .immediate();
  }

  async list(q: AuditQuery): Promise<{ rows: AuditRecord[]; total: number }> {
    const where: string[] = [];
    const params: Array<string | number> = [];
    if (q.accountId !== undefined) {
      where.push('account_id = ?');
      params.push(q.accountId);
    }
    if (q.fromMs !== undefined) {
      where.push('time_ms >= ?');
      params.push(q.fromMs);
    }
    if (q.toMs !== undefined) {
      where.push('time_ms < ?');
      params.push(q.toMs);
    }
    if (q.actions?.length) {
      where.push(`action IN (${q.actions.map(() => '?').join(',')})`);
      params.push(...q.actions);
    }
    const w = where.length ? `WHERE ${where.join(' AND ')}` : '';
    const total = stmt<unknown[], { n: number }>(this.db, `SELECT count(*) AS n FROM audit_log ${w}`).get(...params)!.n;
    // One account's records by their place in its chain (its index); every account's by id.
    const by = q.accountId !== undefined ? 'seq' : 'id';
    const rows = stmt<unknown[], AuditRow>(
      this.db,
      `SELECT ${COLUMNS} FROM audit_log ${w} ORDER BY ${by} ${q.order === 'oldest' ? 'ASC' : 'DESC'} LIMIT ? OFFSET ?`,
    ).all(...params, q.limit, q.offset);
    return { rows: rows.map(auditRecord), total };
  }

  async chain(
    after: { accountId: number; seq: number },
    limit: number,
    onlyAccount?: number,
  ): Promise<AuditChainRow[]> {
    const rows =
      onlyAccount !== undefined
        ? stmt<[number, number, number], AuditRow>(
            this.db,
            `SELECT ${COLUMNS} FROM audit_log WHERE account_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
          ).all(onlyAccount, onlyAccount === after.accountId ? after.seq : -1, limit)
        : stmt<[number, number, number], AuditRow>(
            this.db,
            `SELECT ${COLUMNS} FROM audit_log WHERE (account_id, seq) > (?, ?) ORDER BY account_id, seq LIMIT ?`,
          ).all(after.accountId, after.seq, limit);
    return rows.map(chainRow);
  }

  async heads(accountId?: number): Promise<AuditHead[]> {
    const rows =
      accountId === undefined
        ? stmt<[], HeadRow>(this.db, 'SELECT * FROM audit_heads ORDER BY account_id').all()
        : stmt<[number], HeadRow>(this.db, 'SELECT * FROM audit_heads WHERE account_id = ?').all(accountId);
    return rows.map(headOf);
  }

  async prune(beforeMs: number): Promise<number> {
    return this.db
      .transaction(() => {
        const cuts = stmt<[number], { account_id: number; seq: number }>(
          this.db,
          'SELECT account_id, max(seq) AS seq FROM audit_log WHERE time_ms < ? GROUP BY account_id',
        ).all(beforeMs);
        let removed = 0;
        for (const c of cuts) {
          const last = stmt<[number, number], { hash: string }>(
            this.db,
            'SELECT hash FROM audit_log WHERE account_id = ? AND seq = ?',
          ).get(c.account_id, c.seq)!;
          removed += stmt(this.db, 'DELETE FROM audit_log WHERE account_id = ? AND seq <= ?').run(
            c.account_id,
            c.seq,
          ).changes;
          stmt(
            this.db,
            'UPDATE audit_heads SET anchor_seq = ?, anchor_hash = ? WHERE account_id = ? AND anchor_seq < ?',
          ).run(c.seq, last.hash, c.account_id, c.seq);
        }
        return removed;
      })
      .immediate();
  }
}
