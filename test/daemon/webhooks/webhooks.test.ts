// Webhooks on each backend: the URL rule when set and again at delivery, signed events once per threshold and
// period, the same id on every retry, giving up after the window, plan.expired, and two nodes sending each event once.
import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { WebhookError, checkWebhookUrl, parseThresholds, setWebhook } from '../../../src/daemon/services/webhooks.js';
import { openStore } from '../../../src/daemon/store/index.js';
import { WebhookSender } from '../../../src/daemon/webhooks/sender.js';
import { databaseUrlOf, dataDirFor } from '../../helpers/daemon.js';
import { BACKENDS } from '../../helpers/postgres.js';
import { patient } from '../../helpers/patience.js';

interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
}

const closers: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

/** A receiver that answers each request with the next status of `statuses` (then 200). */
async function receiver(statuses: number[] = []): Promise<{ url: string; got: Received[] }> {
  const got: Received[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      got.push({ headers: req.headers, body });
      res.statusCode = statuses.shift() ?? 200;
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  closers.push(() => new Promise((r) => server.close(r)));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, got };
}

async function open(backend: (typeof BACKENDS)[number]) {
  const dataDir = await dataDirFor(backend);
  const store = await openStore({ dataDir, databaseUrl: databaseUrlOf(dataDir) });
  closers.push(() => store.close());
  const a = await store.accounts.create(`hooks-${Math.random()}@example.com`, 'x', true);
  if (a === 'exists') throw new Error('exists');
  return { store, account: a };
}

const publicLookup = async () => [{ address: '93.184.216.34', family: 4 }];

describe('the webhook URL rule', () => {
  it('https:// to public addresses only, unless private receivers are allowed', async () => {
    await expect(checkWebhookUrl('https://hooks.example.com/x', false, publicLookup)).resolves.toMatchObject({
      address: '93.184.216.34',
    });
    await expect(checkWebhookUrl('http://hooks.example.com/x', false, publicLookup)).rejects.toThrow(
      /must be https:\/\/ \(.*--allow-private-webhooks\)$/,
    );
    await expect(checkWebhookUrl('https://127.0.0.1/x', false)).rejects.toThrow(
      /private or reserved address \(.*--allow-private-webhooks\)$/,
    );
    await expect(checkWebhookUrl('https://[::1]/x', false)).rejects.toThrow(/private or reserved/);
    await expect(checkWebhookUrl('https://10.0.0.8/x', false)).rejects.toThrow(/private or reserved/);
    // A name with one private answer among public ones is refused.
    await expect(
      checkWebhookUrl('https://mixed.example/x', false, async () => [
        { address: '93.184.216.34', family: 4 },
        { address: '169.254.169.254', family: 4 },
      ]),
    ).rejects.toThrow(/private/);
    await expect(checkWebhookUrl('https://user:pw@hooks.example.com/x', false, publicLookup)).rejects.toThrow(
      /credentials/,
    );
    await expect(checkWebhookUrl('ftp://hooks.example.com/x', true, publicLookup)).rejects.toThrow(WebhookError);
    await expect(checkWebhookUrl('http://127.0.0.1:9/x', true)).resolves.toMatchObject({ address: '127.0.0.1' });
    expect(parseThresholds('100, 80,80')).toEqual([80, 100]);
    expect(() => parseThresholds('0,80')).toThrow(WebhookError);
    expect(() => parseThresholds('80,x')).toThrow(WebhookError);
  });
});

