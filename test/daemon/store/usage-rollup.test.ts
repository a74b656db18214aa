// Usage writes that grow with active users (docs/decisions.md#d-027, "Usage writes"). On PostgreSQL a flush writes minute
// buckets only and a roll-up folds finished minutes into hours and days: totals read the same before and after a
// fold, across hour, day and month boundaries, with late flushes and retried flush ids, with nodes flushing and
// folding at once. The meter's cadence: accounts under a limit every tick, the others every relaxed interval,
// domains every domain interval and at the end of a UTC day (with an injected clock).
import { afterEach, describe, expect, it } from 'vitest';
import postgres from '#postgres';
import { UsageMeter } from '../../../src/daemon/metering/meter.js';
import {
  openStore,
  type FlushDomains,
  type Store,
  type UsageDelta,
  type UsageStore,
} from '../../../src/daemon/store/index.js';
import { databaseUrlOf, dataDirFor } from '../../helpers/daemon.js';
import { BACKENDS } from '../../helpers/postgres.js';
import { patient } from '../../helpers/patience.js';

const stores: Store[] = [];
const sqls: Array<ReturnType<typeof postgres>> = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
  for (const s of sqls.splice(0)) await s.end({ timeout: 1 });
});

const H = 3_600_000;
const DAY = 86_400_000;
// Back-dated: 23:59:30 on the last day of January, so a minute, an hour, a day and a month end within a minute.
const T = Date.UTC(2026, 0, 31, 23, 59, 30);

