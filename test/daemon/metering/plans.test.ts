// The plan enforcer (src/daemon/metering/plans.ts) against a real SQLite store in a temp dir, with its clock
// injected: where periods start and end, what a byte grant is, connection slots leased across two nodes, and
// a limit changed while a connection is streaming.
import { afterEach, describe, expect, it } from 'vitest';
import {
  NO_PLAN_PERIOD,
  PlanEnforcer,
  accountPeriodStart,
  periodStart,
  planState,
  type PlanEnforcerOptions,
} from '../../../src/daemon/metering/plans.js';
import { openStore, type Plan, type Store } from '../../../src/daemon/store/index.js';
import { tempDir } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/wait.js';

const stores: Store[] = [];
const enforcers: PlanEnforcer[] = [];
afterEach(async () => {
  for (const e of enforcers.splice(0)) await e.stop();
  for (const s of stores.splice(0)) await s.close();
});

const NOW = Date.UTC(2026, 10, 15, 12, 0, 0); // 2026-11-15 12:00 UTC
const ALICE = 'user:alice';
const BOB = 'user:bob';

async function setup() {
  const store = await openStore({ dataDir: tempDir() });
  stores.push(store);
  const a = await store.accounts.create(`plans-${Math.random()}@example.com`, 'x', true);
  if (a === 'exists') throw new Error('exists');
  for (const name of ['alice', 'bob'])
    if ((await store.proxyUsers.create(a.id, name, 'not-a-real-hash')) === 'exists') throw new Error('exists');
  let flushes = 0;
  /** Usage of this account as a node flushed it at `atMs`. */
  const use = async (subject: string, bytes: number, atMs: number) => {
    expect(
      await store.usage.addFlush('other-node', `f${++flushes}`, atMs, [
        { accountId: a.id, subject, bytesUp: bytes, bytesDown: 0, connections: 1 },
      ]),
    ).toBe('ok');
  };
  const plan = (p: Partial<Plan>) =>
    store.plans.set({
      accountId: a.id,
      trafficLimit: null,
      period: 'month',
      anchorDay: 1,
      maxConnections: null,
      expiresAt: null,
      ...p,
    });
  return { store, accountId: a.id, use, plan };
}

/** An enforcer on the store, its plans read; `now` is its clock. */
async function enforcer(store: Store, opts: PlanEnforcerOptions = {}) {
  const e = new PlanEnforcer(store, { nowMs: () => NOW, ...opts });
  enforcers.push(e);
  await e.refresh();
  return e;
}

/** The budget of a key after this node's first sync of it (what an admission waits for). */
async function synced(e: PlanEnforcer, accountId: number, subject: string) {
  const b = e.budgetFor(accountId, subject);
  await e.pending(accountId, subject);
  return b;
}

describe('plan periods', () => {
  it('day: UTC midnight; month: the last anchor day, also across a year; lifetime: always', () => {
    expect(periodStart('day', 15, NOW)).toBe(Date.UTC(2026, 10, 15));
    expect(periodStart('month', 15, Date.UTC(2026, 10, 15))).toBe(Date.UTC(2026, 10, 15)); // the first instant is in
    expect(periodStart('month', 15, Date.UTC(2026, 10, 15) - 1)).toBe(Date.UTC(2026, 9, 15)); // the last one before is not
    expect(periodStart('month', 20, Date.UTC(2027, 0, 3))).toBe(Date.UTC(2026, 11, 20));
    expect(periodStart('lifetime', 1, NOW)).toBe(0);
  });

  it('an account without a plan counts in the calendar month', () => {
    expect(NO_PLAN_PERIOD).toEqual({ period: 'month', anchorDay: 1 });
    expect(accountPeriodStart(null, NOW)).toBe(Date.UTC(2026, 10, 1));
    expect(accountPeriodStart({ period: 'month', anchorDay: 20 }, NOW)).toBe(Date.UTC(2026, 9, 20));
  });

  it('over at the limit exactly; expired at the expiry instant exactly', () => {
    const p: Plan = {
      accountId: 1,
      trafficLimit: 1000,
      period: 'month',
      anchorDay: 1,
      maxConnections: null,
      expiresAt: NOW,
    };
    expect(planState({ ...p, expiresAt: null }, 999, NOW)).toBe('ok');
    expect(planState({ ...p, expiresAt: null }, 1000, NOW)).toBe('over_traffic');
    expect(planState(p, 0, NOW - 1)).toBe('ok');
    expect(planState(p, 0, NOW)).toBe('expired');
  });

  it("usage before the period's first day does not count against its limit; usage from it does", async () => {
    const { store, accountId, use, plan } = await setup();
    await plan({ trafficLimit: 4000, anchorDay: 15 });
    await use(ALICE, 5000, Date.UTC(2026, 10, 15) - 1); // the 14th, 23:59:59.999
    const e1 = await enforcer(store);
    expect((await synced(e1, accountId, ALICE))!.remaining).toBe(4000);
    expect(e1.refusal(accountId, ALICE)).toBeNull();

    await use(ALICE, 4000, Date.UTC(2026, 10, 15)); // the 15th, 00:00
    const e2 = await enforcer(store);
    expect((await synced(e2, accountId, ALICE))!.remaining).toBe(0);
    expect(e2.refusal(accountId, ALICE)).toBe('traffic_limit');
  });

  it("a user's limit counts in the calendar month when the account has no plan", async () => {
    const { store, accountId, use } = await setup();
    await store.plans.setUserLimits(accountId, 'alice', { trafficLimit: 1000, maxConnections: null });
    await use(ALICE, 2000, Date.UTC(2026, 10, 1) - 1); // October's last instant
    const e1 = await enforcer(store);
    expect(await synced(e1, accountId, ALICE)).not.toBeNull();
    expect(e1.refusal(accountId, ALICE)).toBeNull();
    await use(ALICE, 1000, Date.UTC(2026, 10, 1));
    const e2 = await enforcer(store);
    await synced(e2, accountId, ALICE);
    expect(e2.refusal(accountId, ALICE)).toBe('traffic_limit');
  });

  it('an expired plan refuses from its expiry instant, without a sync', async () => {
    const { store, accountId, plan } = await setup();
    await plan({ expiresAt: NOW + 1 });
    let now = NOW;
    const e = await enforcer(store, { nowMs: () => now });
    expect(e.refusal(accountId, ALICE)).toBeNull();
    now = NOW + 1;
    expect(e.refusal(accountId, ALICE)).toBe('plan_expired');
  });
});

