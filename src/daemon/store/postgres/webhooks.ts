// webhooks / webhook_events on PostgreSQL: a claim skips rows another node is claiming (SKIP LOCKED), so each
// event is sent by one node of the fleet at a time.
import type { AuditDraft, Webhook, WebhookEvent, WebhookEventState, WebhookStore } from '../types.js';
import { audited } from './audit.js';
import { toEvent, toWebhook, type EventRow, type WebhookRow } from '../webhooks-sql.js';
import { guard } from './db.js';
import { PgFamily } from './family.js';

export class PgWebhookStore extends PgFamily implements WebhookStore {
  async set(w: Webhook, audit?: AuditDraft): Promise<void> {
    await audited(
      this.sql,
      this.nowMs,
      w.accountId,
      audit,
      (
        q,
      ) => q`INSERT INTO webhooks (account_id, url, thresholds, secret) VALUES (${w.accountId}, ${w.url}, ${w.thresholds.join(',')}, ${w.secret})
      ON CONFLICT (account_id) DO UPDATE SET url = excluded.url, thresholds = excluded.thresholds, secret = excluded.secret`,
    );
  }

  async remove(accountId: number, audit?: AuditDraft): Promise<boolean> {
    const r = await audited(
      this.sql,
      this.nowMs,
      accountId,
      audit,
      (q) => q`DELETE FROM webhooks WHERE account_id = ${accountId}`,
      (r) => (r.count > 0 ? audit! : null),
    );
    return r.count > 0;
  }

  async get(accountId: number): Promise<Webhook | null> {
    const [r] = await guard(
      () =>
        this.sql<
          WebhookRow[]
        >`SELECT account_id, url, thresholds, secret FROM webhooks WHERE account_id = ${accountId}`,
    );
    return r ? toWebhook(r) : null;
  }

  async all(): Promise<Webhook[]> {
    return (await guard(() => this.sql<WebhookRow[]>`SELECT account_id, url, thresholds, secret FROM webhooks`)).map(
      toWebhook,
    );
  }

  async addEvent(e: {
    id: string;
    accountId: number;
    type: string;
    onceKey: string;
    body: string;
    nowMs: number;
  }): Promise<boolean> {
    const r = await guard(
      () => this.sql`INSERT INTO webhook_events (id, account_id, type, once_key, body, next_at_ms, created_at_ms)
      VALUES (${e.id}, ${e.accountId}, ${e.type}, ${e.onceKey}, ${e.body}, ${e.nowMs}, ${e.nowMs}) ON CONFLICT (account_id, once_key) DO NOTHING`,
    );
    return r.count > 0;
  }

  async claimDue(node: string, nowMs: number, leaseMs: number, max: number): Promise<WebhookEvent[]> {
    const rows = await guard(
      () => this.sql<EventRow[]>`
      UPDATE webhook_events SET claimed_by = ${node}, claimed_until_ms = ${nowMs + leaseMs}
      WHERE id IN (SELECT id FROM webhook_events WHERE state = 'pending' AND next_at_ms <= ${nowMs} AND (claimed_until_ms IS NULL OR claimed_until_ms < ${nowMs})
        ORDER BY next_at_ms LIMIT ${max} FOR UPDATE SKIP LOCKED)
      RETURNING id, account_id, type, body, state, attempts, last_status, next_at_ms, created_at_ms`,
    );
    return rows.map(toEvent);
  }

  async pendingCount(): Promise<number> {
    const [r] = await guard(
      () => this.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM webhook_events WHERE state = 'pending'`,
    );
    return r?.n ?? 0;
  }

  async finish(
    id: string,
    node: string,
    o: { state: WebhookEventState; attempts: number; lastStatus: number | null; nextAtMs: number },
  ): Promise<void> {
    await guard(
      () => this
        .sql`UPDATE webhook_events SET state = ${o.state}, attempts = ${o.attempts}, last_status = ${o.lastStatus}, next_at_ms = ${o.nextAtMs},
      claimed_by = NULL, claimed_until_ms = NULL WHERE id = ${id} AND claimed_by = ${node}`,
    );
  }

  async events(accountId: number, limit: number): Promise<WebhookEvent[]> {
    const rows = await guard(
      () => this.sql<
        EventRow[]
      >`SELECT id, account_id, type, body, state, attempts, last_status, next_at_ms, created_at_ms
      FROM webhook_events WHERE account_id = ${accountId} ORDER BY created_at_ms DESC, id DESC LIMIT ${limit}`,
    );
    return rows.map(toEvent);
  }
}
