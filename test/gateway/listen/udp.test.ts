// SOCKS5 UDP ASSOCIATE with a raw RFC 1928 client against the in-process gateway: an echo round trip with the
// right header, metered to the payload bytes and recorded once at the end (socks5-udp, datagram counts); a
// datagram from another source, one with FRAG, one to a private target (with private targets refused) and one
// from a target never sent to are dropped and counted; the association ends with its control connection and
// after its idle time; the port range exhausted and the association cap answer 0x01; a session's datagrams
// leave from its egress address; an entry without a way to an exit answers 0x07 (test/e2e/exits.test.ts: through one).
import dgram from 'node:dgram';
import { domainToASCII } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import type { ConnectionRecord } from '../../../src/gateway/types.js';
import { TargetRuleSet } from '../../../src/gateway/dial/target-rules.js';
import { RateBucket } from '../../../src/gateway/relay/rate-budget.js';
import { RawClient, startTestGateway, type TestGateway } from '../helpers.js';
import { sleep, waitFor } from '../../helpers/wait.js';
import { RELAY_PORTS, udpTargetSocket } from '../../helpers/net.js';
import { holdUdpPort, isOwnUdpSocket, releaseUdpPort } from '../../../src/gateway/dial/udp-out.js';
import { patient } from '../../helpers/patience.js';

const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/** A UDP echo on `host`: answers every datagram with itself; counts what it got and from where. */
async function udpEcho(
  host = '127.0.0.1',
): Promise<{ port: number; from: string[]; ports: number[]; socket: dgram.Socket }> {
  const socket = await udpTargetSocket(host);
  const from: string[] = [];
  const ports: number[] = [];
  socket.on('message', (m, r) => {
    from.push(r.address);
    ports.push(r.port);
    socket.send(m, r.port, r.address);
  });
  cleanup.push(() => socket.close());
  return { port: socket.address().port, from, ports, socket };
}

/** A UDP socket on 127.0.0.2: a source that is not the control connection's address. */
async function otherSource(): Promise<dgram.Socket> {
  const other = dgram.createSocket('udp4');
  await new Promise<void>((r) => other.bind(0, '127.0.0.2', r));
  cleanup.push(() => other.close());
  return other;
}

/** RFC 1928 datagram header to an IPv4 target (FRAG `frag`), then `data`. */
function datagram(host: string, port: number, data: Buffer, frag = 0): Buffer {
  return Buffer.concat([Buffer.from([0, 0, frag, 1, ...host.split('.').map(Number), port >> 8, port & 255]), data]);
}

/** SOCKS5 handshake with credentials, then UDP ASSOCIATE naming `dst` (default 0.0.0.0:0): the control connection and the relay. */
async function associate(
  g: TestGateway,
  dst: { host: string; port: number } = { host: '0.0.0.0', port: 0 },
  user = 'alice',
  pass = 's3cret:pw',
) {
  const c = await RawClient.connect(g.socksPort);
  cleanup.push(() => c.socket.destroy());
  c.write(Buffer.from([5, 1, 2]));
  expect([...(await c.read(2))]).toEqual([5, 2]);
  c.write(
    Buffer.concat([Buffer.from([1, user.length]), Buffer.from(user), Buffer.from([pass.length]), Buffer.from(pass)]),
  );
  expect([...(await c.read(2))]).toEqual([1, 0]);
  c.write(Buffer.from([5, 3, 0, 1, ...dst.host.split('.').map(Number), dst.port >> 8, dst.port & 255]));
  const rep = await c.read(10);
  return { control: c, reply: rep[1]!, relay: { host: rep.subarray(4, 8).join('.'), port: rep.readUInt16BE(8) } };
}

/** A client UDP socket; `ask` sends one datagram to the relay and waits for one answer (or null). */
async function client(relay: { host: string; port: number }) {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', r));
  cleanup.push(() => s.close());
  const inbox: Buffer[] = [];
  s.on('message', (m) => inbox.push(m));
  return {
    socket: s,
    inbox,
    send: (b: Buffer) => s.send(b, relay.port, relay.host),
    ask: async (b: Buffer, ms = 2_000): Promise<Buffer | null> => {
      const n = inbox.length;
      s.send(b, relay.port, relay.host);
      const t0 = Date.now();
      while (inbox.length === n && Date.now() - t0 < ms) await sleep(5);
      return inbox[n] ?? null;
    },
  };
}

