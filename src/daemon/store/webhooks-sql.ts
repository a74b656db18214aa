// Webhook rows, shared by both backends.
import type { Webhook, WebhookEvent, WebhookEventState } from './types.js';

export interface WebhookRow {
  account_id: number;
  url: string;
  thresholds: string;
  secret: string;
}

export interface EventRow {
  id: string;
  account_id: number;
  type: string;
  body: string;
  state: string;
  attempts: number;
  last_status: number | null;
  next_at_ms: number | string;
  created_at_ms: number | string;
}

export const EVENT_COLUMNS = 'id, account_id, type, body, state, attempts, last_status, next_at_ms, created_at_ms';

export const toWebhook = (r: WebhookRow): Webhook => ({
  accountId: r.account_id,
  url: r.url,
  thresholds: r.thresholds.split(',').filter(Boolean).map(Number),
  secret: r.secret,
});

export const toEvent = (r: EventRow): WebhookEvent => ({
  id: r.id,
  accountId: r.account_id,
  type: r.type,
  body: r.body,
  state: r.state as WebhookEventState,
  attempts: r.attempts,
  lastStatus: r.last_status,
  nextAtMs: Number(r.next_at_ms),
  createdAtMs: Number(r.created_at_ms),
});