describe.skipIf(!BACKENDS.includes('postgres'))('usage roll-up on PostgreSQL', () => {
  async function open() {
    const dataDir = await dataDirFor('postgres');
    const url = databaseUrlOf(dataDir)!;
    const a = await openStore({ dataDir, databaseUrl: url });
    const b = await openStore({ dataDir, databaseUrl: url, migrate: false });
    stores.push(a, b);
    const acc = await a.accounts.create(`roll-${Math.random()}@example.com`, 'x', true);
    if (acc === 'exists') throw new Error('exists');
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    sqls.push(sql);
    return { a, b, sql, accountId: acc.id };
  }

  /** Every reading of one account that people and plans see, to compare before and after folds. */
  async function readings(store: Store, accountId: number) {
    const q = async (
      period: 'minute' | 'hour' | 'day',
      by: 'time' | 'subject',
      fromMs = T - 2 * DAY,
      toMs = T + 2 * DAY,
    ) =>
      (await store.usage.query({ accountId, period, fromMs, toMs, by })).map((r) => [
        by === 'time' ? r.startMs : r.subject,
        r.bytesUp,
        r.bytesDown,
        r.connections,
      ]);
    return {
      minutes: await q('minute', 'time'),
      hours: await q('hour', 'time'),
      days: await q('day', 'time'),
      bySubject: await q('hour', 'subject'),
      // A range starting at the hour boundary: the 23:00 hour is out, its minutes too.
      fromMidnight: await q('hour', 'time', Date.UTC(2026, 1, 1)),
      february: await q('day', 'subject', Date.UTC(2026, 1, 1)),
      daily: (await store.usage.dailyTotals([accountId], Date.UTC(2026, 0, 1))).sort(
        (x, y) => x.startMs - y.startMs || x.subject.localeCompare(y.subject),
      ),
    };
  }

  const d = (accountId: number, subject: string, up: number, down = 0, connections = 1): UsageDelta => ({
    accountId,
    subject,
    bytesUp: up,
    bytesDown: down,
    connections,
  });
  const none = (atMs: number): FlushDomains => ({ atMs, deltas: [] });

  it('a flush writes one minute row per user; totals read the same before and after the fold, across minute, hour, day and month ends', async () => {
    const { a, b, sql, accountId } = await open();
    expect(
      await a.usage.addFlush(
        'node-a',
        'r-1',
        T,
        [d(accountId, 'user:alice', 100, 1_000), d(accountId, 'user:bob', 7)],
        none(T),
      ),
    ).toBe('ok');
    expect(await b.usage.addFlush('node-b', 'r-2', T + 20_000, [d(accountId, 'user:alice', 10, 20)], none(T))).toBe(
      'ok',
    );
    expect(await a.usage.addFlush('node-a', 'r-3', T + 40_000, [d(accountId, 'user:alice', 1, 2)], none(T))).toBe('ok'); // 00:00:10, February
    // Only minute rows are written by flushes.
    expect(
      await sql`SELECT period, count(*)::int AS n FROM usage_buckets WHERE account_id = ${accountId} GROUP BY period`,
    ).toEqual([{ period: 'minute', n: 4 }]);
    const before = await readings(a, accountId);
    expect(before.hours).toEqual([
      [Date.UTC(2026, 0, 31, 23), 117, 1_020, 3],
      [Date.UTC(2026, 1, 1, 0), 1, 2, 1],
    ]);
    expect(before.days.map((r) => r[0])).toEqual([Date.UTC(2026, 0, 31), Date.UTC(2026, 1, 1)]);
    expect(before.fromMidnight).toEqual([[Date.UTC(2026, 1, 1, 0), 1, 2, 1]]);
    expect(before.february).toEqual([['user:alice', 1, 2, 1]]);
    expect(before.daily).toEqual([
      { accountId, subject: 'user:alice', startMs: Date.UTC(2026, 0, 31), bytes: 1_130 },
      { accountId, subject: 'user:bob', startMs: Date.UTC(2026, 0, 31), bytes: 7 },
      { accountId, subject: 'user:alice', startMs: Date.UTC(2026, 1, 1), bytes: 3 },
    ]);
    // The fold: every minute row (back-dated: all finished), into hour and day rows of node ''.
    expect(await a.usage.rollUp!()).toBe(4);
    expect(await a.usage.rollUp!()).toBe(0);
    expect(
      await sql`SELECT count(*)::int AS n FROM usage_buckets WHERE account_id = ${accountId} AND period = 'minute' AND (unrolled OR roll_up + roll_down + roll_conn > 0)`,
    ).toEqual([{ n: 0 }]);
    expect(
      await sql`SELECT period, count(*)::int AS n FROM usage_buckets WHERE account_id = ${accountId} AND period <> 'minute' GROUP BY period ORDER BY period`,
    ).toEqual([
      { period: 'day', n: 3 },
      { period: 'hour', n: 3 },
    ]);
    expect(await readings(a, accountId)).toEqual(before);
    expect(await readings(b, accountId)).toEqual(before);
  });

  it('a late flush into a folded minute counts (folded again), and a retried flush id counts once, before and after folds', async () => {
    const { a, accountId } = await open();
    expect(await a.usage.addFlush('node-a', 'l-1', T, [d(accountId, 'user:alice', 100)], none(T))).toBe('ok');
    expect(await a.usage.rollUp!()).toBe(1);
    // The same flush again (its first attempt committed, its answer was lost): nothing more.
    expect(await a.usage.addFlush('node-a', 'l-1', T, [d(accountId, 'user:alice', 100)], none(T))).toBe('duplicate');
    // A late flush (the database was away) into the folded minute.
    expect(await a.usage.addFlush('node-a', 'l-2', T + 5_000, [d(accountId, 'user:alice', 5)], none(T))).toBe('ok');
    const late = await readings(a, accountId);
    expect(late.minutes).toEqual([[Date.UTC(2026, 0, 31, 23, 59), 105, 0, 2]]);
    expect(late.hours).toEqual([[Date.UTC(2026, 0, 31, 23), 105, 0, 2]]);
    expect(late.daily).toEqual([{ accountId, subject: 'user:alice', startMs: Date.UTC(2026, 0, 31), bytes: 105 }]);
    expect(await a.usage.rollUp!()).toBe(1);
    expect(await readings(a, accountId)).toEqual(late);
    expect(await a.usage.addFlush('node-a', 'l-2', T + 5_000, [d(accountId, 'user:alice', 5)], none(T))).toBe(
      'duplicate',
    );
    expect(await readings(a, accountId)).toEqual(late);
  });

  it("a minute that has not ended a minute ago (by the database's clock) is not folded yet, and still counts", async () => {
    const { a, accountId } = await open();
    const now = Date.now();
    expect(await a.usage.addFlush('node-a', 'n-1', now, [d(accountId, 'user:alice', 42)], none(now))).toBe('ok');
    expect(await a.usage.rollUp!()).toBe(0);
    const [row] = await a.usage.query({ accountId, period: 'day', fromMs: now - DAY, toMs: now + DAY, by: 'subject' });
    expect(row).toMatchObject({ subject: 'user:alice', bytesUp: 42, connections: 1 });
  });

  it(
    'two nodes flushing while both fold over and over: every count once, nothing lost',
    async () => {
      const { a, b, accountId } = await open();
      const stop = { now: false };
      const folds = Promise.all(
        [a, b].map(async (s) => {
          let n = 0;
          while (!stop.now) {
            const r = await s.usage.rollUp!();
            if (r !== 'skipped') n += r;
          }
          return n;
        }),
      );
      let expected = 0;
      await Promise.all(
        [a, b].map(async (s, node) => {
          for (let i = 0; i < 60; i++) {
            const at = T - 30 * 60_000 + i * 30_000; // minutes of the hour before midnight and of the one after
            const deltas = [d(accountId, `user:u${i % 7}`, i + 1), d(accountId, `user:v${node}`, 1)];
            expected += i + 2;
            expect(await s.usage.addFlush(`node-${node}`, `c-${node}-${i}`, at, deltas, none(at))).toBe('ok');
            if (i % 10 === 0)
              expect(await s.usage.addFlush(`node-${node}`, `c-${node}-${i}`, at, deltas, none(at))).toBe('duplicate');
          }
        }),
      );
      stop.now = true;
      await folds;
      await a.usage.rollUp!();
      const total = async (period: 'minute' | 'hour' | 'day') =>
        (await a.usage.query({ accountId, period, fromMs: T - DAY, toMs: T + DAY, by: 'time' })).reduce(
          (n, r) => n + r.bytesUp,
          0,
        );
      expect(await total('minute')).toBe(expected);
      expect(await total('hour')).toBe(expected);
      expect(await total('day')).toBe(expected);
      expect((await a.usage.dailyTotals([accountId], T - DAY)).reduce((n, r) => n + r.bytes, 0)).toBe(expected);
    },
    patient(60_000),
  );

  it('pruning minutes folds them first: hours and days keep their counts', async () => {
    const { a, accountId } = await open();
    expect(await a.usage.addFlush('node-a', 'p-1', T, [d(accountId, 'user:alice', 9)], none(T))).toBe('ok');
    expect(await a.usage.prune('minute', T + DAY)).toBe(1);
    expect((await readings(a, accountId)).hours).toEqual([[Date.UTC(2026, 0, 31, 23), 9, 0, 1]]);
  });

  it('domains come apart from buckets: in the day of their own time, not written when absent', async () => {
    const { a, accountId } = await open();
    const dom = (target: string, up: number): UsageDelta => ({
      accountId,
      subject: 'user:alice',
      target,
      bytesUp: up,
      bytesDown: 0,
      connections: 1,
    });
    // Buckets of 00:00:10 on February 1st; domains collected on January 31st.
    expect(
      await a.usage.addFlush('node-a', 'd-1', T + 40_000, [d(accountId, 'user:alice', 3)], {
        atMs: T,
        deltas: [dom('example.com', 3)],
      }),
    ).toBe('ok');
    expect(
      await a.usage.domains({ accountId, fromMs: Date.UTC(2026, 0, 31), toMs: Date.UTC(2026, 0, 31) + DAY }),
    ).toMatchObject([{ domain: 'example.com', bytesUp: 3 }]);
    expect(
      await a.usage.domains({ accountId, fromMs: Date.UTC(2026, 1, 1), toMs: Date.UTC(2026, 1, 1) + DAY }),
    ).toEqual([]);
    expect(await a.usage.addFlush('node-a', 'd-2', T + 40_000, [d(accountId, 'user:alice', 3)], none(T + 40_000))).toBe(
      'ok',
    );
    expect(
      await a.usage.domains({ accountId, fromMs: Date.UTC(2026, 1, 1), toMs: Date.UTC(2026, 1, 1) + DAY }),
    ).toEqual([]);
    expect(
      (
        await a.usage.query({
          accountId,
          period: 'hour',
          fromMs: Date.UTC(2026, 1, 1),
          toMs: Date.UTC(2026, 1, 1) + H,
          by: 'time',
        })
      )[0],
    ).toMatchObject({ bytesUp: 6 });
  });
});