describe('SOCKS5 UDP ASSOCIATE', () => {
  it('an echo round trip: the answer carries the header naming its sender; metered to the payload; one record at the end', async () => {
    const records: ConnectionRecord[] = [];
    const g = await startTestGateway({ connectionLog: { record: (r) => records.push(r) } });
    cleanup.push(() => g.gw.close(0));
    const echo = await udpEcho();
    const a = await associate(g);
    expect(a.reply).toBe(0);
    expect(a.relay.host).toBe('127.0.0.1');
    expect(a.relay.port).toBeGreaterThanOrEqual(40000);
    const c = await client(a.relay);
    const payloads = [Buffer.from('hello over udp'), Buffer.alloc(1200, 7), Buffer.from('x')];
    for (const p of payloads) {
      const answer = await c.ask(datagram('127.0.0.1', echo.port, p));
      expect(answer).not.toBeNull();
      expect([...answer!.subarray(0, 4)]).toEqual([0, 0, 0, 1]);
      expect(answer!.subarray(4, 8).join('.')).toBe('127.0.0.1');
      expect(answer!.readUInt16BE(8)).toBe(echo.port);
      expect(answer!.subarray(10).equals(p)).toBe(true);
    }
    const total = payloads.reduce((n, p) => n + p.length, 0);
    // Live, while the association is open: payload bytes only, no header.
    expect(g.usage.of(1)).toMatchObject({ up: total, down: total });
    expect(g.gw.stats().udp).toMatchObject({
      associationsOpen: 1,
      datagramsUp: 3,
      datagramsDown: 3,
      bytesUp: total,
      bytesDown: total,
    });
    expect(records).toEqual([]);
    a.control.socket.end();
    await waitFor('the record', () => (records.length > 0 ? records : undefined), 3_000);
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({
      protocol: 'socks5-udp',
      username: 'alice',
      accountId: 1,
      reason: null,
      bytesUp: total,
      bytesDown: total,
      datagramsUp: 3,
      datagramsDown: 3,
      target: null,
    });
    await waitFor('closed', () => (g.gw.stats().udp.associationsOpen === 0 ? true : undefined), 2_000);
    // The relay port is released: nothing answers there any more.
    expect(await c.ask(datagram('127.0.0.1', echo.port, Buffer.from('late')), 300)).toBeNull();
  });

  it('drops and counts: another source, FRAG, a private target', async () => {
    const g = await startTestGateway({
      allowPrivateTargets: false,
      lookup: async () => [{ address: '127.0.0.1', family: 4 }],
    });
    cleanup.push(() => g.gw.close(0));
    const echo = await udpEcho();
    const a = await associate(g);
    const c = await client(a.relay);
    // Private targets are refused on this gateway: a loopback echo is never reached.
    expect(await c.ask(datagram('127.0.0.1', echo.port, Buffer.from('private')), 300)).toBeNull();
    expect(echo.from).toEqual([]);
    // FRAG ≠ 0: dropped (fragmentation is not supported).
    c.send(datagram('127.0.0.1', echo.port, Buffer.from('frag'), 1));
    // From another source address (127.0.0.2 is not the control connection's).
    const other = await otherSource();
    other.send(datagram('127.0.0.1', echo.port, Buffer.from('spoof')), a.relay.port, a.relay.host);
    await sleep(200);
    expect(g.gw.stats().udp.dropped).toMatchObject({ policy: 1, frag: 1, source: 1 });
    expect(g.gw.stats().udp.datagramsUp).toBe(0);
  });

  it('after the same target and sender repeat (the fast path), another target, a FRAG and another source are still told apart', async () => {
    const g = await startTestGateway();
    cleanup.push(() => g.gw.close(0));
    const [one, two] = [await udpEcho(), await udpEcho()];
    const a = await associate(g);
    const c = await client(a.relay);
    for (const [echo, word] of [
      [one, 'a'],
      [one, 'b'],
      [two, 'c'],
      [one, 'd'],
      [two, 'e'],
      [two, 'f'],
    ] as const) {
      const answer = await c.ask(datagram('127.0.0.1', echo.port, Buffer.from(word)));
      expect(answer!.readUInt16BE(8), word).toBe(echo.port); // the header names the sender that answered
      expect(answer!.subarray(10).toString()).toBe(word);
    }
    expect([one.from.length, two.from.length]).toEqual([3, 3]);
    // The header of the last datagram with FRAG set: not the same bytes, so not taken for it.
    c.send(datagram('127.0.0.1', two.port, Buffer.from('frag'), 1));
    const other = await otherSource();
    other.send(datagram('127.0.0.1', two.port, Buffer.from('spoof')), a.relay.port, a.relay.host);
    await sleep(200);
    expect(g.gw.stats().udp.dropped).toMatchObject({ frag: 1, source: 1 });
    expect(two.from.length).toBe(3);
  });

  it('unsolicited answers are dropped; a request naming its client port accepts only that port', async () => {
    const g = await startTestGateway();
    cleanup.push(() => g.gw.close(0));
    const echo = await udpEcho();
    const c = await client({ host: '127.0.0.1', port: 1 }); // bound first: its port goes in the request
    const a = await associate(g, { host: '127.0.0.1', port: c.socket.address().port });
    const talk = await client(a.relay);
    // Another port of the same host is not the one the request named.
    talk.send(datagram('127.0.0.1', echo.port, Buffer.from('wrong port')));
    await sleep(150);
    expect(g.gw.stats().udp.dropped.source).toBe(1);
    c.socket.send(datagram('127.0.0.1', echo.port, Buffer.from('right port')), a.relay.port, a.relay.host);
    await waitFor('answer', () => (c.inbox.length > 0 ? true : undefined), 2_000);
    // A sender the association never sent to, at the association's egress port: dropped, not relayed.
    const stranger = dgram.createSocket('udp4');
    cleanup.push(() => stranger.close());
    stranger.send(Buffer.from('unsolicited'), echo.ports[0]!, '127.0.0.1');
    await waitFor('dropped', () => (g.gw.stats().udp.dropped.unsolicited === 1 ? true : undefined), 2_000);
    expect(c.inbox).toHaveLength(1);
  });

  it("the account's target rules hold for datagrams: a denied network and a denied name are dropped, others pass", async () => {
    const g = await startTestGateway({
      targetRules: {
        forAccount: (id) => ({
          service: null,
          account: id === 1 ? new TargetRuleSet(['127.0.0.3/32', 'blocked.example'], []) : null,
        }),
      },
      lookup: async () => [{ address: '127.0.0.1', family: 4 }],
    });
    cleanup.push(() => g.gw.close(0));
    const allowed = await udpEcho();
    const denied = await udpEcho('127.0.0.3');
    const a = await associate(g);
    const c = await client(a.relay);
    expect(await c.ask(datagram('127.0.0.3', denied.port, Buffer.from('to a denied network')), 300)).toBeNull();
    const byName = Buffer.concat([
      Buffer.from([0, 0, 0, 3, 15]),
      Buffer.from('blocked.example'),
      Buffer.from([allowed.port >> 8, allowed.port & 255]),
      Buffer.from('by name'),
    ]);
    expect(await c.ask(byName, 300)).toBeNull();
    expect(denied.from).toEqual([]);
    expect(allowed.from).toEqual([]);
    expect(g.gw.stats().udp.dropped.policy).toBe(2);
    expect(await c.ask(datagram('127.0.0.1', allowed.port, Buffer.from('fine')))).not.toBeNull();
  });

  it("the user's rate limit holds for datagrams each way: what the bucket has no room for is dropped", async () => {
    const rate = { up: new RateBucket(100_000), down: new RateBucket(100_000) };
    const g = await startTestGateway({
      plans: {
        refusal: () => null,
        pending: () => null,
        slotFree: () => true,
        moreSlots: async () => {},
        budgetFor: () => null,
        rateFor: () => rate,
      },
    });
    cleanup.push(() => g.gw.close(0));
    const echo = await udpEcho();
    let echoed = 0;
    echo.socket.on('message', (m) => (echoed += m.length));
    const a = await associate(g);
    const c = await client(a.relay);
    // 400 kB at once against 100 kB/s (one second of burst): about a quarter may pass, each way.
    for (let i = 0; i < 400; i++) {
      c.send(datagram('127.0.0.1', echo.port, Buffer.alloc(1_000, i)));
      if (i % 20 === 19) await sleep(1);
    }
    await sleep(300);
    const back = c.inbox.reduce((n, m) => n + m.length - 10, 0);
    expect(echoed).toBeGreaterThan(50_000);
    expect(echoed).toBeLessThan(130_000);
    expect(back).toBeLessThanOrEqual(echoed);
    expect(back).toBeLessThan(130_000);
    expect(g.gw.stats().udp.dropped.over_limit).toBeGreaterThan(0);
    // A datagram larger than a second of the rate still passes once the bucket has room again (and is paid back).
    rate.up.setRate(500);
    rate.down.setRate(500);
    await sleep(1_100);
    const big = await c.ask(datagram('127.0.0.1', echo.port, Buffer.alloc(1_200, 1)));
    expect(big?.length).toBe(1_210);
  });

  it('a rule saved while an association sends to its target holds for its datagrams within a second', async () => {
    let rules: TargetRuleSet | null = null;
    const g = await startTestGateway({ targetRules: { forAccount: () => ({ service: null, account: rules }) } });
    cleanup.push(() => g.gw.close(0));
    const echo = await udpEcho();
    const a = await associate(g);
    const c = await client(a.relay);
    expect(await c.ask(datagram('127.0.0.1', echo.port, Buffer.from('before')))).not.toBeNull();
    rules = new TargetRuleSet(['127.0.0.1/32'], []);
    await sleep(1_000);
    expect(await c.ask(datagram('127.0.0.1', echo.port, Buffer.from('after')), 300)).toBeNull();
    expect(g.gw.stats().udp.dropped.policy).toBe(1);
  });

  it('a datagram naming a target that is not a host name is dropped, not resolved past the domain rules', async () => {
    // The resolver maps a name to ASCII (IDNA) as DNS does: a soft hyphen vanishes, so "bloc\xadked.example" would be
    // looked up as blocked.example while the rules saw another name.
    const asked: string[] = [];
    const g = await startTestGateway({
      targetRules: {
        forAccount: (id) => ({ service: null, account: id === 1 ? new TargetRuleSet(['blocked.example'], []) : null }),
      },
      lookup: async (host) => {
        asked.push(host);
        if (domainToASCII(host) === 'blocked.example') return [{ address: '127.0.0.1', family: 4 }];
        throw Object.assign(new Error('no address'), { code: 'ENOTFOUND' });
      },
    });
    cleanup.push(() => g.gw.close(0));
    const echo = await udpEcho();
    const a = await associate(g);
    const c = await client(a.relay);
    const name = Buffer.from('bloc\xadked.example', 'latin1');
    const byName = Buffer.concat([
      Buffer.from([0, 0, 0, 3, name.length]),
      name,
      Buffer.from([echo.port >> 8, echo.port & 255]),
      Buffer.from('by name'),
    ]);
    expect(await c.ask(byName, 300)).toBeNull();
    expect(echo.from).toEqual([]);
    expect(asked).toEqual([]);
  });

  it("the gateway's own UDP sockets are never targets: its relay, another association's relay, another's egress socket", async () => {
    const g = await startTestGateway();
    cleanup.push(() => g.gw.close(0));
    const echo = await udpEcho();
    const a = await associate(g);
    const b = await associate(g);
    const c = await client(a.relay);
    // Its own relay, carrying a second header to the echo: relayed, it came back as the client's and went round
    // again, a header longer each time (a 34-byte datagram made 6,549 and billed 214 MB).
    const nested = datagram('127.0.0.1', echo.port, Buffer.from('ping'));
    expect(await c.ask(datagram('127.0.0.1', a.relay.port, nested), 300)).toBeNull();
    expect(await c.ask(datagram('127.0.0.1', b.relay.port, nested), 300)).toBeNull(); // another association's relay
    expect(g.gw.stats().udp.dropped.policy).toBe(2);
    // The echo learns association a's egress port; b may not send there either (nor to any local address of it).
    expect(await c.ask(datagram('127.0.0.1', echo.port, Buffer.from('fine')))).not.toBeNull();
    const egressPort = echo.ports[0]!;
    const cb = await client(b.relay);
    expect(await cb.ask(datagram('127.0.0.1', egressPort, Buffer.from('to a gateway socket')), 300)).toBeNull();
    expect(await cb.ask(datagram('0.0.0.0', egressPort, Buffer.from('to a gateway socket')), 300)).toBeNull();
    expect(g.gw.stats().udp.dropped.policy).toBe(4);
    expect(echo.from).toHaveLength(1);
    expect(g.gw.stats().udp).toMatchObject({ datagramsUp: 1, datagramsDown: 1 });
  });

  it("a relay port of the node's range on a local address is never a target (another worker's relay, unknown to this process)", async () => {
    const g = await startTestGateway({ udp: { ports: RELAY_PORTS, idleMs: 60_000, maxAssociations: 100 } });
    cleanup.push(() => g.gw.close(0));
    // Another process's socket in the range, standing for another worker's relay: with two workers one datagram
    // bounced between their relays until it was 64 KiB (6,549 datagrams, 214 MB billed).
    let otherRelay: dgram.Socket | null = null;
    for (let port = RELAY_PORTS.hi; otherRelay === null && port >= RELAY_PORTS.lo; port--) {
      const s = dgram.createSocket('udp4');
      const ok = await new Promise<boolean>((resolve) => {
        s.once('error', () => resolve(false));
        s.bind(port, '127.0.0.1', () => resolve(true));
      });
      if (ok) otherRelay = s;
      else s.close();
    }
    cleanup.push(() => otherRelay!.close());
    const got: Buffer[] = [];
    otherRelay!.on('message', (m) => got.push(m));
    const a = await associate(g);
    const c = await client(a.relay);
    const port = otherRelay!.address().port;
    expect(await c.ask(datagram('127.0.0.1', port, Buffer.from('to a relay')), 300)).toBeNull();
    expect(await c.ask(datagram('127.0.0.5', port, Buffer.from('any loopback address')), 300)).toBeNull();
    expect(got).toEqual([]);
    expect(g.gw.stats().udp.dropped.policy).toBe(2);
    // A port outside the range on the same address is an ordinary target.
    const echo = await udpEcho();
    expect(await c.ask(datagram('127.0.0.1', echo.port, Buffer.from('fine')))).not.toBeNull();
  });

  it('the cap holds for requests arriving together; an answer too big to wrap is dropped and the association goes on', async () => {
    const capped = await startTestGateway({
      udp: { ports: { lo: 40000, hi: 44999 }, idleMs: 60_000, maxAssociations: 1 },
    });
    cleanup.push(() => capped.gw.close(0));
    const replies = (await Promise.all([associate(capped), associate(capped), associate(capped)]))
      .map((a) => a.reply)
      .sort();
    expect(replies).toEqual([0, 1, 1]);

    const g = await startTestGateway();
    cleanup.push(() => g.gw.close(0));
    // A target that answers "big" with the largest UDP payload (no room for the 10-byte header), anything else with itself.
    const t = await udpTargetSocket();
    t.on('message', (m, r) => t.send(m.toString() === 'big' ? Buffer.alloc(65_507) : m, r.port, r.address));
    cleanup.push(() => t.close());
    const a = await associate(g);
    const c = await client(a.relay);
    expect(await c.ask(datagram('127.0.0.1', t.address().port, Buffer.from('big')), 300)).toBeNull();
    expect(g.gw.stats().udp.dropped.over_limit).toBe(1);
    expect((await c.ask(datagram('127.0.0.1', t.address().port, Buffer.from('small'))))?.subarray(10).toString()).toBe(
      'small',
    );
  });

  it('ends after --udp-idle without a datagram: the control connection is closed', async () => {
    const g = await startTestGateway({ udp: { ports: { lo: 40000, hi: 44999 }, idleMs: 400, maxAssociations: 10 } });
    cleanup.push(() => g.gw.close(0));
    const a = await associate(g);
    const t0 = Date.now();
    await a.control.readToEnd(5_000);
    expect(Date.now() - t0).toBeLessThan(patient(2_000));
    await waitFor('released', () => (g.gw.stats().udp.associationsOpen === 0 ? true : undefined), 2_000);
  });

  it('the port range exhausted, or the cap reached: 0x01; a port comes back when its association ends', async () => {
    const port = 40000 + Math.floor(Math.random() * 4000);
    const g = await startTestGateway({
      udp: { ports: { lo: port, hi: port + 1 }, idleMs: 60_000, maxAssociations: 10 },
    });
    cleanup.push(() => g.gw.close(0));
    const one = await associate(g);
    const two = await associate(g);
    expect([one.reply, two.reply]).toEqual([0, 0]);
    expect(new Set([one.relay.port, two.relay.port])).toEqual(new Set([port, port + 1]));
    expect((await associate(g)).reply).toBe(1);
    one.control.socket.destroy();
    await waitFor('freed', () => (g.gw.stats().udp.associationsOpen === 1 ? true : undefined), 2_000);
    expect((await associate(g)).reply).toBe(0);

    const capped = await startTestGateway({
      udp: { ports: { lo: 40000, hi: 44999 }, idleMs: 60_000, maxAssociations: 1 },
    });
    cleanup.push(() => capped.gw.close(0));
    expect((await associate(capped)).reply).toBe(0);
    expect((await associate(capped)).reply).toBe(1);
  });

  it("a session's datagrams leave from its egress address", async () => {
    const g = await startTestGateway({ egressAddress: '127.0.0.2' });
    cleanup.push(() => g.gw.close(0));
    const echo = await udpEcho();
    const a = await associate(g);
    const c = await client(a.relay);
    expect(await c.ask(datagram('127.0.0.1', echo.port, Buffer.from('where from?')))).not.toBeNull();
    expect(echo.from).toEqual(['127.0.0.2']);
  });

  it('an entry whose dialer cannot carry UDP to an exit answers 0x07 (never from its own address)', async () => {
    const g = await startTestGateway({ exitDialer: { dial: async () => ({ ok: false, failure: 'no_exit' }) } });
    cleanup.push(() => g.gw.close(0));
    expect((await associate(g)).reply).toBe(7);
  });
});

