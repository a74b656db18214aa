// Webhook events (docs/operations.md, "Webhooks"): every node looks every 2 s for accounts past a threshold of their
// plan's traffic limit, or past their plan's expiry, and records the event once per threshold and period (the
// database refuses a second record of the same key, whichever node tries); then it claims due events (one node
// per event at a time) and POSTs them, signed, with 5 s to answer. A failed attempt is tried again with the
// same id: the first retry within 30 s, then at doubling intervals up to 1 h apart, for 24 h.
import { randomBytes } from 'node:crypto';
import { DAY_MS } from '../../rules/time.js';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { isoSeconds } from '../../contract/schemas.js';
import { periodUsed, shownPeriodStart } from '../metering/plans.js';
import { checkWebhookUrl, signature, type Lookup } from '../services/webhooks.js';
import type { Store, WebhookEvent } from '../store/index.js';

export interface WebhookSenderOptions {
  node: string;
  /** `--allow-private-webhooks`: http:// and private receivers (inside the operator's network). */
  allowPrivate: boolean;
  lookup?: Lookup;
  nowMs?: () => number;
  detectEveryMs?: number;
  deliverEveryMs?: number;
  timeoutMs?: number;
  firstRetryMs?: number;
  maxRetryMs?: number;
  giveUpMs?: number;
  log?: { warn(obj: object, msg?: string): void };
}

export class WebhookSender {
  private timers: NodeJS.Timeout[] = [];
  private detecting: Promise<void> | null = null;
  private delivering: Promise<void> | null = null;
  private readonly now: () => number;
  /** This process's delivery attempts by outcome (/metrics): delivered, failed (tried again later), given up. */
  readonly attempts: Record<'delivered' | 'failed' | 'given_up', number> = { delivered: 0, failed: 0, given_up: 0 };

  constructor(
    private readonly store: Store,
    private readonly o: WebhookSenderOptions,
  ) {
    this.now = o.nowMs ?? Date.now;
  }

  start(): void {
    const every = (ms: number, f: () => void) => {
      const t = setInterval(f, ms);
      t.unref();
      this.timers.push(t);
    };
    every(this.o.detectEveryMs ?? 2_000, () => void this.detect());
    every(this.o.deliverEveryMs ?? 1_000, () => void this.deliverDue());
  }

