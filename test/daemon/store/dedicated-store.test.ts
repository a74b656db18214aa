// Dedicated egress addresses in the store and their services, on each backend: what nodes register, all-or-nothing
// assignment, release with and without quarantine, a customer's replacement (same node, else same country; the
// monthly allowance → 10429 with Retry-After to the month's end; none free → 10503), usage by address, the audit
// records; two replacements racing for the last free address leave one holder.
import { afterEach, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../../src/daemon/store/index.js';
import {
  assignAddresses,
  customerIps,
  DedicatedError,
  monthOf,
  releaseAddresses,
  replaceAddress,
} from '../../../src/daemon/services/dedicated.js';
import { usageSummary } from '../../../src/daemon/services/usage.js';
import { operatorContext } from '../../../src/daemon/services/audit.js';
import { DedicatedView, offeredAddresses } from '../../../src/daemon/admission/dedicated.js';
import { databaseUrlOf, dataDirFor } from '../../helpers/daemon.js';
import { BACKENDS } from '../../helpers/postgres.js';

const stores: Store[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

const NOW = Date.UTC(2026, 10, 25, 10, 30, 15);
const nowSec = Math.floor(NOW / 1000);

async function open(backend: (typeof BACKENDS)[number]) {
  const dataDir = await dataDirFor(backend);
  const store = await openStore({ dataDir, databaseUrl: databaseUrlOf(dataDir) });
  stores.push(store);
  const ids: number[] = [];
  for (const who of ['a', 'b']) {
    const a = await store.accounts.create(`${who}-${backend}-${Math.random()}@example.com`, 'x', true);
    if (a === 'exists') throw new Error('exists');
    ids.push(a.id);
  }
  await store.egress.register('ny-1', ['203.0.113.1', '203.0.113.2', '203.0.113.3'], { country: 'us', city: 'nyc' });
  await store.egress.register('ny-2', ['203.0.113.10', '203.0.113.11'], { country: 'us', city: 'nyc' });
  await store.egress.register('de-1', ['198.51.100.1'], { country: 'de', city: null });
  return { store, a: ids[0]!, b: ids[1]! };
}

const ctx = operatorContext();
const opts = (max = 3) => ({ maxPerMonth: max, quarantineDays: 30, nowSec });

describe('what a node offers', () => {
  it('a pool or an egress address is named (the offer replaces the last); the interfaces are not (they only add)', () => {
    expect(offeredAddresses(['203.0.113.1', '203.0.113.2'], '203.0.113.9')).toEqual({
      addresses: ['203.0.113.1', '203.0.113.2'],
      named: true,
    });
    expect(offeredAddresses(null, '203.0.113.9')).toEqual({ addresses: ['203.0.113.9'], named: true });
    expect(offeredAddresses([], '2001:db8::1')).toMatchObject({ named: false });
    expect(offeredAddresses(null, undefined)).toMatchObject({ named: false });
  });
});

describe.each(BACKENDS)('dedicated addresses on %s', (backend) => {
  it('assigns all or nothing, names what is wrong, and records it', async () => {
    const { store, a, b } = await open(backend);
    await expect(assignAddresses(store, a, 'ny-1', '203.0.113.1-203.0.113.2', ctx)).resolves.toHaveLength(2);
    const refusals: Array<[string, string, RegExp]> = [
      ['ny-1', '203.0.113.3,203.0.113.1', /203\.0\.113\.1 is held by another account/],
      ['ny-1', '203.0.113.3,203.0.113.10', /203\.0\.113\.10 is not an egress address of node ny-1/],
      ['ny-9', '203.0.113.3', /no node "ny-9"/],
      ['bad name!', '203.0.113.3', /not a node name/],
      ['ny-1', '203.0.113.3/32', /"203\.0\.113\.3\/32" is not an IPv4 address or range/],
      ['ny-1', '203.0.113.3-203.0.113.1', /ends before it starts/],
      ['ny-1', '', /the list is empty/],
    ];
    for (const [node, list, why] of refusals)
      await expect(assignAddresses(store, b, node, list, ctx)).rejects.toThrow(why);
    expect((await store.egress.list({ accountId: b })).length).toBe(0);
    expect((await store.egress.list({ node: 'ny-1' })).map((r) => [r.address, r.state, r.accountId])).toEqual([
      ['203.0.113.1', 'assigned', a],
      ['203.0.113.2', 'assigned', a],
      ['203.0.113.3', 'free', null],
    ]);
    const audit = await store.audit.list({ accountId: a, limit: 10, offset: 0 });
    expect(audit.rows.map((r) => [r.action, r.target, r.details])).toEqual([
      ['ip.assigned', 'ny-1', { addresses: ['203.0.113.1', '203.0.113.2'] }],
    ]);
  });

  it('releases (with a quarantine nobody can assign through), and the view says who holds what', async () => {
    const { store, a, b } = await open(backend);
    await assignAddresses(store, a, 'ny-1', '203.0.113.1,203.0.113.2', ctx);
    await expect(releaseAddresses(store, '203.0.113.1,192.0.2.77', 0, ctx, nowSec)).rejects.toThrow(
      /192\.0\.2\.77 is not an egress address of any node; nothing changed/,
    );
    expect((await store.egress.list({ accountId: a })).length).toBe(2);
    await expect(releaseAddresses(store, '203.0.113.1', 7, ctx, Math.floor(Date.now() / 1000))).resolves.toEqual({
      released: 1,
      addresses: ['203.0.113.1'],
    });
    await expect(assignAddresses(store, b, 'ny-1', '203.0.113.1', ctx)).rejects.toThrow(
      /203\.0\.113\.1 is quarantined until/,
    );
    const view = new DedicatedView(store, { node: 'ny-1' });
    await view.refresh();
    expect(view.here(a)).toEqual(['203.0.113.2']);
    expect(view.reserved('203.0.113.1')).toBe(true); // quarantined: out of the shared rotation too
    expect(view.reserved('203.0.113.3')).toBe(false);
    expect(view.nodeOf(a, '203.0.113.2')).toBe('ny-1');
    expect(view.nodeOf(b, '203.0.113.2')).toBeNull();
    expect(view.counts()).toEqual({ assigned: 1, quarantined: 1, free: 1 });
    await releaseAddresses(store, '203.0.113.1', 0, ctx, nowSec); // the operator lifts it
    await expect(assignAddresses(store, b, 'ny-1', '203.0.113.1', ctx)).resolves.toHaveLength(1);
  });

  it('a replacement takes the same node first, then the same country; quarantines the old one; at most N a month; 10503 when none is free', async () => {
    const { store, a, b } = await open(backend);
    await assignAddresses(store, a, 'ny-1', '203.0.113.1', ctx);
    await assignAddresses(store, b, 'de-1', '198.51.100.1', ctx);
    expect(await replaceAddress(store, a, '198.51.100.1', opts(), ctx)).toEqual({ ok: false, code: 'not_found' }); // another account's
    expect(await replaceAddress(store, a, '203.0.113.2', opts(), ctx)).toEqual({ ok: false, code: 'not_found' }); // a free one
    const first = await replaceAddress(store, a, '203.0.113.1', opts(), ctx);
    expect(first).toEqual({ ok: true, old: '203.0.113.1', new: '203.0.113.2' });
    const second = await replaceAddress(store, a, '203.0.113.2', opts(), ctx);
    expect(second).toEqual({ ok: true, old: '203.0.113.2', new: '203.0.113.3' });
    // ny-1 has nothing free now (1 and 2 quarantined): the same country on another node.
    const third = await replaceAddress(store, a, '203.0.113.3', opts(), ctx);
    expect(third).toEqual({ ok: true, old: '203.0.113.3', new: '203.0.113.10' });
    const over = await replaceAddress(store, a, '203.0.113.10', opts(), ctx);
    expect(over).toMatchObject({ ok: false, code: 'allowance' });
    const { secondsLeft } = monthOf(nowSec);
    expect((over as { retryAfterSec: number }).retryAfterSec).toBe(secondsLeft);
    expect(await store.egress.replacementsUsed(a, monthOf(nowSec).month)).toBe(3);
    // Germany has one address, held: none free.
    expect(await replaceAddress(store, b, '198.51.100.1', opts(), ctx)).toEqual({ ok: false, code: 'no_free' });
    const states = Object.fromEntries((await store.egress.list({})).map((r) => [r.address, r.state]));
    expect(states).toMatchObject({
      '203.0.113.1': 'quarantined',
      '203.0.113.2': 'quarantined',
      '203.0.113.3': 'quarantined',
      '203.0.113.10': 'assigned',
      '198.51.100.1': 'assigned',
    });
    const audit = await store.audit.list({ accountId: a, limit: 10, offset: 0, actions: ['ip.replaced'] });
    expect(audit.rows.map((r) => r.details)).toEqual([
      { old: '203.0.113.3', new: '203.0.113.10' },
      { old: '203.0.113.2', new: '203.0.113.3' },
      { old: '203.0.113.1', new: '203.0.113.2' },
    ]);
  });

  it('two replacements racing for the last free address: one wins, the other finds none', async () => {
    const { store, a, b } = await open(backend);
    await assignAddresses(store, a, 'de-1', '198.51.100.1', ctx);
    await store.egress.register('de-1', ['198.51.100.2', '198.51.100.3'], { country: 'de', city: null });
    await assignAddresses(store, b, 'de-1', '198.51.100.2', ctx);
    const [x, y] = await Promise.all([
      replaceAddress(store, a, '198.51.100.1', opts(), ctx),
      replaceAddress(store, b, '198.51.100.2', opts(), ctx),
    ]);
    const won = [x, y].filter((r) => r.ok);
    expect(won).toHaveLength(1);
    expect(won[0]).toMatchObject({ new: '198.51.100.3' });
    expect([x, y].filter((r) => !r.ok)).toEqual([{ ok: false, code: 'no_free' }]);
    expect(
      (await store.egress.list({ node: 'de-1' })).filter((r) => r.address === '198.51.100.3').map((r) => r.state),
    ).toEqual(['assigned']);
  });

  it('usage by address: added per day, in the summary as "ips" when the account holds any, on the IPs list', async () => {
    const { store, a, b } = await open(backend);
    await assignAddresses(store, a, 'ny-1', '203.0.113.1,203.0.113.2', ctx);
    const day = Date.now() - (Date.now() % 86_400_000);
    await store.egress.addUsage(
      [{ accountId: a, address: '203.0.113.1', bytesUp: 10, bytesDown: 100, connections: 1 }],
      day,
    );
    await store.egress.addUsage(
      [{ accountId: a, address: '203.0.113.1', bytesUp: 5, bytesDown: 50, connections: 2 }],
      day,
    );
    const summary = await usageSummary(store, a, {}, Date.now());
    expect(summary.ips).toEqual([
      { address: '203.0.113.1', bytes_up: 15, bytes_down: 150, connections: 3 },
      { address: '203.0.113.2', bytes_up: 0, bytes_down: 0, connections: 0 },
    ]);
    expect((await usageSummary(store, b, {}, Date.now())).ips).toBeUndefined();
    const ips = await customerIps(store, a, Date.now());
    expect(ips.items.map((i) => [i.address, i.country, i.city, i.bytes_up, i.bytes_down])).toEqual([
      ['203.0.113.1', 'us', 'nyc', 15, 150],
      ['203.0.113.2', 'us', 'nyc', 0, 0],
    ]);
    expect(await store.egress.pruneUsage(day + 1)).toBe(1);
  });

  it('a node registering again keeps who holds its addresses; what it no longer names goes, or is withdrawn while held', async () => {
    const { store, a, b } = await open(backend);
    const nyc = { country: 'us', city: 'nyc' };
    const newark = { country: 'us', city: 'newark' };
    const prune = { prune: true };
    const now = () => Math.floor(Date.now() / 1000);
    const listed = async () => (await store.egress.list({ node: 'ny-1' })).map((r) => [r.address, r.state]);
    await assignAddresses(store, a, 'ny-1', '203.0.113.1', ctx);
    const v = await store.egress.version();
    await store.egress.register('ny-1', ['203.0.113.1', '203.0.113.2', '203.0.113.3'], nyc, prune);
    expect(await store.egress.version()).toBe(v); // nothing changed: no node reloads
    // An offer read off the interfaces (no prune): it only adds, whatever it leaves out.
    await store.egress.register('ny-1', ['203.0.113.1'], nyc);
    expect((await listed()).map(([addr]) => addr)).toEqual(['203.0.113.1', '203.0.113.2', '203.0.113.3']);
    expect(await store.egress.version()).toBe(v);
    // The pool shrunk, same location: the free address it no longer names goes (it stayed, free, and a
    // replacement could hand it out).
    await store.egress.register('ny-1', ['203.0.113.1', '203.0.113.2'], nyc, prune);
    expect(await listed()).toEqual([
      ['203.0.113.1', 'assigned'],
      ['203.0.113.2', 'free'],
    ]);
    const v2 = await store.egress.version();
    expect(v2).toBeGreaterThan(v);
    // The location refreshed, the holder kept.
    await store.egress.register('ny-1', ['203.0.113.1', '203.0.113.2', '203.0.113.4'], newark, prune);
    expect((await store.egress.list({ node: 'ny-1' })).find((r) => r.address === '203.0.113.1')).toMatchObject({
      accountId: a,
      city: 'newark',
      state: 'assigned',
    });
    // .1 held and .2 quarantined, neither named any more: kept for the holder and the quarantine (withdrawn).
    await assignAddresses(store, a, 'ny-1', '203.0.113.2', ctx);
    await releaseAddresses(store, '203.0.113.2', 30, ctx, now());
    await store.egress.register('ny-1', ['203.0.113.4'], newark, prune);
    expect(await listed()).toEqual([
      ['203.0.113.1', 'assigned'],
      ['203.0.113.2', 'quarantined'],
      ['203.0.113.4', 'free'],
    ]);
    // Released at once, .1 is never handed to anyone new: not assignable, not a replacement (b's goes to the
    // same country's other node, though .1 is lower).
    await releaseAddresses(store, '203.0.113.1', 0, ctx, now());
    await expect(assignAddresses(store, b, 'ny-1', '203.0.113.1', ctx)).rejects.toThrow(
      /203\.0\.113\.1 is not an egress address of node ny-1/,
    );
    await assignAddresses(store, b, 'ny-1', '203.0.113.4', ctx);
    expect(await replaceAddress(store, b, '203.0.113.4', opts(), ctx)).toEqual({
      ok: true,
      old: '203.0.113.4',
      new: '203.0.113.10',
    });
    // The next start finds .1 free: gone; .2 still in quarantine; .4 (named, quarantined by the replacement) stays.
    await store.egress.register('ny-1', ['203.0.113.4'], newark, prune);
    expect(await listed()).toEqual([
      ['203.0.113.2', 'quarantined'],
      ['203.0.113.4', 'quarantined'],
    ]);
  });

  it('a pool of 65,536 registers, again, and shrunk, within the store deadline (a search of the offer per row did not)', async () => {
    const { store } = await open(backend);
    const pool: string[] = [];
    for (let i = 0; i < 65536; i++) pool.push(`10.0.${i >> 8}.${i & 255}`);
    const loc = { country: 'us', city: null };
    await store.egress.register('big', pool, loc, { prune: true });
    await store.egress.register('big', pool, loc, { prune: true });
    await store.egress.register('big', pool.slice(0, 1000), loc, { prune: true });
    expect(await store.egress.list({ node: 'big' })).toHaveLength(1000);
  });

  it('DedicatedError is what the edges turn into their own errors', () => {
    expect(new DedicatedError('x')).toBeInstanceOf(Error);
  });
});

describe.each(BACKENDS)('replacements racing on %s', (backend) => {
  it('eight accounts replacing at once while eight addresses are free: each gets its own, none 10503', async () => {
    const dataDir = await dataDirFor(backend);
    const store = await openStore({ dataDir, databaseUrl: databaseUrlOf(dataDir) });
    stores.push(store);
    const held = Array.from({ length: 8 }, (_, i) => `192.0.2.${i + 1}`);
    const free = Array.from({ length: 8 }, (_, i) => `192.0.2.${i + 101}`);
    await store.egress.register('r-1', [...held, ...free], { country: 'nl', city: null });
    const ids: number[] = [];
    for (let i = 0; i < 8; i++) {
      const a = await store.accounts.create(`race-${i}-${backend}-${Math.random()}@example.com`, 'x', true);
      if (a === 'exists') throw new Error('exists');
      ids.push(a.id);
      await assignAddresses(store, a.id, 'r-1', held[i]!, ctx);
    }
    const out = await Promise.all(ids.map((id, i) => replaceAddress(store, id, held[i]!, opts(), ctx)));
    expect(out.every((r) => r.ok)).toBe(true);
    expect(new Set(out.map((r) => (r as { new: string }).new))).toEqual(new Set(free));
  });
});

describe.each(BACKENDS)('assignments racing on %s', (backend) => {
  it('two accounts assigned one address at once: exactly one holds it, the other is told it is held', async () => {
    const { store, a, b } = await open(backend);
    for (let round = 0; round < 5; round++) {
      const address = `203.0.113.${round + 1}`;
      if (round > 0) await store.egress.register('ny-1', [address], { country: 'us', city: 'nyc' });
      const out = await Promise.allSettled([
        assignAddresses(store, a, 'ny-1', address, ctx),
        assignAddresses(store, b, 'ny-1', address, ctx),
      ]);
      expect(out.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      const lost = out.find((r) => r.status === 'rejected') as PromiseRejectedResult;
      expect(String(lost.reason)).toMatch(new RegExp(`${address.replace(/\./g, '\\.')} is held by another account`));
      const rows = (await store.egress.list({ node: 'ny-1' })).filter((r) => r.address === address);
      expect(rows).toHaveLength(1);
      expect([a, b]).toContain(rows[0]!.accountId);
    }
  });
});