describe("the gateway's own UDP sockets (udp-out.ts)", () => {
  it('matched by address and port: a wildcard socket takes every local address, a target on the unspecified address any socket', () => {
    holdUdpPort('0.0.0.0', 5555);
    holdUdpPort('127.0.0.1', 6666);
    holdUdpPort('127.0.0.1', 6666); // two sockets on one address and port: held until both close
    try {
      expect(isOwnUdpSocket('127.0.0.1', 5555)).toBe(true);
      expect(isOwnUdpSocket('127.0.0.9', 5555)).toBe(true);
      expect(isOwnUdpSocket('::ffff:127.0.0.1', 5555)).toBe(true);
      expect(isOwnUdpSocket('192.0.2.1', 5555)).toBe(false); // not this host's
      expect(isOwnUdpSocket('127.0.0.1', 6666)).toBe(true);
      expect(isOwnUdpSocket('127.0.0.2', 6666)).toBe(false);
      expect(isOwnUdpSocket('0.0.0.0', 6666)).toBe(true);
      expect(isOwnUdpSocket('127.0.0.1', 7777)).toBe(false);
      releaseUdpPort('127.0.0.1', 6666);
      expect(isOwnUdpSocket('127.0.0.1', 6666)).toBe(true);
    } finally {
      releaseUdpPort('0.0.0.0', 5555);
      releaseUdpPort('127.0.0.1', 6666);
    }
    expect(isOwnUdpSocket('127.0.0.1', 5555)).toBe(false);
    expect(isOwnUdpSocket('127.0.0.1', 6666)).toBe(false);
  });

  it("a datagram from one of them is never a client's (dropped as `source`), even from the client's own address", async () => {
    const g = await startTestGateway();
    cleanup.push(() => g.gw.close(0));
    const a = await associate(g);
    const c = await client(a.relay);
    const port = c.socket.address().port;
    holdUdpPort('127.0.0.1', port); // the client's socket stands for a gateway socket on the client's address
    try {
      expect(
        await c.ask(datagram('127.0.0.1', (await udpEcho()).port, Buffer.from('from a gateway socket')), 300),
      ).toBeNull();
      expect(g.gw.stats().udp.dropped.source).toBe(1);
    } finally {
      releaseUdpPort('127.0.0.1', port);
    }
  });
});

describe('UdpOut', () => {
  it('a target used past its reuse time is resolved once more, then sent to at once again (not resolved per datagram)', async () => {
    const { UdpOut } = await import('../../../src/gateway/dial/udp-out.js');
    const echo = await udpEcho();
    let resolves = 0;
    let answers = 0;
    const out = new UdpOut({
      resolve: async () => {
        resolves++;
        return { ok: true, address: '127.0.0.1', family: 4 };
      },
      egressAddress: '127.0.0.1',
      drop: () => {},
      onAnswer: () => answers++,
      readyMs: 40,
    });
    cleanup.push(() => out.close());
    // 200 datagrams over ~400 ms: about ten reuse periods, so about ten resolves (before the fix, one per datagram past the first period).
    for (let i = 0; i < 200; i++) {
      await out.send('echo.test', echo.port, Buffer.from([i & 255]));
      await sleep(2);
    }
    await waitFor('the answers', () => answers >= 190);
    expect(resolves).toBeGreaterThanOrEqual(2);
    expect(resolves).toBeLessThanOrEqual(30);
  });
});