describe.each(BACKENDS)('webhooks on %s', (backend) => {
  it('signed usage.threshold events, once per threshold and period; the same id on a retry; two nodes send each once', async () => {
    const { store, account } = await open(backend);
    const r = await receiver([500]);
    await expect(setWebhook(store, account.id, { url: r.url }, { allowPrivate: false })).rejects.toThrow(/https/);
    const set = await setWebhook(store, account.id, { url: r.url, thresholds: [50, 100] }, { allowPrivate: true });
    expect(set.secret).toMatch(/^whsec_/);
    await store.plans.set({
      accountId: account.id,
      trafficLimit: 1000,
      period: 'month',
      anchorDay: 1,
      maxConnections: null,
      expiresAt: null,
    });
    const delta = (up: number) => ({
      accountId: account.id,
      subject: 'user:alice',
      bytesUp: up,
      bytesDown: 0,
      connections: 1,
    });
    expect(await store.usage.addFlush('n', `w-${Math.random()}`, Date.now(), [delta(600)])).toBe('ok');

    const said: Array<Record<string, unknown>> = [];
    let now = Date.now(); // the senders' clock: a retry is due when it says so, not after a real wait
    const opts = {
      allowPrivate: true,
      firstRetryMs: 50,
      nowMs: () => now,
      log: { warn: (o: object) => void said.push(o as Record<string, unknown>) },
    };
    const a = new WebhookSender(store, { ...opts, node: 'node-a' });
    const b = new WebhookSender(store, { ...opts, node: 'node-b' });
    await Promise.all([a.detect(), b.detect()]);
    expect(await store.webhooks.pendingCount()).toBe(1);
    await Promise.all([a.deliverDue(), b.deliverDue()]);
    expect(r.got).toHaveLength(1); // answered 500
    expect(await store.webhooks.pendingCount()).toBe(1); // to be tried again
    expect([a.attempts.failed + b.attempts.failed, a.attempts.delivered + b.attempts.delivered]).toEqual([1, 0]);
    // The operator sees why: the status, never the URL.
    expect(said).toEqual([expect.objectContaining({ event: 'webhook_attempt_failed', status: 500 })]);
    expect(JSON.stringify(said)).not.toContain(r.url);
    now += 49;
    await Promise.all([a.deliverDue(), b.deliverDue()]);
    expect(r.got).toHaveLength(1); // not due yet
    now += 31;
    await Promise.all([a.deliverDue(), b.deliverDue()]);
    expect(r.got).toHaveLength(2);
    const [first, retry] = r.got as [Received, Received];
    expect(retry.headers['proxyd-event-id']).toBe(first.headers['proxyd-event-id']);
    expect(retry.body).toBe(first.body);
    const body = JSON.parse(retry.body);
    expect(body).toMatchObject({
      id: retry.headers['proxyd-event-id'],
      type: 'usage.threshold',
      account: account.email,
      threshold: 50,
      used: 600,
      limit: 1000,
    });
    expect(body.period_start).toMatch(/^\d{4}-\d{2}-01T00:00:00Z$/);
    expect(retry.headers['content-type']).toBe('application/json');
    const [, t, v1] = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(retry.headers['proxyd-signature']))!;
    expect(v1).toBe(createHmac('sha256', set.secret).update(`${t}.${retry.body}`).digest('hex'));

    // Nothing new below the next threshold, however often it is checked.
    await Promise.all([a.detect(), b.detect(), a.detect()]);
    await Promise.all([a.deliverDue(), b.deliverDue()]);
    expect(r.got).toHaveLength(2);
    expect(await store.usage.addFlush('n', `w-${Math.random()}`, Date.now(), [delta(500)])).toBe('ok');
    await Promise.all([a.detect(), b.detect()]);
    await Promise.all([a.deliverDue(), b.deliverDue()]);
    expect(r.got).toHaveLength(3);
    expect(JSON.parse(r.got[2]!.body)).toMatchObject({ threshold: 100, used: 1100 });
    const events = await store.webhooks.events(account.id, 10);
    expect(events.map((e) => [e.type, e.state, e.attempts, e.lastStatus])).toEqual([
      ['usage.threshold', 'delivered', 1, 200],
      ['usage.threshold', 'delivered', 2, 200],
    ]);
    expect(await store.webhooks.pendingCount()).toBe(0);
    expect(a.attempts.delivered + b.attempts.delivered).toBe(2);
  });

  it('a receiver that does not answer in time is an attempt without a status, tried again later', async () => {
    const { store, account } = await open(backend);
    const held: http.ServerResponse[] = [];
    const server = http.createServer((_req, res) => void held.push(res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    closers.push(() => new Promise((r) => server.close(r)));
    closers.push(async () => held.forEach((res) => res.destroy()));
    await setWebhook(
      store,
      account.id,
      { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/slow` },
      { allowPrivate: true },
    );
    await store.plans.set({
      accountId: account.id,
      trafficLimit: null,
      period: 'month',
      anchorDay: 1,
      maxConnections: null,
      expiresAt: Date.now() - 1,
    });
    const s = new WebhookSender(store, { node: 'n', allowPrivate: true, timeoutMs: 300 });
    await s.detect();
    const t0 = Date.now();
    await s.deliverDue();
    expect(Date.now() - t0).toBeLessThan(patient(2_000));
    expect(held).toHaveLength(1);
    const [e] = await store.webhooks.events(account.id, 10);
    expect(e).toMatchObject({ state: 'pending', attempts: 1, lastStatus: null });
    // The first retry comes within 30 s.
    expect(e!.nextAtMs - Date.now()).toBeLessThanOrEqual(30_000);
    expect(e!.nextAtMs).toBeGreaterThan(Date.now());
  });

  it('plan.expired; a URL that became private is refused at delivery; gives up after the window', async () => {
    const { store, account } = await open(backend);
    const r = await receiver();
    await setWebhook(store, account.id, { url: r.url }, { allowPrivate: true });
    const expiresAt = Date.now() - 1000;
    await store.plans.set({
      accountId: account.id,
      trafficLimit: null,
      period: 'month',
      anchorDay: 1,
      maxConnections: null,
      expiresAt,
    });
    // This node does not allow private receivers: the attempt is refused, nothing reaches the receiver.
    let now = Date.now(); // the sender's clock
    const strict = new WebhookSender(store, {
      node: 'strict',
      allowPrivate: false,
      firstRetryMs: 10,
      giveUpMs: 50,
      nowMs: () => now,
    });
    await strict.detect();
    await strict.deliverDue();
    expect(r.got).toHaveLength(0);
    now += 60;
    await strict.deliverDue();
    const [e] = await store.webhooks.events(account.id, 10);
    expect(e).toMatchObject({ type: 'plan.expired', state: 'failed', attempts: 2, lastStatus: null });
    expect(strict.attempts).toEqual({ delivered: 0, failed: 1, given_up: 1 });
    expect(await store.webhooks.pendingCount()).toBe(0);
    expect(JSON.parse(e!.body)).toMatchObject({
      type: 'plan.expired',
      account: account.email,
      expires_at: new Date(Math.floor(expiresAt / 1000) * 1000).toISOString().replace('.000Z', 'Z'),
    });
    // Once per expiry: checking again records nothing new.
    await strict.detect();
    expect(await store.webhooks.events(account.id, 10)).toHaveLength(1);
  });
});
