// Target rules: the list syntax (canonical items, every bad item named), the matcher (domain patterns, CIDRs in
// any spelling, allow lists, the service before the account), and each rule kind on each protocol through a
// gateway: CONNECT, forward, SOCKS5 by name and by address, with the answer, the record's reason, and no dial.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  judgeTarget,
  parseRuleList,
  TargetRuleSet,
  type TargetRuleSets,
} from '../../../src/gateway/dial/target-rules.js';
import type { ConnectionRecord, TargetRules } from '../../../src/gateway/types.js';
import { RawClient, basic, startTcpEcho, startTestGateway, type TestGateway } from '../helpers.js';
import { waitFor } from '../../helpers/wait.js';
import { patient } from '../../helpers/patience.js';

const set = (deny: string, allow = 'none'): TargetRuleSet => {
  const d = parseRuleList(deny);
  const a = parseRuleList(allow);
  if (!d.ok || !a.ok) throw new Error('bad test list');
  return new TargetRuleSet(d.items, a.items);
};
const verdict = (sets: TargetRuleSets, host: string) => {
  const j = judgeTarget(sets, host);
  return j === null ? 'ok' : 'denied' in j ? j.denied : 'screen';
};

describe('target rule lists', () => {
  it('canonical items: lower-case, no trailing dot, networks, IPv4-mapped networks as IPv4, duplicates once', () => {
    expect(
      parseRuleList(' Example.COM. ,*.Bad.org,10.0.0.0/8,2001:DB8::/32,::ffff:192.168.0.0/112,192.0.2.7,example.com'),
    ).toEqual({
      ok: true,
      items: ['example.com', '*.bad.org', '10.0.0.0/8', '2001:db8::/32', '192.168.0.0/16', '192.0.2.7/32'],
    });
    expect(parseRuleList('none')).toEqual({ ok: true, items: [] });
  });

  it('every bad item is named with why', () => {
    const r = parseRuleList('ok.com,exa mple.com,10.0.0.1/8,a.*.com,10.0.0.0/33,1.2.3,bücher.de,,10.0.0.0/x');
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.problems.map((p) => p.item)).toEqual([
      'exa mple.com',
      '10.0.0.1/8',
      'a.*.com',
      '10.0.0.0/33',
      '1.2.3',
      'bücher.de',
      '',
      '10.0.0.0/x',
    ]);
    expect(r.problems[1]!.problem).toBe('host bits set (the network is 10.0.0.0/8)');
    expect(r.problems[5]!.problem).toContain('punycode');
    expect(parseRuleList('').ok).toBe(false);
  });
});

describe('hostile lists and targets', () => {
  it('random input never throws; an accepted item is its own canonical form; a check never throws', () => {
    const alphabet = 'aZ09.-_*/:,[] \u00fc\u0000ff';
    let seed = 42;
    const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    const sets: TargetRuleSets = {
      service: set('*.x.example,10.0.0.0/8'),
      account: set('y.example,::ffff:0:0/96', 'z.example,2001:db8::/32'),
    };
    for (let i = 0; i < 5_000; i++) {
      const text = Array.from({ length: rnd(40) }, () => alphabet[rnd(alphabet.length)]).join('');
      const r = parseRuleList(text);
      if (r.ok) for (const item of r.items) expect(parseRuleList(item)).toEqual({ ok: true, items: [item] });
      expect(() => judgeTarget(sets, text)).not.toThrow();
    }
  });
});