  async stop(): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    await Promise.allSettled([this.detecting, this.delivering]);
  }

  /** Records the events due now (each once per key, fleet-wide). One pass at a time. */
  detect(): Promise<void> {
    return (this.detecting ??= this.detectOnce()
      .catch((e) =>
        this.o.log?.warn(
          { event: 'webhook_detect_failed', detail: String((e as Error)?.message ?? e) },
          'webhook events not checked',
        ),
      )
      .finally(() => {
        this.detecting = null;
      }));
  }

  private async detectOnce(): Promise<void> {
    for (const w of await this.store.webhooks.all()) {
      const plan = await this.store.plans.get(w.accountId);
      if (!plan) continue;
      const account = await this.store.accounts.get(w.accountId);
      if (!account) continue;
      const now = this.now();
      if (plan.trafficLimit !== null && plan.trafficLimit > 0) {
        const { start, used } = await periodUsed(this.store, plan, now);
        // The body names the period's start as the customer is shown it (a lifetime plan's first usage, not the
        // epoch); the once-per-period key keeps the enforcer's, so an event is still sent once.
        let shown: number | undefined;
        for (const t of w.thresholds) {
          if (used * 100 < plan.trafficLimit * t) continue;
          shown ??= await shownPeriodStart(this.store, w.accountId, plan, now);
          const id = eventId();
          const body = {
            id,
            type: 'usage.threshold',
            account: account.email,
            threshold: t,
            used,
            limit: plan.trafficLimit,
            period_start: isoSeconds(Math.floor(shown / 1000)),
            time: isoSeconds(Math.floor(now / 1000)),
          };
          await this.store.webhooks.addEvent({
            id,
            accountId: w.accountId,
            type: body.type,
            onceKey: `usage.threshold:${t}:${start}`,
            body: JSON.stringify(body),
            nowMs: now,
          });
        }
      }
      if (plan.expiresAt !== null && now >= plan.expiresAt) {
        const id = eventId();
        const body = {
          id,
          type: 'plan.expired',
          account: account.email,
          expires_at: isoSeconds(Math.floor(plan.expiresAt / 1000)),
          time: isoSeconds(Math.floor(now / 1000)),
        };
        await this.store.webhooks.addEvent({
          id,
          accountId: w.accountId,
          type: body.type,
          onceKey: `plan.expired:${plan.expiresAt}`,
          body: JSON.stringify(body),
          nowMs: now,
        });
      }
    }
  }

  /** Claims the due events and sends each. One pass at a time. */
  deliverDue(): Promise<void> {
    return (this.delivering ??= (async () => {
      const timeout = this.o.timeoutMs ?? 5_000;
      const due = await this.store.webhooks.claimDue(this.o.node, this.now(), timeout + 10_000, 20);
      await Promise.all(due.map((e) => this.deliver(e)));
    })()
      .catch((e) =>
        this.o.log?.warn(
          { event: 'webhook_deliver_failed', detail: String((e as Error)?.message ?? e) },
          'webhook deliveries not attempted',
        ),
      )
      .finally(() => {
        this.delivering = null;
      }));
  }

  private async deliver(e: WebhookEvent): Promise<void> {
    const w = await this.store.webhooks.get(e.accountId);
    let status: number | null = null;
    if (w) {
      try {
        const target = await checkWebhookUrl(w.url, this.o.allowPrivate, this.o.lookup);
        status = await post(target, e, w.secret, this.o.timeoutMs ?? 5_000, Math.floor(this.now() / 1000));
      } catch (err) {
        // Refused by the URL rule, no answer in time, or a connection error: an attempt without a status.
        this.o.log?.warn(
          { event: 'webhook_attempt_failed', id: e.id, detail: String((err as Error)?.message ?? err) },
          'webhook attempt failed',
        );
      }
    }
    const attempts = e.attempts + 1;
    const now = this.now();
    if (status !== null && status >= 200 && status < 300) {
      this.attempts.delivered++;
      await this.store.webhooks.finish(e.id, this.o.node, {
        state: 'delivered',
        attempts,
        lastStatus: status,
        nextAtMs: now,
      });
      return;
    }
    // The receiver answered, but not 2xx: said as an attempt that failed, with its status (never the URL, which
    // may carry the receiver's own secret).
    if (status !== null)
      this.o.log?.warn(
        { event: 'webhook_attempt_failed', id: e.id, status },
        `webhook receiver answered HTTP ${status}`,
      );
    const wait = Math.min(this.o.maxRetryMs ?? 3_600_000, (this.o.firstRetryMs ?? 15_000) * 2 ** (attempts - 1));
    const giveUp = !w || now + wait - e.createdAtMs > (this.o.giveUpMs ?? DAY_MS);
    this.attempts[giveUp ? 'given_up' : 'failed']++;
    if (giveUp && w)
      this.o.log?.warn({ event: 'webhook_given_up', id: e.id, attempts }, 'webhook event given up after its retries');
    await this.store.webhooks.finish(e.id, this.o.node, {
      state: giveUp ? 'failed' : 'pending',
      attempts,
      lastStatus: status,
      nextAtMs: now + wait,
    });
  }
}

const eventId = (): string => `evt_${randomBytes(12).toString('hex')}`;

/** One POST to the checked address (pinned: no second lookup between the check and the connection); its status. */
function post(
  target: { address: string; family: number; url: URL },
  e: WebhookEvent,
  secret: string,
  timeoutMs: number,
  unixSeconds: number,
): Promise<number> {
  const pinned: LookupFunction = (_host, opts, cb) => {
    if ((opts as { all?: boolean }).all)
      (cb as unknown as (err: null, a: Array<{ address: string; family: number }>) => void)(null, [
        { address: target.address, family: target.family },
      ]);
    else cb(null, target.address, target.family);
  };
  return new Promise((resolve, reject) => {
    const request = target.url.protocol === 'https:' ? https.request : http.request;
    const req = request(target.url, {
      method: 'POST',
      lookup: pinned,
      signal: AbortSignal.timeout(timeoutMs),
      headers: {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(e.body),
        'user-agent': 'proxyd-webhooks',
        'proxyd-event-id': e.id,
        'proxyd-signature': signature(secret, unixSeconds, e.body),
      },
    });
    req.once('error', reject);
    req.once('response', (res) => {
      res.resume();
      res.once('end', () => resolve(res.statusCode ?? 0));
      res.once('error', reject);
    });
    req.end(e.body);
  });
}
