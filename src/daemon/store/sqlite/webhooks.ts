// webhooks / webhook_events on SQLite: a claim is one write transaction, so two processes on one file never take one event.
import type { AuditDraft, Webhook, WebhookEvent, WebhookEventState, WebhookStore } from '../types.js';
import type { SqliteAuditLog } from './audit.js';
import { EVENT_COLUMNS, toEvent, toWebhook, type EventRow, type WebhookRow } from '../webhooks-sql.js';
import { isBusyError, type Db } from './db.js';
import { stmt } from './statements.js';

export class SqliteWebhookStore implements WebhookStore {
  constructor(
    private readonly db: Db,
    private readonly audit: SqliteAuditLog,
    /** A connection that never waits for the write lock (the claim runs in the process that relays tunnels). */
    private readonly writer: () => Db = () => db,
  ) {}

  async set(w: Webhook, audit?: AuditDraft): Promise<void> {
    this.audit.audited(w.accountId, audit, () => this.write(w));
  }

  private write(w: Webhook): void {
    stmt(
      this.db,
      `INSERT INTO webhooks (account_id, url, thresholds, secret) VALUES (?, ?, ?, ?)
      ON CONFLICT (account_id) DO UPDATE SET url = excluded.url, thresholds = excluded.thresholds, secret = excluded.secret`,
    ).run(w.accountId, w.url, w.thresholds.join(','), w.secret);
  }

  async remove(accountId: number, audit?: AuditDraft): Promise<boolean> {
    return this.audit.audited(
      accountId,
      audit,
      () => stmt(this.db, 'DELETE FROM webhooks WHERE account_id = ?').run(accountId).changes > 0,
      (removed) => (removed ? audit! : null),
    );
  }

  async get(accountId: number): Promise<Webhook | null> {
    const r = stmt<[number], WebhookRow>(
      this.db,
      'SELECT account_id, url, thresholds, secret FROM webhooks WHERE account_id = ?',
    ).get(accountId);
    return r ? toWebhook(r) : null;
  }

  async all(): Promise<Webhook[]> {
    return stmt<[], WebhookRow>(this.db, 'SELECT account_id, url, thresholds, secret FROM webhooks')
      .all()
      .map(toWebhook);
  }

  async addEvent(e: {
    id: string;
    accountId: number;
    type: string;
    onceKey: string;
    body: string;
    nowMs: number;
  }): Promise<boolean> {
    return (
      stmt(
        this.db,
        `INSERT INTO webhook_events (id, account_id, type, once_key, body, next_at_ms, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (account_id, once_key) DO NOTHING`,
      ).run(e.id, e.accountId, e.type, e.onceKey, e.body, e.nowMs, e.nowMs).changes > 0
    );
  }

  async claimDue(node: string, nowMs: number, leaseMs: number, max: number): Promise<WebhookEvent[]> {
    // A read first (WAL readers never wait): with nothing due, no write lock is asked for at all.
    const due = stmt<[number, number], { n: number }>(
      this.db,
      `SELECT count(*) AS n FROM webhook_events
      WHERE state = 'pending' AND next_at_ms <= ? AND (claimed_until_ms IS NULL OR claimed_until_ms < ?)`,
    ).get(nowMs, nowMs);
    if (!due || due.n === 0) return [];
    // The claim on the no-wait connection: a lock held elsewhere means "next tick", never a stalled event loop.
    const w = this.writer();
    try {
      return w
        .transaction(() => {
          const rows = stmt<[number, number, number], EventRow>(
            w,
            `SELECT ${EVENT_COLUMNS} FROM webhook_events
            WHERE state = 'pending' AND next_at_ms <= ? AND (claimed_until_ms IS NULL OR claimed_until_ms < ?) ORDER BY next_at_ms LIMIT ?`,
          ).all(nowMs, nowMs, max);
          const claim = stmt(w, 'UPDATE webhook_events SET claimed_by = ?, claimed_until_ms = ? WHERE id = ?');
          for (const r of rows) claim.run(node, nowMs + leaseMs, r.id);
          return rows.map(toEvent);
        })
        .immediate();
    } catch (e) {
      if (isBusyError(e)) return [];
      throw e;
    }
  }

  async pendingCount(): Promise<number> {
    return (
      stmt<[], { n: number }>(this.db, "SELECT count(*) AS n FROM webhook_events WHERE state = 'pending'").get()?.n ?? 0
    );
  }

  async finish(
    id: string,
    node: string,
    o: { state: WebhookEventState; attempts: number; lastStatus: number | null; nextAtMs: number },
  ): Promise<void> {
    stmt(
      this.db,
      `UPDATE webhook_events SET state = ?, attempts = ?, last_status = ?, next_at_ms = ?, claimed_by = NULL, claimed_until_ms = NULL
      WHERE id = ? AND claimed_by = ?`,
    ).run(o.state, o.attempts, o.lastStatus, o.nextAtMs, id, node);
  }

  async events(accountId: number, limit: number): Promise<WebhookEvent[]> {
    return stmt<[number, number], EventRow>(
      this.db,
      `SELECT ${EVENT_COLUMNS} FROM webhook_events WHERE account_id = ? ORDER BY created_at_ms DESC, id DESC LIMIT ?`,
    )
      .all(accountId, limit)
      .map(toEvent);
  }
}