describe("the meter's cadence (an injected clock)", () => {
  interface Sent {
    id: string;
    atMs: number;
    deltas: UsageDelta[];
    domains: FlushDomains | undefined;
  }

  function fakeStore(answer: () => 'ok' | 'busy' = () => 'ok') {
    const sent: Sent[] = [];
    const store: Pick<UsageStore, 'addFlush' | 'prune'> = {
      addFlush: async (_node, id, atMs, deltas, domains) => {
        const r = answer();
        sent.push({ id, atMs, deltas: [...deltas], domains });
        return r;
      },
      prune: async () => 0,
    };
    return { store, sent };
  }

  const LIMITED = 1;
  const FREE = 2;
  const delta = (accountId: number, target: string, up: number): UsageDelta => ({
    accountId,
    subject: `user:a${accountId}`,
    target,
    bytesUp: up,
    bytesDown: 0,
    connections: 1,
  });

  it('limited accounts every tick, the others every 4 s, domains every 60 s: each delta once, in bytes and in domains', async () => {
    let now = Date.UTC(2026, 10, 25, 12, 0, 0, 300);
    const { store, sent } = fakeStore();
    const meter = new UsageMeter(
      store,
      () => [delta(LIMITED, 'a.example.com:443', 1), delta(FREE, 'b.example.org:443', 10)],
      {
        intervalMs: 1_000,
        relaxedIntervalMs: 4_000,
        domainIntervalMs: 60_000,
        urgent: (id) => id === LIMITED,
        nowMs: () => now,
      },
    );
    const ticks = 120;
    for (let i = 0; i < ticks; i++) {
      now += 1_000;
      await meter.tick();
    }
    const limitedFlushes = sent.filter((f) => f.deltas.some((d) => d.accountId === LIMITED));
    const freeFlushes = sent.filter((f) => f.deltas.some((d) => d.accountId === FREE));
    expect(limitedFlushes).toHaveLength(ticks);
    expect(freeFlushes.length).toBeGreaterThanOrEqual(ticks / 4 - 1);
    expect(freeFlushes.length).toBeLessThanOrEqual(ticks / 4 + 1);
    // Visibility: a free account's bytes wait at most one relaxed interval for their flush.
    for (let i = 1; i < freeFlushes.length; i++)
      expect(freeFlushes[i]!.atMs - freeFlushes[i - 1]!.atMs).toBeLessThanOrEqual(4_000);
    const withDomains = sent.filter((f) => (f.domains?.deltas.length ?? 0) > 0);
    expect(withDomains.length).toBeGreaterThanOrEqual(1);
    expect(withDomains.length).toBeLessThanOrEqual(3);
    await meter.stop(1_000);
    // Everything collected is written exactly once: in buckets and in domains.
    const sum = (xs: UsageDelta[], id: number) =>
      xs.filter((d) => d.accountId === id).reduce((n, d) => n + d.bytesUp, 0);
    expect(
      sum(
        sent.flatMap((f) => f.deltas),
        FREE,
      ),
    ).toBe(10 * (ticks + 1));
    expect(
      sum(
        sent.flatMap((f) => f.domains?.deltas ?? []),
        FREE,
      ),
    ).toBe(10 * (ticks + 1));
    expect(
      sum(
        sent.flatMap((f) => f.domains?.deltas ?? []),
        LIMITED,
      ),
    ).toBe(ticks + 1);
    expect(new Set(sent.map((f) => f.id)).size).toBe(sent.length);
  });

  it("the end of a UTC day sends that day's domains with a time in it", async () => {
    let now = Date.UTC(2026, 10, 25, 23, 59, 57, 500);
    const { store, sent } = fakeStore();
    // Phase 0: a whole domain interval before the first domain flush, so within these six seconds only the
    // day's end sends domains (a random phase could also send the new day's, which this test does not look at).
    const meter = new UsageMeter(store, () => [delta(FREE, 'b.example.org:443', 1)], {
      relaxedIntervalMs: 4_000,
      domainIntervalMs: 60_000,
      urgent: () => false,
      nowMs: () => now,
      phase: 0,
    });
    for (let i = 0; i < 6; i++) {
      await meter.tick();
      now += 1_000;
    }
    const domainFlushes = sent.filter((f) => (f.domains?.deltas.length ?? 0) > 0);
    // The day's end sends the collections of November 25th, in that day.
    const old = domainFlushes.filter((f) => f.domains!.atMs < Date.UTC(2026, 10, 26));
    expect(old.reduce((n, f) => n + f.domains!.deltas[0]!.bytesUp, 0)).toBe(3); // the three collections of November 25th
    expect(domainFlushes.every((f) => f.domains!.atMs < Date.UTC(2026, 10, 26))).toBe(true);
  });

  it('a flush the store did not take is sent again with its id; the domains of a budget sync wait for their interval', async () => {
    let now = Date.UTC(2026, 10, 25, 12, 0, 0);
    let busy = true;
    const { store, sent } = fakeStore(() => (busy ? 'busy' : 'ok'));
    const meter = new UsageMeter(store, () => [delta(LIMITED, 'a.example.com:443', 1)], {
      relaxedIntervalMs: 4_000,
      domainIntervalMs: 60_000,
      urgent: (id) => id === LIMITED,
      nowMs: () => now,
    });
    await meter.tick();
    now += 1_000;
    await meter.tick();
    expect(sent.map((f) => f.id)).toEqual([sent[0]!.id, sent[0]!.id]);
    busy = false;
    now += 1_000;
    expect(await meter.flushAccounts(new Set([LIMITED]))).toBe(true);
    const last = sent.at(-1)!;
    expect(sent.slice(0, 3).map((f) => f.id)).toEqual([sent[0]!.id, sent[0]!.id, sent[0]!.id]); // the first, taken at last
    expect(last.deltas.map((d) => d.bytesUp)).toEqual([3]); // the three collections since the first flush's
    expect(last.domains?.deltas).toEqual([]);
  });
});
