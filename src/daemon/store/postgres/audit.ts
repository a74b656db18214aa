// The audit log on PostgreSQL (migration 20). A record is written inside its change's transaction: the account's
// chain head is locked first (INSERT … ON CONFLICT DO UPDATE takes the row lock), so two nodes writing one
// account's records at once queue on it and leave one chain; the record's id is drawn in the same statement.
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
import { guard, type Sql } from './db.js';

/**
 * Appends `entry` to its account's chain on `tx`, which must be a transaction (the head stays locked until it
 * commits). Two round trips: lock and read the head with the next id, then the record and the new head.
 */
export async function appendAudit(
  tx: Sql,
  nowMs: number,
  entry: AuditEntry,
  onceKey: string | null = null,
): Promise<void> {
  const [head] = await tx<{ seq: number; hash: string; id: number }[]>`
    INSERT INTO audit_heads (account_id, seq, hash, anchor_seq, anchor_hash) VALUES (${entry.accountId}, 0, ${GENESIS_HASH}, 0, ${GENESIS_HASH})
    ON CONFLICT (account_id) DO UPDATE SET seq = audit_heads.seq
    RETURNING seq, hash, nextval('audit_log_id_seq') AS id`;
  const { record: r, detailsJson } = sealRecord(head!, head!.id, nowMs, entry);
  await tx`
    WITH rec AS (
      INSERT INTO audit_log (id, account_id, seq, time_ms, actor_type, actor_id, source_ip, request_id, action, target, details, prev_hash, hash, once_key)
      VALUES (${r.id}, ${r.accountId}, ${r.seq}, ${r.timeMs}, ${r.actor.type}, ${r.actor.id}, ${r.sourceIp}, ${r.requestId}, ${r.action}, ${r.target},
              ${detailsJson}, ${r.prevHash}, ${r.hash}, ${onceKey})
    )
    UPDATE audit_heads SET seq = ${r.seq}, hash = ${r.hash} WHERE account_id = ${r.accountId}`;
}

/**
 * Runs `work` and writes its record in one transaction; without `draft`, `work` alone on the pool (as before
 * records existed). `record` says what to write from the result (null: nothing changed, nothing written).
 */
export async function audited<T>(
  sql: Sql,
  nowMs: () => number,
  accountId: number,
  draft: AuditDraft | undefined,
  work: (q: Sql) => Promise<T>,
  record?: (r: T) => AuditDraft | null,
  timeoutMs?: number,
): Promise<T> {
  if (!draft) return guard(() => work(sql), timeoutMs);
  return guard(
    () =>
      sql.begin(async (tx) => {
        const q = tx as unknown as Sql;
        const r = await work(q);
        const d = record ? record(r) : draft;
        if (d) await appendAudit(q, nowMs(), { ...d, accountId });
        return r;
      }) as Promise<T>,
    timeoutMs,
  );
}

export class PgAuditStore implements AuditStore {
  constructor(
    private readonly sql: Sql,
    private readonly nowMs: () => number,
  ) {}

  async append(entry: AuditEntry, onceKey?: string): Promise<boolean> {
    return guard(() =>
      this.sql.begin(async (tx) => {
        const q = tx as unknown as Sql;
        if (onceKey) {
          // The head's lock first: a second node with the same key waits here, then finds the first one's record.
          await q`INSERT INTO audit_heads (account_id, seq, hash, anchor_seq, anchor_hash) VALUES (${entry.accountId}, 0, ${GENESIS_HASH}, 0, ${GENESIS_HASH})
                  ON CONFLICT (account_id) DO UPDATE SET seq = audit_heads.seq`;
          const [seen] =
            await q`SELECT 1 FROM audit_log WHERE account_id = ${entry.accountId} AND once_key = ${onceKey}`;
          if (seen) return false;
        }
        await appendAudit(q, this.nowMs(), entry, onceKey ?? null);
        return true;
      }),
    );
  }

