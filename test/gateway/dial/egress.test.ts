// Sticky sessions over an egress pool, on a fake clock: least-used assignment, expiry after MIN minutes,
// bounded memory, and the pool dialer's rotation.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DirectDialer, PoolDialer, type DialRequest } from '../../../src/gateway/dial/dialer.js';
import { SessionTable } from '../../../src/gateway/dial/sticky-sessions.js';

const MIN = 60_000;

function clock(start = 1_700_000_000_000) {
  const c = { t: start, now: () => c.t };
  return c;
}

describe('session table', () => {
  it('keeps a session on one index and gives each new session a free one while any is free', () => {
    const c = clock();
    const t = new SessionTable(8, { now: c.now });
    const first = t.assign('1:alice:a', 10).index;
    for (let i = 0; i < 50; i++) expect(t.assign('1:alice:a', 10).index).toBe(first);
    const seen = new Set([first]);
    for (let s = 1; s < 8; s++) seen.add(t.assign(`1:alice:s${s}`, 10).index);
    expect(seen.size).toBe(8); // eight sessions, eight addresses
    // A ninth shares with one of the least-used; loads never differ by more than one.
    t.assign('1:alice:s9', 10);
    expect(t.liveSessions).toBe(9);
  });

  it('a session ends MIN minutes after its first connection, not its last', () => {
    const c = clock();
    const t = new SessionTable(4, { now: c.now });
    const a = t.assign('k', 2);
    expect(a.expiresAt).toBe(c.t + 2 * MIN);
    c.t += 2 * MIN - 1;
    expect(t.assign('k', 2)).toBe(a); // still the same, and using it does not extend it
    c.t += 1;
    expect(t.get('k')).toBeUndefined();
    const again = t.assign('k', 2);
    expect(again.expiresAt).toBe(c.t + 2 * MIN);
  });

  it('an expired session frees its address for the next new session', () => {
    const c = clock();
    const t = new SessionTable(2, { now: c.now });
    const a = t.assign('short', 1).index;
    const b = t.assign('long', 30).index;
    expect(a).not.toBe(b);
    c.t += MIN + 1;
    expect(t.assign('new', 30).index).toBe(a); // short's address is free again; long's is not
  });

  it('sweeps ended sessions (memory follows the live count) and caps the table', () => {
    const c = clock();
    const t = new SessionTable(16, { now: c.now, maxSessions: 1000 });
    for (let i = 0; i < 1000; i++) t.assign(`k${i}`, 1 + (i % 3));
    expect(t.liveSessions).toBe(1000);
    t.assign('over', 5); // the cap drops the oldest
    expect(t.liveSessions).toBe(1000);
    expect(t.get('k0')).toBeUndefined();
    c.t += 3 * MIN; // the sweep frees whole minutes passed (a lookup refuses an ended session at once)
    t.assign('tick', 5);
    expect(t.liveSessions).toBeLessThanOrEqual(1000 / 3 + 3);
    c.t += 10 * 24 * 60 * MIN; // a clock jump of days: every session ended
    t.assign('later', 5);
    expect(t.liveSessions).toBe(1);
  });

  it('records assignments made elsewhere (a worker caching the primary)', () => {
    const c = clock();
    const t = new SessionTable(4, { now: c.now });
    t.remember('k', { index: 3, expiresAt: c.t + MIN });
    expect(t.assign('k', 10).index).toBe(3);
    c.t += MIN;
    expect(t.get('k')).toBeUndefined();
  });
});

describe('pool dialer', () => {
  let target: net.Server;
  let port = 0;
  beforeAll(async () => {
    target = net.createServer((s) => {
      s.on('error', () => {});
      s.end(`${s.remoteAddress}\n`);
    });
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
    port = (target.address() as net.AddressInfo).port;
  });
  afterAll(() => new Promise<void>((r) => target.close(() => r())));

  const pool = ['127.0.0.2', '127.0.0.3', '127.0.0.4'];
  const counted: Record<string, number> = {};
  const direct = new DirectDialer({
    family: 4,
    allowPrivateTargets: true,
    ownListeners: () => [],
    connectTimeoutMs: 5000,
    countRefusal: () => {},
    countEgress: (a) => (counted[a] = (counted[a] ?? 0) + 1),
  });
  const req = (session: DialRequest['session']): DialRequest => ({
    host: '127.0.0.1',
    port,
    session,
    stillWanted: () => true,
    connecting: () => {},
  });

  it('rotates without a session and sticks with one', async () => {
    const dialer = new PoolDialer(direct, pool, new SessionTable(pool.length));
    const from: string[] = [];
    for (let i = 0; i < 6; i++) {
      const out = await dialer.dial(req(null));
      if (!out?.ok) throw new Error('dial failed');
      from.push(out.socket.localAddress!);
      out.socket.destroy();
    }
    expect(from).toEqual([...pool, ...pool]);
    const sticky = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const out = await dialer.dial(req({ key: '1:u:s', minutes: 10 }));
      if (!out?.ok) throw new Error('dial failed');
      sticky.add(out.socket.localAddress!);
      out.socket.destroy();
    }
    expect(sticky.size).toBe(1);
    expect(Object.values(counted).reduce((a, b) => a + b, 0)).toBe(11);
  });

  it('abandons the dial when the client went away', async () => {
    const dialer = new PoolDialer(direct, pool, new SessionTable(pool.length));
    expect(await dialer.dial({ ...req(null), stillWanted: () => false })).toBeNull();
  });
});

describe('a worker cache of the primary', () => {
  it('frees remembered sessions once they end (no assignment of its own needed)', () => {
    const c = clock();
    const t = new SessionTable(4, { now: c.now });
    for (let i = 0; i < 100; i++) t.remember(`k${i}`, { index: i % 4, expiresAt: c.t + MIN });
    c.t += 3 * MIN;
    t.remember('fresh', { index: 0, expiresAt: c.t + MIN });
    expect(t.liveSessions).toBe(1);
  });
});