describe('byte grants', () => {
  it('no limit: no budget, nothing to wait for', async () => {
    const { store, accountId } = await setup();
    const e = await enforcer(store);
    expect(e.budgetFor(accountId, ALICE)).toBeNull();
    expect(e.pending(accountId, ALICE)).toBeNull();
  });

  it('a grant is at most grantBytes, never more than the limit leaves; none once the limit is used', async () => {
    const { store, accountId, use, plan } = await setup();
    await plan({ trafficLimit: 10_000 });
    const e = await enforcer(store, { grantBytes: 4096 });
    const fresh = e.budgetFor(accountId, ALICE)!;
    expect(fresh.remaining).toBe(0); // nothing before the first sync
    expect(e.pending(accountId, ALICE)).not.toBeNull();
    expect((await synced(e, accountId, ALICE))!.remaining).toBe(4096);
    expect(e.pending(accountId, ALICE)).toBeNull(); // synced: admissions no longer wait

    await use(ALICE, 7000, NOW);
    const e2 = await enforcer(store, { grantBytes: 4096 });
    expect((await synced(e2, accountId, ALICE))!.remaining).toBe(3000);
    await use(BOB, 3000, NOW);
    const e3 = await enforcer(store, { grantBytes: 4096 });
    expect((await synced(e3, accountId, ALICE))!.remaining).toBe(0);
    expect(e3.refusal(accountId, ALICE)).toBe('traffic_limit');
    expect(e3.refusal(accountId, BOB)).toBe('traffic_limit'); // the account's limit: every user of it
  });

  it("a user's limit: its budget hangs under the account's, and only that user is refused", async () => {
    const { store, accountId, use, plan } = await setup();
    await plan({ trafficLimit: 1_000_000 });
    await store.plans.setUserLimits(accountId, 'alice', { trafficLimit: 500, maxConnections: null });
    await use(ALICE, 500, NOW);
    const e = await enforcer(store, { grantBytes: 4096 });
    const alice = (await synced(e, accountId, ALICE))!;
    expect(alice.parent).toBe(e.budgetFor(accountId, BOB)); // bob has no limit of his own: the account's budget
    expect(alice.remaining).toBe(0);
    expect(alice.parent!.remaining).toBe(4096);
    expect(e.refusal(accountId, ALICE)).toBe('traffic_limit');
    expect(e.refusal(accountId, BOB)).toBeNull();
  });

  it("flushes this node's usage of the account before it grants; no grant when the flush fails", async () => {
    const { store, accountId, plan } = await setup();
    await plan({ trafficLimit: 10_000 });
    const asked: number[][] = [];
    let ok = false;
    const e = await enforcer(store, { flushAccounts: async (ids) => (asked.push([...ids]), ok) });
    await synced(e, accountId, ALICE);
    expect(asked).toEqual([[accountId]]);
    expect(e.budgetFor(accountId, ALICE)!.remaining).toBe(0); // the store away: no grant, limited traffic pauses
    ok = true;
    await e.refresh();
    await waitFor('granted after the flush works again', () => e.budgetFor(accountId, ALICE)!.remaining > 0, 5_000);
  });
});