  async list(q: AuditQuery): Promise<{ rows: AuditRecord[]; total: number }> {
    const account = q.accountId ?? null;
    const from = q.fromMs ?? null;
    const to = q.toMs ?? null;
    // As JSON text: the pool reads no type catalogue (fetch_types off), so a JS array is no text[] parameter.
    const actions = q.actions?.length ? JSON.stringify(q.actions) : null;
    // One account's records by their place in its chain (its index); every account's by id.
    const by = account === null ? 'id' : 'seq';
    const order = this.sql`ORDER BY ${this.sql(by)} ${q.order === 'oldest' ? this.sql`ASC` : this.sql`DESC`}`;
    const rows = await guard(
      () => this.sql<Array<AuditRow & { total: number }>>`
        SELECT id, account_id, seq, time_ms, actor_type, actor_id, source_ip, request_id, action, target, details, prev_hash, hash, count(*) OVER ()::int AS total FROM audit_log
         WHERE (${account}::int IS NULL OR account_id = ${account}::int)
           AND (${from}::bigint IS NULL OR time_ms >= ${from}::bigint) AND (${to}::bigint IS NULL OR time_ms < ${to}::bigint)
           AND (${actions}::text::jsonb IS NULL OR action IN (SELECT jsonb_array_elements_text(${actions}::text::jsonb)))
         ${order} LIMIT ${q.limit} OFFSET ${q.offset}`,
    );
    let total = rows[0]?.total ?? 0;
    if (rows.length === 0 && q.offset > 0) {
      const [c] = await guard(
        () => this.sql<{ n: number }[]>`
          SELECT count(*)::int AS n FROM audit_log
           WHERE (${account}::int IS NULL OR account_id = ${account}::int)
             AND (${from}::bigint IS NULL OR time_ms >= ${from}::bigint) AND (${to}::bigint IS NULL OR time_ms < ${to}::bigint)
             AND (${actions}::text::jsonb IS NULL OR action IN (SELECT jsonb_array_elements_text(${actions}::text::jsonb)))`,
      );
      total = c!.n;
    }
    return { rows: rows.map(auditRecord), total };
  }

  async chain(
    after: { accountId: number; seq: number },
    limit: number,
    onlyAccount?: number,
  ): Promise<AuditChainRow[]> {
    const rows =
      onlyAccount !== undefined
        ? await guard(
            () => this.sql<AuditRow[]>`
            SELECT id, account_id, seq, time_ms, actor_type, actor_id, source_ip, request_id, action, target, details, prev_hash, hash FROM audit_log WHERE account_id = ${onlyAccount} AND seq > ${onlyAccount === after.accountId ? after.seq : -1}
             ORDER BY seq LIMIT ${limit}`,
            30_000,
          )
        : await guard(
            () => this.sql<AuditRow[]>`
            SELECT id, account_id, seq, time_ms, actor_type, actor_id, source_ip, request_id, action, target, details, prev_hash, hash FROM audit_log WHERE (account_id, seq) > (${after.accountId}::int, ${after.seq}::bigint)
             ORDER BY account_id, seq LIMIT ${limit}`,
            30_000,
          );
    return rows.map(chainRow);
  }

  async heads(accountId?: number): Promise<AuditHead[]> {
    const rows = await guard(
      () => this.sql<HeadRow[]>`
        SELECT account_id, seq, hash, anchor_seq, anchor_hash FROM audit_heads WHERE ${accountId ?? null}::int IS NULL OR account_id = ${accountId ?? null}::int ORDER BY account_id`,
    );
    return rows.map(headOf);
  }

  async prune(beforeMs: number): Promise<number> {
    const r = await guard(
      () => this.sql`
        WITH cut AS (SELECT account_id, max(seq) AS seq FROM audit_log WHERE time_ms < ${beforeMs} GROUP BY account_id),
        gone AS (DELETE FROM audit_log l USING cut WHERE l.account_id = cut.account_id AND l.seq <= cut.seq RETURNING l.account_id, l.seq, l.hash),
        last AS (SELECT DISTINCT ON (account_id) account_id, seq, hash FROM gone ORDER BY account_id, seq DESC),
        anchored AS (UPDATE audit_heads h SET anchor_seq = last.seq, anchor_hash = last.hash FROM last WHERE h.account_id = last.account_id AND h.anchor_seq < last.seq)
        SELECT count(*)::int AS n FROM gone`,
      60_000,
    );
    return (r[0] as { n: number } | undefined)?.n ?? 0;
  }
}
