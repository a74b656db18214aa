// Usage buckets on each backend and the meter over them: a flush applied twice counts once, each flush lands
// in its minute, hour and day, queries sum by time or by subject, pruning keeps what is young; the meter
// sends a flush the database could not take again with the same id, and nothing collected meanwhile is lost.
import { afterEach, describe, expect, it } from 'vitest';
import { UsageMeter } from '../../../src/daemon/metering/meter.js';
import { openStore, type Store, type UsageDelta } from '../../../src/daemon/store/index.js';
import { databaseUrlOf, dataDirFor, inspectDb } from '../../helpers/daemon.js';
import { BACKENDS } from '../../helpers/postgres.js';
import { waitFor } from '../../helpers/wait.js';
import { patient } from '../../helpers/patience.js';

const stores: Store[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

async function open(backend: (typeof BACKENDS)[number]) {
  const dataDir = await dataDirFor(backend);
  const store = await openStore({ dataDir, databaseUrl: databaseUrlOf(dataDir) });
  stores.push(store);
  const a = await store.accounts.create(`u-${backend}-${Math.random()}@example.com`, 'x', true);
  if (a === 'exists') throw new Error('exists');
  return { store, dataDir, accountId: a.id };
}

const T = Date.UTC(2026, 10, 25, 10, 30, 15); // 10:30:15 UTC

describe.each(BACKENDS)('usage store on %s', (backend) => {
  it('a flush applied twice counts once; minute, hour and day buckets; sums by time and by subject', async () => {
    const { store, accountId } = await open(backend);
    const d = (subject: string, up: number, down: number): UsageDelta => ({
      accountId,
      subject,
      bytesUp: up,
      bytesDown: down,
      connections: 1,
    });
    expect(
      await store.usage.addFlush('node-a', 'node-a-1', T, [d('user:alice', 100, 1_000), d('ip:8.8.4.4', 5, 50)]),
    ).toBe('ok');
    expect(
      await store.usage.addFlush('node-a', 'node-a-1', T, [d('user:alice', 100, 1_000), d('ip:8.8.4.4', 5, 50)]),
    ).toBe('duplicate');
    expect(await store.usage.addFlush('node-b', 'node-b-1', T + 60_000, [d('user:alice', 1, 2)])).toBe('ok');
    const q = (period: 'minute' | 'hour' | 'day', by: 'time' | 'subject') =>
      store.usage.query({ accountId, period, fromMs: T - 86_400_000, toMs: T + 86_400_000, by });
    expect((await q('minute', 'time')).map((r) => [r.startMs, r.bytesUp, r.bytesDown, r.connections])).toEqual([
      [Date.UTC(2026, 10, 25, 10, 30), 105, 1_050, 2],
      [Date.UTC(2026, 10, 25, 10, 31), 1, 2, 1],
    ]);
    expect((await q('hour', 'time')).map((r) => [r.startMs, r.bytesUp])).toEqual([[Date.UTC(2026, 10, 25, 10), 106]]);
    expect((await q('day', 'subject')).map((r) => [r.subject, r.bytesUp, r.bytesDown, r.connections])).toEqual([
      ['ip:8.8.4.4', 5, 50, 1],
      ['user:alice', 101, 1_002, 2],
    ]);
    // Pruning minutes before the second flush's minute keeps it and the hours.
    expect(await store.usage.prune('minute', Date.UTC(2026, 10, 25, 10, 31))).toBe(2); // node a's two rows
    expect(await q('minute', 'time')).toHaveLength(1);
    expect(await q('hour', 'time')).toHaveLength(1);
  });
});

describe.each(BACKENDS)('usage per domain on %s', (backend) => {
  const DAY = 86_400_000;
  const day = Date.UTC(2026, 10, 25);

  it('per day, subject and domain; a flush twice counts once; summed over nodes; the subject filters; pruned with day buckets', async () => {
    const { store, accountId } = await open(backend);
    const d = (subject: string, target: string | null, up: number, down: number, connections = 1): UsageDelta => ({
      accountId,
      subject,
      target,
      bytesUp: up,
      bytesDown: down,
      connections,
    });
    const flush = [
      d('user:alice', 'example.co.uk', 100, 1_000),
      d('user:alice', '203.0.113.7', 10, 20),
      d('user:alice', null, 0, 0),
      d('ip:8.8.4.4', 'example.co.uk', 5, 50),
    ];
    expect(await store.usage.addFlush('node-a', 'dom-a-1', T, flush)).toBe('ok');
    expect(await store.usage.addFlush('node-a', 'dom-a-1', T, flush)).toBe('duplicate');
    expect(await store.usage.addFlush('node-b', 'dom-b-1', T + 60_000, [d('user:alice', 'example.co.uk', 1, 2)])).toBe(
      'ok',
    );
    expect(await store.usage.addFlush('node-b', 'dom-b-2', T + DAY, [d('user:alice', 'next.example', 7, 7)])).toBe(
      'ok',
    );
    const sorted = (rows: Awaited<ReturnType<Store['usage']['domains']>>) =>
      rows.map((r) => [r.domain, r.bytesUp, r.bytesDown, r.connections]).sort();
    expect(sorted(await store.usage.domains({ accountId, fromMs: day, toMs: day + DAY }))).toEqual([
      ['', 0, 0, 1],
      ['203.0.113.7', 10, 20, 1],
      ['example.co.uk', 106, 1_052, 3],
    ]);
    expect(
      sorted(await store.usage.domains({ accountId, fromMs: day, toMs: day + 2 * DAY, subject: 'user:alice' })),
    ).toEqual([
      ['', 0, 0, 1],
      ['203.0.113.7', 10, 20, 1],
      ['example.co.uk', 101, 1_002, 2],
      ['next.example', 7, 7, 1],
    ]);
    // The buckets got each subject once per flush, summed over its domains.
    const [alice] = await store.usage.query({
      accountId,
      period: 'day',
      fromMs: day,
      toMs: day + DAY,
      by: 'subject',
      subject: 'user:alice',
    });
    expect(alice).toMatchObject({ bytesUp: 111, bytesDown: 1_022, connections: 4 });
    await store.usage.prune('day', day + DAY);
    expect(sorted(await store.usage.domains({ accountId, fromMs: 0, toMs: day + 2 * DAY }))).toEqual([
      ['next.example', 7, 7, 1],
    ]);
  });

  it('a node keeps 1,000 named domains per user and day, the rest under other; the totals stay whole', async () => {
    const { store, accountId } = await open(backend);
    const d = (i: number): UsageDelta => ({
      accountId,
      subject: 'user:many',
      target: `site${i}.example`,
      bytesUp: i + 1,
      bytesDown: 1,
      connections: 1,
    });
    // 900 first, then 300 more (200 of them past the cap), then the first ones again (still named).
    expect(
      await store.usage.addFlush(
        'node-a',
        'cap-1',
        T,
        Array.from({ length: 900 }, (_, i) => d(i)),
      ),
    ).toBe('ok');
    expect(
      await store.usage.addFlush(
        'node-a',
        'cap-2',
        T + 1000,
        Array.from({ length: 300 }, (_, i) => d(900 + i)),
      ),
    ).toBe('ok');
    expect(await store.usage.addFlush('node-a', 'cap-3', T + 2000, [d(0), d(1)])).toBe('ok');
    const rows = await store.usage.domains({ accountId, fromMs: day, toMs: day + DAY });
    const other = rows.find((r) => r.domain === '')!;
    expect(rows.length).toBe(1_001);
    expect(other.connections).toBe(200);
    // Of the 300 new ones, the 100 largest (site1100..site1199) were named.
    expect(rows.some((r) => r.domain === 'site1199.example')).toBe(true);
    expect(rows.some((r) => r.domain === 'site900.example')).toBe(false);
    const sum = rows.reduce((n, r) => n + r.bytesUp, 0);
    expect(sum).toBe((1200 * 1201) / 2 + 1 + 2);
  });
});

describe.each(BACKENDS)('a large flush on %s', (backend) => {
  it(
    '12,000 active users in one flush (36,000 bucket rows) are written, in one transaction',
    async () => {
      const { store, accountId } = await open(backend);
      const deltas = Array.from({ length: 12_000 }, (_, i): UsageDelta => ({
        accountId,
        subject: `user:u${i}`,
        bytesUp: i,
        bytesDown: 2 * i,
        connections: 1,
      }));
      expect(await store.usage.addFlush('node-a', 'big-1', T, deltas)).toBe('ok');
      const [row] = await store.usage.query({
        accountId,
        period: 'day',
        fromMs: T - 86_400_000,
        toMs: T + 86_400_000,
        by: 'time',
      });
      expect(row).toMatchObject({ bytesUp: (11_999 * 12_000) / 2, connections: 12_000 });
    },
    patient(60_000),
  );
});

describe('the meter over SQLite', () => {
  it('sends a flush again with its id while the database is locked, and loses nothing collected meanwhile', async () => {
    const { store, dataDir, accountId } = await open('sqlite');
    let next: UsageDelta[] = [{ accountId, subject: 'user:bob', bytesUp: 10, bytesDown: 20, connections: 1 }];
    const meter = new UsageMeter(store.usage, () => {
      const out = next;
      next = [];
      return out;
    });
    const lock = await inspectDb(dataDir, { write: true });
    lock.run('BEGIN IMMEDIATE');
    await meter.tick(); // busy: kept with its id
    expect(meter.failedFlushes).toBe(1);
    next = [{ accountId, subject: 'user:bob', bytesUp: 1, bytesDown: 2, connections: 0 }];
    await meter.tick(); // still locked; the new usage waits in pending
    lock.run('COMMIT');
    lock.close();
    await meter.tick(); // the first flush, with its id
    await meter.tick(); // then what came meanwhile
    await waitFor('both flushed', () => meter.flushed === 2);
    const [row] = await store.usage.query({
      accountId,
      period: 'day',
      fromMs: 0,
      toMs: Date.now() + 86_400_000,
      by: 'subject',
    });
    expect(row).toMatchObject({ subject: 'user:bob', bytesUp: 11, bytesDown: 22, connections: 1 });
  });
});

describe("the meter's flush lag (/metrics proxyd_usage_flush_lag_seconds)", () => {
  it('is how long the oldest usage not yet in the database has waited: 0 when all is written, growing while the database is locked', async () => {
    const { store, dataDir, accountId } = await open('sqlite');
    let now = T;
    let next: UsageDelta[] = [];
    const meter = new UsageMeter(
      store.usage,
      () => {
        const out = next;
        next = [];
        return out;
      },
      { nowMs: () => now },
    );
    expect(meter.lagMs()).toBe(0);
    await meter.tick(); // nothing collected: nothing waits
    expect(meter.lagMs()).toBe(0);
    const lock = await inspectDb(dataDir, { write: true });
    lock.run('BEGIN IMMEDIATE');
    next = [{ accountId, subject: 'user:bob', bytesUp: 10, bytesDown: 20, connections: 1 }];
    await meter.tick(); // collected at T, not written
    now += 4_000;
    next = [{ accountId, subject: 'user:bob', bytesUp: 1, bytesDown: 2, connections: 0 }];
    await meter.tick(); // more, still not written: the oldest is what counts
    expect(meter.lagMs()).toBe(4_000);
    now += 30_000;
    expect(meter.lagMs()).toBe(34_000);
    lock.run('COMMIT');
    lock.close();
    await meter.tick(); // the first flush goes; what came at T+4 s still waits
    expect(meter.lagMs()).toBe(30_000);
    await meter.tick();
    expect(meter.flushed).toBe(2);
    expect(meter.lagMs()).toBe(0);
  });
});

describe.each(BACKENDS)('plan reads and connection slot leases on %s', (backend) => {
  it('dailyTotals sums the day buckets of the accounts asked for, over nodes (what plans and budgets read)', async () => {
    const { store, accountId } = await open(backend);
    const other = await store.accounts.create(`o-${backend}-${Math.random()}@example.com`, 'x', true);
    if (other === 'exists') throw new Error('exists');
    const d = (id: number, subject: string, up: number): UsageDelta => ({
      accountId: id,
      subject,
      bytesUp: up,
      bytesDown: 1,
      connections: 1,
    });
    await store.usage.addFlush('node-a', `a-${backend}-1`, T, [
      d(accountId, 'user:alice', 100),
      d(other.id, 'user:x', 7),
    ]);
    await store.usage.addFlush('node-b', `b-${backend}-1`, T, [d(accountId, 'user:alice', 10)]);
    const day = Date.UTC(2026, 10, 25);
    expect(await store.usage.dailyTotals([accountId], day)).toEqual([
      { accountId, subject: 'user:alice', startMs: day, bytes: 112 },
    ]);
    expect(
      (await store.usage.dailyTotals([accountId, other.id], day)).map((r) => r.bytes).sort((a, b) => a - b),
    ).toEqual([8, 112]);
    expect(await store.usage.dailyTotals([accountId], day + 86_400_000)).toEqual([]);
  });

  it('the plan tables have a version that moves with every plan or user-limit change (nodes re-read them only then)', async () => {
    const { store, accountId } = await open(backend);
    const v0 = await store.plans.version();
    expect(await store.plans.version()).toBe(v0);
    await store.plans.set({
      accountId,
      trafficLimit: 1000,
      period: 'month',
      anchorDay: 1,
      maxConnections: null,
      expiresAt: null,
    });
    const v1 = await store.plans.version();
    expect(v1).toBeGreaterThan(v0);
    await store.usage.addFlush('n', `v-${backend}-${Math.random()}`, T, [
      { accountId, subject: 'user:x', bytesUp: 1, bytesDown: 1, connections: 1 },
    ]);
    expect(await store.plans.version()).toBe(v1); // usage is not a plan change
    expect(await store.plans.setUserLimits(accountId, 'nobody', { trafficLimit: 5, maxConnections: null })).toBe(false);
  });

  it('leases never give more than the cap across nodes; a renewal only shrinks; a given-back or expired lease frees its slots', async () => {
    const { store } = await open(backend);
    const key = `a:${Math.floor(Math.random() * 1e9)}`;
    const now = Date.now();
    expect(await store.plans.leaseSlots('n1', key, 3, 5, 10_000, now)).toBe(3);
    expect(await store.plans.leaseSlots('n2', key, 4, 5, 10_000, now)).toBe(2); // what the cap leaves
    expect(await store.plans.leaseSlots('n3', key, 1, 5, 10_000, now)).toBe(0);
    // Concurrent asks for the last slots: never more than the cap in all.
    await store.plans.renewSlots('n2', [{ key, slots: 0 }], 10_000, now); // n2 gives its 2 back
    const asks = await Promise.all(
      ['n4', 'n5', 'n6', 'n7'].map((n) => store.plans.leaseSlots(n, key, 2, 5, 10_000, now)),
    );
    expect(asks.reduce((a, b) => a + b, 0)).toBe(2);
    // A renewal asking for more than it holds keeps what it holds.
    await store.plans.renewSlots('n1', [{ key, slots: 9 }], 10_000, now);
    expect(await store.plans.leaseSlots('n8', key, 1, 5, 10_000, now)).toBe(0);
    // n1 shrinks to 1: two slots free.
    await store.plans.renewSlots('n1', [{ key, slots: 1 }], 10_000, now);
    expect(await store.plans.leaseSlots('n8', key, 5, 5, 10_000, now)).toBe(2);
    // Every lease expired (a node gone for good): all five free again.
    expect(await store.plans.leaseSlots('n9', key, 5, 5, 10_000, now + 20_000)).toBe(5);
  });
});

describe('the meter flushing some accounts at once (a byte budget sync)', () => {
  it("writes those accounts' usage in a flush of their own and leaves the rest for the next tick", async () => {
    const { store, accountId } = await open('sqlite');
    let pending: UsageDelta[] = [
      { accountId, subject: 'user:a', bytesUp: 5, bytesDown: 6, connections: 1 },
      { accountId: accountId + 1000, subject: 'user:b', bytesUp: 1, bytesDown: 1, connections: 1 },
    ];
    const meter = new UsageMeter(store.usage, () => {
      const out = pending;
      pending = [];
      return out;
    });
    expect(await meter.flushAccounts(new Set([accountId]))).toBe(true);
    const day = Math.floor(Date.now() / 86_400_000) * 86_400_000;
    expect(await store.usage.dailyTotals([accountId], day)).toEqual([
      { accountId, subject: 'user:a', startMs: day, bytes: 11 },
    ]);
    expect(meter.unflushed()).toEqual([{ accountId: accountId + 1000, subject: 'user:b', bytes: 2 }]);
    expect(await meter.flushAccounts(new Set([accountId]))).toBe(true); // nothing of it left: nothing written
    expect(meter.flushed).toBe(1);
  });
});