describe('the matcher', () => {
  it('example.com: it and its subdomains; *.example.com: subdomains only; names case-insensitive without a trailing dot', () => {
    const s: TargetRuleSets = { service: null, account: set('example.com,*.sub.org') };
    expect(verdict(s, 'example.com')).toBe('target_denied');
    expect(verdict(s, 'WWW.Example.Com.')).toBe('target_denied');
    expect(verdict(s, 'notexample.com')).toBe('ok');
    expect(verdict(s, 'example.com.evil.net')).toBe('ok');
    expect(verdict(s, 'sub.org')).toBe('ok');
    expect(verdict(s, 'a.b.sub.org')).toBe('target_denied');
  });

  it('IP literals in any spelling by CIDRs; a name under a deny CIDR is screened at its addresses', () => {
    const s: TargetRuleSets = { service: null, account: set('10.0.0.0/8,2001:db8::/32') };
    for (const host of ['10.1.2.3', '::ffff:10.1.2.3', '::ffff:a01:203', '[::ffff:10.1.2.3]', '2001:DB8:0:0::1'])
      expect(verdict(s, host)).toBe('target_denied');
    expect(verdict(s, '11.1.2.3')).toBe('ok');
    const screen = judgeTarget(s, 'anything.example');
    expect(
      screen && 'check' in screen
        ? [screen.check('10.9.9.9'), screen.check('8.8.8.8'), screen.check('::ffff:10.0.0.1')]
        : null,
    ).toEqual(['target_denied', null, 'target_denied']);
  });

  it('an allow list refuses what it does not match; a name may still match by the address it resolves to', () => {
    const names: TargetRuleSets = { service: null, account: set('none', 'good.com') };
    expect(verdict(names, 'api.good.com')).toBe('ok');
    expect(verdict(names, 'other.com')).toBe('target_denied');
    expect(verdict(names, '1.2.3.4')).toBe('target_denied');
    const nets: TargetRuleSets = { service: null, account: set('none', 'good.com,192.0.2.0/24') };
    expect(verdict(nets, '192.0.2.9')).toBe('ok');
    const screen = judgeTarget(nets, 'other.com');
    expect(screen && 'check' in screen ? [screen.check('192.0.2.1'), screen.check('198.51.100.1')] : null).toEqual([
      null,
      'target_denied',
    ]);
  });

  it('the service is checked first; deny beats allow within an account', () => {
    const s: TargetRuleSets = { service: set('evil.com'), account: set('evil.com,bad.com', 'evil.com,bad.com,x.com') };
    expect(verdict(s, 'www.evil.com')).toBe('target_denied_service');
    expect(verdict(s, 'bad.com')).toBe('target_denied');
    expect(verdict(s, 'x.com')).toBe('ok');
  });

  it('stays cheap with 10,000 rules of each kind', () => {
    const names = Array.from({ length: 10_000 }, (_, i) => `host${i}.example${i % 97}.com`).join(',');
    const nets = Array.from({ length: 10_000 }, (_, i) => `10.${(i >> 8) & 255}.${i & 255}.0/24`).join(',');
    const s: TargetRuleSets = { service: null, account: set(`${names},${nets}`) };
    const t0 = performance.now();
    for (let i = 0; i < 20_000; i++)
      verdict(s, i % 2 ? `www.host${i % 10_000}.example${i % 97}.com` : `10.${(i >> 8) & 39}.${i & 255}.9`);
    expect(performance.now() - t0).toBeLessThan(patient(1_000)); // ~µs each; a loop over 20,000 regexes would take seconds
  });
});