describe('connection slots', () => {
  it('two nodes never hold more than the cap; slots given back are free for the other', async () => {
    const { store, accountId, plan } = await setup();
    await plan({ maxConnections: 3 });
    const open = { n1: 0, n2: 0 };
    const n1 = await enforcer(store, { node: 'n1', openConnections: () => open.n1 });
    const n2 = await enforcer(store, { node: 'n2', openConnections: () => open.n2 });
    const count = (n: 'n1' | 'n2') => () => ({ account: open[n], user: open[n] });

    // n1 holds nothing yet: it has to ask; then it admits within what it holds without asking.
    expect(n1.slotFree(accountId, ALICE, count('n1')())).toBeNull();
    await n1.moreSlots(accountId, ALICE, count('n1'));
    expect(n1.slotFree(accountId, ALICE, count('n1')())).toBe(true);
    open.n1 = 1;
    expect(n1.slotFree(accountId, ALICE, count('n1')())).toBeNull();
    await n1.moreSlots(accountId, ALICE, count('n1'));
    open.n1 = 2;

    // n2 gets what the cap leaves (1), and no more.
    await n2.moreSlots(accountId, ALICE, count('n2'));
    expect(n2.slotFree(accountId, ALICE, count('n2')())).toBe(true);
    open.n2 = 1;
    await n2.moreSlots(accountId, ALICE, count('n2'));
    expect(n2.slotFree(accountId, ALICE, count('n2')())).toBeNull(); // still none: refused
    // At the cap on this node alone: refused without asking.
    expect(n1.slotFree(accountId, ALICE, { account: 3, user: 3 })).toBe(false);

    // n1's connections close: its refresh gives the slots back, and n2 gets them.
    open.n1 = 0;
    await n1.refresh();
    await n2.moreSlots(accountId, ALICE, count('n2'));
    expect(n2.slotFree(accountId, ALICE, count('n2')())).toBe(true);
  });

  it("a user's cap and the account's both hold", async () => {
    const { store, accountId, plan } = await setup();
    await plan({ maxConnections: 10 });
    await store.plans.setUserLimits(accountId, 'alice', { trafficLimit: null, maxConnections: 1 });
    const e = await enforcer(store, { node: 'n1', openConnections: () => 0 });
    await e.moreSlots(accountId, ALICE, () => ({ account: 0, user: 0 }));
    expect(e.slotFree(accountId, ALICE, { account: 0, user: 0 })).toBe(true);
    expect(e.slotFree(accountId, ALICE, { account: 0, user: 1 })).toBe(false); // alice's own cap
    expect(e.slotFree(accountId, BOB, { account: 0, user: 0 })).toBe(true); // bob: only the account's
    expect(e.slotFree(accountId, ALICE, { account: 10, user: 0 })).toBe(false); // the account's cap
  });

  it('a node that stops renewing holds its slots until its lease expires (10 s), then they are free', async () => {
    const { store, accountId, plan } = await setup();
    await plan({ maxConnections: 2 });
    let now = NOW;
    const dead = new PlanEnforcer(store, { node: 'dead', nowMs: () => now });
    await dead.refresh();
    await dead.moreSlots(accountId, ALICE, () => ({ account: 1, user: 1 })); // asks for 2
    const live = await enforcer(store, { node: 'live', nowMs: () => now, openConnections: () => 0 });
    await live.moreSlots(accountId, ALICE, () => ({ account: 0, user: 0 }));
    expect(live.slotFree(accountId, ALICE, { account: 0, user: 0 })).toBeNull();
    now = NOW + 10_001;
    await live.moreSlots(accountId, ALICE, () => ({ account: 0, user: 0 }));
    expect(live.slotFree(accountId, ALICE, { account: 0, user: 0 })).toBe(true);
  });
});

describe('a limit changed while a connection streams', () => {
  it('lowered below what was used: the open connection is rebudgeted and closed; raised: it relays again; lifted: unbudgeted', async () => {
    const { store, accountId, use, plan } = await setup();
    await plan({ trafficLimit: 100_000 });
    const rebudgeted: Array<ReturnType<PlanEnforcer['budgetFor']>> = [];
    const closed: Array<string | null> = [];
    const e = await enforcer(store, {
      grantBytes: 4096,
      openConnections: () => 1,
      rebudget: (budgetFor) => rebudgeted.push(budgetFor(accountId, ALICE)),
      close: (match) => (closed.push(match(accountId, ALICE)), match(accountId, ALICE) !== null ? 1 : 0),
    });
    const b = (await synced(e, accountId, ALICE))!;
    expect(b.remaining).toBe(4096);
    b.take(3000); // streaming
    await use(ALICE, 3000, NOW); // and flushed

    await plan({ trafficLimit: 2000 });
    await e.refresh();
    expect(rebudgeted.at(-1)).toBe(b); // the open connection stays under the same budget, now of the lower limit
    await waitFor('closed as over', () => closed.includes('traffic_limit'), 5_000);
    expect(e.refusal(accountId, ALICE)).toBe('traffic_limit');
    expect(b.remaining).toBe(0);

    let resumed = false;
    b.park(() => (resumed = true)); // a reader waits for room
    await plan({ trafficLimit: 100_000 });
    await e.refresh();
    await waitFor('granted again', () => b.remaining > 0, 5_000);
    expect(resumed).toBe(true);
    expect(e.refusal(accountId, ALICE)).toBeNull();

    await plan({ trafficLimit: null });
    await e.refresh();
    expect(rebudgeted.at(-1)).toBeNull(); // new reads of the connection go unbudgeted
    expect(e.budgetFor(accountId, ALICE)).toBeNull();
    await waitFor('the open connection unbudgeted', () => b.remaining === Infinity, 5_000);
  });
});
