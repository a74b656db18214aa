// An IPv6 egress prefix: random addresses inside it (never the all-zero host part), sessions that keep one
// address for MIN minutes from their first connection (fake clock), and the prefix dialer's choice.
import ipaddr from 'ipaddr.js';
import { describe, expect, it } from 'vitest';
import { DirectDialer, PrefixDialer, type DialOutcome, type DialRequest } from '../../../src/gateway/dial/dialer.js';
import { EgressPrefix } from '../../../src/gateway/dial/egress-prefix.js';
import { AddressSessionTable } from '../../../src/gateway/dial/sticky-sessions.js';

const MIN = 60_000;
const prefix = (s: string) => EgressPrefix.parse(s) as EgressPrefix;

describe('egress prefix', () => {
  it.each([
    '2001:db8:1::/64',
    '2001:db8::/48',
    '2001:db8:1:2:3:4:5:0/112',
    '2001:db8:1:2:3:4:5:0/100',
    'fd7a:5c1e:ab00:1::/63',
  ])('random addresses of %s are inside it, distinct and never the all-zero host', (text) => {
    const p = prefix(text);
    const [net, bits] = ipaddr.IPv6.parseCIDR(text);
    const seen = new Set<string>();
    for (let i = 0; i < 2000; i++) {
      const a = p.randomAddress();
      const parsed = ipaddr.IPv6.parse(a);
      expect(parsed.match(net, bits), a).toBe(true);
      expect(p.contains(a)).toBe(true);
      expect(parsed.toRFC5952String()).toBe(a); // the form sockets report
      expect(a).not.toBe(net.toRFC5952String());
      seen.add(a);
    }
    expect(seen.size).toBeGreaterThan(1900); // /112 has 65,535 addresses: a few repeats at most
  });

  it('spreads over every host bit (a /112 uses its whole range)', () => {
    const p = prefix('2001:db8::/112');
    const last = new Set<number>();
    let high = 0;
    for (let i = 0; i < 5000; i++) {
      const parts = ipaddr.IPv6.parse(p.randomAddress()).parts;
      expect(parts.slice(0, 7)).toEqual([0x2001, 0xdb8, 0, 0, 0, 0, 0]);
      last.add(parts[7]! & 0xff);
      if (parts[7]! >= 0x8000) high++;
    }
    expect(last.size).toBeGreaterThan(250);
    expect(high).toBeGreaterThan(2000);
    expect(high).toBeLessThan(3000);
  });

  it('knows what is inside', () => {
    const p = prefix('2001:db8:1::/64');
    expect(p.contains('2001:db8:1::1')).toBe(true);
    expect(p.contains('2001:db8:1:0:ffff:ffff:ffff:ffff')).toBe(true);
    expect(p.contains('2001:db8:1:1::1')).toBe(false);
    expect(p.contains('127.0.0.1')).toBe(false);
  });
});

describe('sessions over a prefix', () => {
  function clock(start = 1_700_000_000_000) {
    const c = { t: start, now: () => c.t };
    return c;
  }

  it('a session keeps one address for MIN minutes from its first connection, then gets a new one', () => {
    const c = clock();
    const p = prefix('2001:db8:1::/64');
    const t = new AddressSessionTable(() => p.randomAddress(), { now: c.now });
    const a = t.assign('1:alice:s', 2);
    expect(p.contains(a.address)).toBe(true);
    expect(a.expiresAt).toBe(c.t + 2 * MIN);
    c.t += 2 * MIN - 1;
    for (let i = 0; i < 20; i++) expect(t.assign('1:alice:s', 2)).toBe(a); // use does not extend it
    expect(t.assign('1:alice:other', 2).address).not.toBe(a.address);
    c.t += 1;
    expect(t.get('1:alice:s')).toBeUndefined();
    const b = t.assign('1:alice:s', 2);
    expect(b.address).not.toBe(a.address);
    expect(b.expiresAt).toBe(c.t + 2 * MIN);
  });

  it('sweeps ended sessions and caps the table', () => {
    const c = clock();
    let n = 0;
    const t = new AddressSessionTable(() => `2001:db8::${(++n).toString(16)}`, { now: c.now, maxSessions: 100 });
    for (let i = 0; i < 100; i++) t.assign(`k${i}`, 1);
    t.assign('over', 5);
    expect(t.liveSessions).toBe(100);
    expect(t.get('k0')).toBeUndefined();
    c.t += 2 * MIN;
    t.assign('tick', 5);
    expect(t.liveSessions).toBe(2);
  });

  it('records what the primary decided (a worker cache)', () => {
    const c = clock();
    const t = new AddressSessionTable(() => '2001:db8::bad', { now: c.now });
    t.remember('k', { address: '2001:db8::7', expiresAt: c.t + MIN });
    expect(t.assign('k', 10).address).toBe('2001:db8::7');
    c.t += MIN;
    expect(t.get('k')).toBeUndefined();
  });
});

describe('prefix dialer', () => {
  /** Records where each dial would leave from and what it counts under (no socket). */
  class Recorder extends DirectDialer {
    calls: Array<{ from: string | undefined; countAs: string | undefined }> = [];
    constructor() {
      super({
        family: 6,
        allowPrivateTargets: true,
        ownListeners: () => [],
        connectTimeoutMs: 1000,
        countRefusal: () => {},
        countEgress: () => {},
      });
    }
    override async dialFrom(_req: DialRequest, from: string | undefined, countAs?: string): Promise<DialOutcome> {
      this.calls.push({ from, countAs });
      return { ok: false, failure: 'refused' };
    }
  }
  const req = (session: DialRequest['session'], wanted = true): DialRequest => ({
    host: '::1',
    port: 9,
    session,
    stillWanted: () => wanted,
    connecting: () => {},
  });

  it('a fresh address per connection, one per session, counted under the prefix', async () => {
    const p = prefix('fd7a:5c1e:ab00:1::/64');
    const base = new Recorder();
    const d = new PrefixDialer(base, p, new AddressSessionTable(() => p.randomAddress()));
    for (let i = 0; i < 10; i++) await d.dial(req(null));
    for (let i = 0; i < 10; i++) await d.dial(req({ key: '1:u:s', minutes: 10 }));
    const rotating = base.calls.slice(0, 10).map((c) => c.from!);
    const sticky = base.calls.slice(10).map((c) => c.from!);
    expect(new Set(rotating).size).toBe(10);
    expect(new Set(sticky).size).toBe(1);
    for (const a of [...rotating, ...sticky]) expect(p.contains(a)).toBe(true);
    expect(new Set(base.calls.map((c) => c.countAs))).toEqual(new Set(['fd7a:5c1e:ab00:1::/64']));
  });

  it('waits for a session held elsewhere (a worker asking the primary) and abandons a dial no longer wanted', async () => {
    const base = new Recorder();
    const d = new PrefixDialer(base, prefix('2001:db8::/64'), {
      assign: async () => ({ address: '2001:db8::42', expiresAt: Date.now() + MIN }),
    });
    await d.dial(req({ key: 'k', minutes: 1 }));
    expect(base.calls.at(-1)?.from).toBe('2001:db8::42');
    expect(await d.dial(req({ key: 'k', minutes: 1 }, false))).toBeNull();
    expect(base.calls).toHaveLength(1);
  });
});
