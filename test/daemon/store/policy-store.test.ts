// Target rules and rate limits on each backend: stored and read back (the service's under account 0), emptied
// lists remove the row, the plan version moves with a rate change; and the plan enforcer's rate budgets: one
// shared pair per user, drawing on the account's, changed in place, lifted to none with their readers freed.
import { afterEach, describe, expect, it } from 'vitest';
import { policySet } from '../../../src/daemon/admin/policy.js';
import { PlanEnforcer } from '../../../src/daemon/metering/plans.js';
import { setTargetRules } from '../../../src/daemon/services/target-rules.js';
import { openStore, type Store } from '../../../src/daemon/store/index.js';
import type { RateBudget } from '../../../src/gateway/index.js';
import { databaseUrlOf, dataDirFor } from '../../helpers/daemon.js';
import { BACKENDS } from '../../helpers/postgres.js';

const stores: Store[] = [];
const enforcers: PlanEnforcer[] = [];
afterEach(async () => {
  for (const e of enforcers.splice(0)) await e.stop();
  for (const s of stores.splice(0)) await s.close();
});

async function open(backend: (typeof BACKENDS)[number]) {
  const dataDir = await dataDirFor(backend);
  const store = await openStore({ dataDir, databaseUrl: databaseUrlOf(dataDir) });
  stores.push(store);
  const email = `p-${backend}-${Math.random()}@example.com`;
  const a = await store.accounts.create(email, 'x', true);
  if (a === 'exists') throw new Error('exists');
  if ((await store.proxyUsers.create(a.id, 'alice', 'not-a-real-hash')) === 'exists') throw new Error('exists');
  return { store, accountId: a.id, email };
}

describe.each(BACKENDS)('policy in the store on %s', (backend) => {
  it("target rules: set, kept, emptied; a bad item changes nothing; the service's apart", async () => {
    const { store, accountId, email } = await open(backend);
    expect(await setTargetRules(store, accountId, { deny: 'a.example,10.0.0.0/8', allow: '*.b.example' })).toEqual({
      ok: true,
      rules: { deny: ['a.example', '10.0.0.0/8'], allow: ['*.b.example'] },
    });
    expect(await setTargetRules(store, accountId, { deny: 'c.example' })).toEqual({
      ok: true,
      rules: { deny: ['c.example'], allow: ['*.b.example'] },
    });
    const bad = await setTargetRules(store, accountId, { deny: 'd.example', allow: 'bad item' });
    expect(bad).toMatchObject({
      ok: false,
      code: 'invalid_items',
      lists: [{ list: 'allow', problems: [{ item: 'bad item' }] }],
    });
    expect(await store.targetRules.get(accountId)).toEqual({ deny: ['c.example'], allow: ['*.b.example'] });
    // Both lists bad: every bad item is named, each under its list.
    await expect(policySet(store, { email, deny: 'bad one,e.example', allow: 'bad item' })).rejects.toThrow(
      '--deny: "bad one": not a domain name; --allow: "bad item": not a domain name; nothing changed',
    );
    expect(await store.targetRules.get(accountId)).toEqual({ deny: ['c.example'], allow: ['*.b.example'] });
    expect(await setTargetRules(store, 'service', { allow: 'x.example' })).toEqual({
      ok: false,
      code: 'service_allow',
    });
    expect((await setTargetRules(store, 'service', { deny: 'evil.example' })).ok).toBe(true);
    expect(await store.targetRules.get(0)).toEqual({ deny: ['evil.example'], allow: [] });
    expect((await setTargetRules(store, accountId, { deny: 'none', allow: 'none' })).ok).toBe(true);
    expect(await store.targetRules.get(accountId)).toEqual({ deny: [], allow: [] });
    // Both reach the admission view's feed: the account's key names its rules.
    const snap = await store.changeLog.snapshot();
    expect(snap.rules).toEqual([{ account_id: 0, deny: 'evil.example', allow: '' }]);
  });

  it('rate limits: stored on plans and users, read by the enforcer, the version moves', async () => {
    const { store, accountId } = await open(backend);
    const v0 = await store.plans.version();
    await store.plans.set({
      accountId,
      trafficLimit: null,
      period: 'month',
      anchorDay: 1,
      maxConnections: null,
      expiresAt: null,
      rateLimit: 4_000_000,
    });
    expect(
      await store.plans.setUserLimits(accountId, 'alice', {
        trafficLimit: null,
        maxConnections: null,
        rateLimit: 8_000_000,
      }),
    ).toBe(true);
    expect(await store.plans.version()).toBeGreaterThan(v0);
    expect((await store.plans.get(accountId))?.rateLimit).toBe(4_000_000);
    const all = await store.plans.all();
    expect(all.users).toEqual([
      {
        accountId,
        username: 'alice',
        trafficLimit: null,
        maxConnections: null,
        rateLimit: 8_000_000,
        expiresAt: null,
        allow: [],
        deny: [],
      },
    ]);

    let rerated: Array<RateBudget | null> = [];
    const e = new PlanEnforcer(store, { rerate: (rateFor) => (rerated = [rateFor(accountId, 'user:alice')]) });
    enforcers.push(e);
    await e.refresh();
    const alice = e.rateFor(accountId, 'user:alice')!;
    expect(alice.up.rate).toBe(1_000_000); // bytes per second
    expect(alice.up.parent?.rate).toBe(500_000); // the account's
    expect(e.rateFor(accountId, 'user:alice')).toBe(alice); // one pair, shared by the user's connections
    expect(e.rateFor(accountId, 'user:bob')!.up).toBe(alice.up.parent);

    // Changed: the same pair, its rate in place; lifted: none, and the old bucket lets everyone go.
    await store.plans.setUserLimits(accountId, 'alice', {
      trafficLimit: null,
      maxConnections: null,
      rateLimit: 2_000_000,
    });
    await e.refresh();
    expect(rerated[0]).toBe(alice);
    expect(alice.down.rate).toBe(250_000);
    await store.plans.setUserLimits(accountId, 'alice', { trafficLimit: null, maxConnections: null, rateLimit: null });
    await store.plans.set({
      accountId,
      trafficLimit: null,
      period: 'month',
      anchorDay: 1,
      maxConnections: null,
      expiresAt: null,
      rateLimit: null,
    });
    await e.refresh();
    expect(rerated[0]).toBeNull();
    expect(alice.up.rate).toBe(Infinity);
    expect(e.rateFor(accountId, 'user:alice')).toBeNull();
  });
});
