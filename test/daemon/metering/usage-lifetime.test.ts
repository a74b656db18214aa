// A lifetime plan's period as people are shown it, on each backend: it starts on the day of the account's first
// usage (else the day it was created), not at 1970; the usage reports' default ranges fit it (a series without
// `from` is the latest 1,000 points at most), and a `from` that asks for too many says what would fit; a
// usage.threshold webhook names the same period start.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../../src/daemon/store/index.js';
import { shownPeriodStart } from '../../../src/daemon/metering/plans.js';
import { UsageQueryError, usageSeries, usageSummary } from '../../../src/daemon/services/usage.js';
import { planShow } from '../../../src/daemon/admin/plans.js';
import { setWebhook } from '../../../src/daemon/services/webhooks.js';
import { WebhookSender } from '../../../src/daemon/webhooks/sender.js';
import { tempDir } from '../../helpers/daemon.js';
import { BACKENDS, emptyDatabase } from '../../helpers/postgres.js';

const DAY = 86_400_000;
const HOUR = 3_600_000;

describe.each(BACKENDS)("a lifetime plan's period (%s)", (backend) => {
  let store: Store;
  let clock = Date.UTC(2026, 11, 7, 12, 30, 0);
  const created = Date.UTC(2026, 9, 1, 9, 15, 0); // the account: 2026-10-01 09:15 UTC
  let used: number; // an account with usage since 2026-10-20
  let idle: number; // an account with none

  beforeAll(async () => {
    const databaseUrl = backend === 'postgres' ? await emptyDatabase() : undefined;
    store = await openStore({ dataDir: tempDir(), databaseUrl, nowMs: () => clock });
    const now = clock;
    clock = created;
    used = ((await store.accounts.create('lifetime-used@example.com', 'x', true)) as { id: number }).id;
    idle = ((await store.accounts.create('lifetime-idle@example.com', 'x', true)) as { id: number }).id;
    clock = now;
    for (const id of [used, idle])
      await store.plans.set({
        accountId: id,
        trafficLimit: 100 * 2 ** 30,
        period: 'lifetime',
        anchorDay: 1,
        maxConnections: null,
        expiresAt: null,
      });
    const first = Date.UTC(2026, 9, 20, 17, 42, 0);
    const delta = (bytes: number) => [
      {
        accountId: used,
        subject: 'user:alice',
        target: 'example.com',
        bytesUp: bytes,
        bytesDown: bytes,
        connections: 1,
      },
    ];
    expect(await store.usage.addFlush('n1', 'first', first, delta(1_000))).toBe('ok');
    expect(await store.usage.addFlush('n1', 'now', clock - 60_000, delta(500))).toBe('ok');
    await store.usage.rollUp?.();
  });
  afterAll(async () => {
    await store?.close();
  });

  it('starts on the day of the first usage kept, else the day the account was made', async () => {
    expect(await store.usage.firstUsage(used)).toBe(Date.UTC(2026, 9, 20));
    expect(await store.usage.firstUsage(idle)).toBeNull();
    const plan = { period: 'lifetime' as const, anchorDay: 1 };
    expect(new Date(await shownPeriodStart(store, used, plan, clock)).toISOString()).toBe('2026-10-20T00:00:00.000Z');
    expect(new Date(await shownPeriodStart(store, idle, plan, clock)).toISOString()).toBe('2026-10-01T00:00:00.000Z');
    // Other periods are the plan's, as before.
    expect(await shownPeriodStart(store, used, { period: 'month', anchorDay: 1 }, clock)).toBe(Date.UTC(2026, 11, 1));
  });

  it('the summary says so and counts all of it; plan show too', async () => {
    const s = await usageSummary(store, used, {}, clock);
    expect(s.from).toBe('2026-10-20T00:00:00Z');
    expect(s.bytes_up + s.bytes_down).toBe(3_000);
    expect((await usageSummary(store, idle, {}, clock)).from).toBe('2026-10-01T00:00:00Z');
    const shown = await planShow(store, { email: 'lifetime-used@example.com' });
    expect(shown).toMatchObject({ period: 'lifetime', period_start: '2026-10-20T00:00:00Z', used: 3_000 });
  });

  it('a series by day fits by default: one point a day from the first usage', async () => {
    const days = await usageSeries(store, used, { granularity: 'day' }, clock);
    expect(days.points[0]!.time).toBe('2026-10-20T00:00:00Z');
    expect(days.points).toHaveLength(49); // 2026-10-20 .. 2026-12-07
    expect(days.points.reduce((n, p) => n + p.bytes_up + p.bytes_down, 0)).toBe(3_000);
  });

  it('a series by hour without from is the latest 1,000 hours; a from that asks for more says what fits', async () => {
    const hours = await usageSeries(store, used, { granularity: 'hour' }, clock);
    expect(hours.points).toHaveLength(1000);
    expect(hours.points.at(-1)!.time).toBe('2026-12-07T12:00:00Z');
    expect(Date.parse(hours.points[0]!.time)).toBe(Date.UTC(2026, 11, 7, 12) - 999 * HOUR);
    const err = await usageSeries(store, used, { granularity: 'day', from: 0 }, clock).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UsageQueryError);
    expect((err as UsageQueryError).field).toBe('from');
    expect((err as Error).message).toBe(
      `from: the range holds 20795 days, at most 1000 points: give a from of ${new Date(Date.UTC(2026, 11, 7) - 999 * DAY).toISOString().replace('.000Z', 'Z')} or later (or an earlier to)`,
    );
    const byHour = await usageSeries(store, used, { granularity: 'hour', from: Date.UTC(2026, 9, 20) }, clock).catch(
      (e: unknown) => e,
    );
    expect((byHour as Error).message).toMatch(
      /at most 1000 points: give a from of .* or later \(or an earlier to\), or granularity day$/,
    );
  });

  it('a usage.threshold webhook event says the period started when plan show says it did', async () => {
    await setWebhook(store, used, { url: 'http://127.0.0.1:9/hook', thresholds: [50] }, { allowPrivate: true });
    await store.plans.set({
      accountId: used,
      trafficLimit: 4_000,
      period: 'lifetime',
      anchorDay: 1,
      maxConnections: null,
      expiresAt: null,
    });
    await new WebhookSender(store, { node: 'test', allowPrivate: true, nowMs: () => clock }).detect();
    const [event] = await store.webhooks.events(used, 10);
    expect(JSON.parse(event!.body)).toMatchObject({
      type: 'usage.threshold',
      threshold: 50,
      used: 3_000,
      limit: 4_000,
      period_start: '2026-10-20T00:00:00Z',
    });
    expect(await planShow(store, { email: 'lifetime-used@example.com' })).toMatchObject({
      period_start: '2026-10-20T00:00:00Z',
    });
  });
});