describe('target rules at the gateway', () => {
  let echo: Awaited<ReturnType<typeof startTcpEcho>>;
  let t: TestGateway;
  const records: ConnectionRecord[] = [];
  const lookups: string[] = [];
  const rules = new Map<number, TargetRuleSet>();
  let service: TargetRuleSet | null = null;
  const targetRules: TargetRules = { forAccount: (id) => ({ service, account: rules.get(id) ?? null }) };

  beforeAll(async () => {
    echo = await startTcpEcho();
    t = await startTestGateway({
      targetRules,
      connectionLog: { record: (r) => records.push(r) },
      // Every name resolves to the echo target's address (the rules decide, not the network).
      lookup: async (host) => {
        lookups.push(host);
        return [{ address: '127.0.0.1', family: 4 }];
      },
    });
    t.admission.users.set('bob', { password: 'pw-bob-1', accountId: 2 });
  });
  afterAll(async () => {
    await t.gw.close(100);
    echo.server.close();
  });

  async function recordOf(id: string | null, before: number): Promise<ConnectionRecord> {
    await waitFor('record', () => records.length > before);
    return id ? records.find((r) => r.requestId === id)! : records[records.length - 1]!;
  }

  async function connect(
    host: string,
    user = 'alice',
    pass = 's3cret:pw',
  ): Promise<{ head: string; reason: string | null }> {
    const before = records.length;
    const c = await RawClient.connect(t.httpPort);
    c.write(`CONNECT ${host}:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${basic(user, pass)}\r\n\r\n`);
    const head = await c.readUntil('\r\n\r\n');
    c.socket.destroy();
    const id = /X-Request-Id: ([^\r]+)/.exec(head)![1]!;
    return { head, reason: (await recordOf(id, before)).reason };
  }

  async function forward(host: string): Promise<{ head: string; reason: string | null }> {
    const before = records.length;
    const c = await RawClient.connect(t.httpPort);
    c.write(
      `GET http://${host}:${echo.port}/ HTTP/1.1\r\nHost: ${host}\r\nProxy-Authorization: ${basic('alice', 's3cret:pw')}\r\n\r\n`,
    );
    const head = await c.readUntil('\r\n\r\n');
    c.socket.destroy();
    const id = /X-Request-Id: ([^\r]+)/.exec(head)![1]!;
    return { head, reason: (await recordOf(id, before)).reason };
  }

  async function socks(address: Buffer): Promise<{ reply: number; reason: string | null }> {
    const before = records.length;
    const c = await RawClient.connect(t.socksPort);
    const u = Buffer.from('alice');
    const p = Buffer.from('s3cret:pw');
    c.write(Buffer.concat([Buffer.from([5, 1, 2, 1, u.length]), u, Buffer.from([p.length]), p]));
    await c.read(4);
    c.write(Buffer.concat([Buffer.from([5, 1, 0]), address, Buffer.from([echo.port >> 8, echo.port & 0xff])]));
    const reply = (await c.read(10))[1]!;
    c.socket.destroy();
    return { reply, reason: (await recordOf(null, before)).reason };
  }
  const socksName = (h: string) => Buffer.concat([Buffer.from([3, h.length]), Buffer.from(h)]);
  const socksV4 = (h: string) => Buffer.from([1, ...h.split('.').map(Number)]);
  const socksV6 = (h: string) =>
    Buffer.from([4, ...Buffer.from(h.split(':').flatMap((g) => [parseInt(g, 16) >> 8, parseInt(g, 16) & 255]))]);

  const DENIED_ACCOUNT = 'Proxy-Status: proxyd; error=http_request_denied; details="target denied by account policy"';
  const DENIED_SERVICE = 'Proxy-Status: proxyd; error=http_request_denied; details="target denied by service policy"';

  it('a denied domain: CONNECT and forward 403 with the account text, SOCKS5 by name 0x02; logged target_denied; never resolved or dialled', async () => {
    rules.set(1, set('blocked.example'));
    const accepted = echo.peers.length;
    lookups.length = 0;
    for (const r of [await connect('www.BLOCKED.example.'), await forward('blocked.example')]) {
      expect(r.head).toMatch(/^HTTP\/1\.1 403 /);
      expect(r.head).toContain(DENIED_ACCOUNT);
      expect(r.reason).toBe('target_denied');
    }
    expect(await socks(socksName('sub.blocked.example'))).toEqual({ reply: 2, reason: 'target_denied' });
    expect(lookups).toEqual([]);
    expect(echo.peers.length).toBe(accepted);
    // Not a subdomain: reaches the target.
    expect((await connect('notblocked.example')).head).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('a denied CIDR: literals in any spelling (IPv4, IPv4-mapped IPv6, an address sent as a SOCKS5 name) and a name resolving into it', async () => {
    rules.set(1, set('127.0.0.0/8'));
    const accepted = echo.peers.length;
    expect((await connect('127.0.0.1')).reason).toBe('target_denied');
    expect((await connect('[::ffff:127.0.0.1]')).head).toContain(DENIED_ACCOUNT);
    expect((await forward('127.0.0.1')).reason).toBe('target_denied');
    expect(await socks(socksV4('127.0.0.1'))).toEqual({ reply: 2, reason: 'target_denied' });
    expect(await socks(socksV6('0:0:0:0:0:ffff:7f00:1'))).toEqual({ reply: 2, reason: 'target_denied' });
    expect(await socks(socksName('127.0.0.1'))).toEqual({ reply: 2, reason: 'target_denied' });
    // A name whose address is in the network: refused after resolving, before any dial.
    const byName = await connect('resolves-into-it.example');
    expect(byName.head).toContain(DENIED_ACCOUNT);
    expect(await socks(socksName('also-into-it.example'))).toEqual({ reply: 2, reason: 'target_denied' });
    expect(echo.peers.length).toBe(accepted);
  });

  it('an allow list: what it names passes, anything else is refused', async () => {
    rules.set(1, set('none', 'good.example'));
    expect((await connect('api.good.example')).head).toMatch(/^HTTP\/1\.1 200 /);
    expect((await connect('other.example')).reason).toBe('target_denied');
    expect((await forward('127.0.0.1')).reason).toBe('target_denied');
    expect(await socks(socksV4('127.0.0.1'))).toEqual({ reply: 2, reason: 'target_denied' });
    // An allowed network admits a name that resolves into it.
    rules.set(1, set('none', '127.0.0.0/8'));
    expect((await connect('anything.example')).head).toMatch(/^HTTP\/1\.1 200 /);
    expect(await socks(socksName('anything.example'))).toEqual({ reply: 0, reason: null });
  });

  it("the service rules beat the account's (target_denied_service); another account is unaffected by an account's rules", async () => {
    rules.set(1, set('evil.example'));
    service = set('evil.example,127.0.0.2/32');
    try {
      const r = await connect('evil.example');
      expect(r.head).toContain(DENIED_SERVICE);
      expect(r.reason).toBe('target_denied_service');
      expect(await socks(socksV4('127.0.0.2'))).toEqual({ reply: 2, reason: 'target_denied_service' });
      // bob (account 2): the account's rule does not reach him, the service's does.
      expect((await connect('www.evil.example', 'bob', 'pw-bob-1')).reason).toBe('target_denied_service');
      rules.set(1, set('blocked.example'));
      expect((await connect('blocked.example', 'bob', 'pw-bob-1')).head).toMatch(/^HTTP\/1\.1 200 /);
    } finally {
      service = null;
    }
  });
});
