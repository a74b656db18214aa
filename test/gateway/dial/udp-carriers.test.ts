// A UDP association dialed like a connection (docs/decisions.md#d-067): each dialer's `associate` chooses the egress
// as its `dial` does and gives a carrier (dial/udp-out.ts UdpOut, hop/udp-carrier.ts HopUdpCarrier); datagrams are
// metered on the tunnel's budget and rate (relay/datagrams.ts); the hop's DIAL and UDP lines are written and read in
// hop/wire.ts only; the UDP defaults have one home (src/rules/udp-defaults.ts).
import dgram from 'node:dgram';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  DedicatedDialer,
  DirectDialer,
  LocatedDialer,
  NO_DEDICATED_EXIT,
  NO_SHARED_ADDRESS,
  OwnListenerGuard,
  PoolDialer,
  type AssociateRequest,
  type DedicatedEgress,
} from '../../../src/gateway/dial/dialer.js';
import { SessionTable } from '../../../src/gateway/dial/sticky-sessions.js';
import type { UdpCarrier, UdpSender } from '../../../src/gateway/dial/udp-out.js';
import { HopUdpCarrier } from '../../../src/gateway/hop/udp-carrier.js';
import { encodeFrame, readFrames } from '../../../src/gateway/hop/udp.js';
import { encodeHopAnswer, encodeHopRequest, parseHopAnswer, parseHopRequest } from '../../../src/gateway/hop/wire.js';
import { encodeUdpHeader } from '../../../src/gateway/wire/socks5.js';
import { ByteBudget } from '../../../src/gateway/relay/byte-budget.js';
import { countDatagram, datagramMayPass, type DatagramOwner } from '../../../src/gateway/relay/datagrams.js';
import { RateBucket } from '../../../src/gateway/relay/rate-budget.js';
import { UDP_DEFAULTS } from '../../../src/rules/udp-defaults.js';
import { SERVE_DEFAULTS } from '../../../src/daemon/process/serve-options.js';

const cleanup: Array<() => void> = [];
afterEach(() => {
  for (const f of cleanup.splice(0)) f();
});

const waitFor = async (what: string, ok: () => boolean, ms = 3_000): Promise<void> => {
  const until = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
};

async function udpEcho(): Promise<{ port: number }> {
  const s = dgram.createSocket('udp4');
  s.on('message', (msg, r) => s.send(msg, r.port, r.address));
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', () => r()));
  cleanup.push(() => s.close());
  return { port: s.address().port };
}

describe('the hop lines (hop/wire.ts)', () => {
  it('writes DIAL and UDP lines as the release before did, and reads back what it wrote', () => {
    const dial = {
      kind: 'dial' as const,
      host: 'example.com',
      port: 443,
      session: { key: 'a b/ü', minutes: 10 },
      accountId: 7,
      pin: '203.0.113.5',
    };
    const udp = { kind: 'udp' as const, session: null, accountId: 7, pin: null };
    expect(encodeHopRequest(dial)).toBe('DIAL example.com 443 a%20b%2F%C3%BC 10 7 203.0.113.5');
    expect(encodeHopRequest(udp)).toBe('UDP - 0 7');
    expect(
      encodeHopRequest({ kind: 'udp', session: { key: 'k', minutes: 5 }, accountId: -1, pin: '198.51.100.1' }),
    ).toBe('UDP k 5');
    expect(encodeHopRequest({ kind: 'dial', host: '10.0.0.1', port: 80, session: null })).toBe('DIAL 10.0.0.1 80 - 0');
    expect(parseHopRequest(encodeHopRequest(dial))).toEqual(dial);
    expect(parseHopRequest(encodeHopRequest(udp))).toEqual(udp);
    expect(parseHopRequest('DIAL 10.0.0.1 80 - 0')).toEqual({
      kind: 'dial',
      host: '10.0.0.1',
      port: 80,
      session: null,
      accountId: -1,
      pin: null,
    });
  });

  it('refuses lines no entry makes', () => {
    for (const line of [
      'DIAL h 65536 - 0',
      'DIAL h 80 %E0%A4%A 1',
      'UDP %E0%A4%A 1',
      'UDP - 0 7 not-an-ip',
      // The pin is an IPv4 address as isStrictIPv4 reads it (src/rules/ipv4-syntax.ts): no octet past 255, no leading zero.
      'UDP - 0 7 256.0.0.1',
      'DIAL h 80 - 0 7 010.0.0.1',
      'PING',
      '',
      'DIAL h 80 -',
      'UDP  0',
    ]) {
      expect(parseHopRequest(line), line).toBeNull();
    }
  });

  it('writes and reads the answers: a tunnel with its egress, a UDP association with or without one, a failure', () => {
    expect(encodeHopAnswer({ kind: 'dial', egress: '192.0.2.1', port: 40001 })).toBe('OK 192.0.2.1 40001');
    expect(encodeHopAnswer({ kind: 'dial', egress: undefined, port: undefined })).toBe('OK -');
    expect(encodeHopAnswer({ kind: 'udp', egress: undefined })).toBe('OK udp');
    expect(encodeHopAnswer({ kind: 'udp', egress: '192.0.2.1' })).toBe('OK udp 192.0.2.1');
    expect(encodeHopAnswer({ kind: 'err', failure: 'no_exit' })).toBe('ERR no_exit');
    expect(parseHopAnswer('OK 192.0.2.1 40001')).toEqual({ ok: true, egress: '192.0.2.1' });
    expect(parseHopAnswer('OK udp 192.0.2.1')).toEqual({ ok: true, egress: '192.0.2.1' });
    expect(parseHopAnswer('OK udp')).toEqual({ ok: true, egress: undefined });
    expect(parseHopAnswer('OK -')).toEqual({ ok: true, egress: undefined });
    expect(parseHopAnswer('OK 999.0.2.1 40001')).toEqual({ ok: true, egress: undefined });
    expect(parseHopAnswer('OK udp 192.0.2.01')).toEqual({ ok: true, egress: undefined });
    expect(parseHopAnswer('ERR target_denied')).toEqual({ ok: false, failure: 'target_denied' });
  });
});

describe('datagrams metered on the budget and rate (relay/datagrams.ts)', () => {
  const owner = (budget: ByteBudget | null, rate: DatagramOwner['rate']): DatagramOwner => ({
    budget,
    rate,
    bytesUp: 0,
    bytesDown: 0,
    datagramsUp: 0,
    datagramsDown: 0,
    core: { stats: { udp: { datagramsUp: 0, datagramsDown: 0, bytesUp: 0, bytesDown: 0 } } },
  });

  it('up needs the budget to hold the datagram whole; an answer is taken from it but not refused by it', () => {
    const budget = new ByteBudget(null, () => {});
    budget.refill(100);
    const o = owner(budget, null);
    expect(datagramMayPass(o, 'up', 100)).toBe(true);
    expect(datagramMayPass(o, 'up', 101)).toBe(false);
    expect(datagramMayPass(o, 'down', 101)).toBe(true);
    countDatagram(o, 'up', 60);
    countDatagram(o, 'down', 30);
    expect(budget.remaining).toBe(10);
    expect(o).toMatchObject({ bytesUp: 60, bytesDown: 30, datagramsUp: 1, datagramsDown: 1 });
    expect(o.core.stats.udp).toEqual({ datagramsUp: 1, datagramsDown: 1, bytesUp: 60, bytesDown: 30 });
  });

  it('each way has its own rate bucket: a datagram goes whole while its bucket has room, none once it is empty', () => {
    const t = { now: 0 };
    const rate = { up: new RateBucket(1_000, null, () => t.now), down: new RateBucket(1_000, null, () => t.now) };
    const o = owner(null, rate);
    expect(datagramMayPass(o, 'up', 5_000)).toBe(true); // larger than a second of rate: still passes while there is room
    countDatagram(o, 'up', 5_000);
    expect(datagramMayPass(o, 'up', 1)).toBe(false);
    expect(datagramMayPass(o, 'down', 1)).toBe(true);
    countDatagram(o, 'down', 1_000);
    expect(datagramMayPass(o, 'down', 1)).toBe(false);
  });
});

describe("each dialer's associate (dial/dialer.ts)", () => {
  const direct = (localAddress?: string, track?: (c: { destroy(): void }, a: string) => void) =>
    new DirectDialer({
      ...(localAddress ? { localAddress } : {}),
      family: 4,
      allowPrivateTargets: true,
      ownListeners: () => [],
      connectTimeoutMs: 5_000,
      countRefusal: () => {},
      countEgress: () => {},
      ...(track ? { trackEgress: (c, a) => track(c, a) } : {}),
    });
  const request = (over: Partial<AssociateRequest> = {}): AssociateRequest & { drops: string[] } => {
    const drops: string[] = [];
    return { session: null, stillWanted: () => true, drop: (r) => drops.push(r), drops, ...over };
  };
  const carrierOf = (out: Awaited<ReturnType<DirectDialer['associate']>>): UdpCarrier => {
    if (!out?.ok) throw new Error(`no carrier: ${JSON.stringify(out)}`);
    cleanup.push(() => out.carrier.close());
    return out.carrier;
  };

  it('direct: datagrams out from the egress address, answers back through receive(); the target rules as asked drop before resolving', async () => {
    const echo = await udpEcho();
    const req = request({ judge: (host) => (host === 'denied.test' ? { denied: 'target_denied' } : null) });
    const out = await direct('127.0.0.1').associate(req);
    expect(out).toMatchObject({ ok: true, egress: '127.0.0.1' });
    const carrier = carrierOf(out);
    const answers: Array<{ from: UdpSender; data: string }> = [];
    carrier.receive(
      (from, data) => answers.push({ from, data: data.toString() }),
      () => {},
    );
    expect(await carrier.send('127.0.0.1', echo.port, Buffer.from('one'))).toBe(true);
    await waitFor('the answer', () => answers.length === 1);
    expect(answers[0]).toEqual({ from: { address: '127.0.0.1', family: 4, port: echo.port }, data: 'one' });
    expect(await carrier.send('denied.test', echo.port, Buffer.from('two'))).toBe(false);
    expect(req.drops).toEqual(['policy']);
  });

  it('direct: a refused target and the gateway relay range on a local address are dropped as policy', async () => {
    const req = request({ judge: () => ({ denied: 'target_denied' }), relayPorts: { lo: 40_000, hi: 44_999 } });
    const carrier = carrierOf(await direct().associate(req));
    expect(await carrier.send('blocked.test', 53, Buffer.from('x'))).toBe(false);
    expect(req.drops).toEqual(['policy']);
    const allowed = request({ relayPorts: { lo: 40_000, hi: 44_999 } });
    const open = carrierOf(await direct().associate(allowed));
    expect(await open.send('127.0.0.1', 40_001, Buffer.from('x'))).toBe(false);
    expect(await open.send('localhost', 44_999, Buffer.from('x'))).toBe(false);
    expect(allowed.drops).toEqual(['policy', 'policy']);
  });

  it('no egress address: none reported, the carrier not tracked', async () => {
    const tracked: string[] = [];
    const out = await direct(undefined, (_c, a) => tracked.push(a)).associate(request());
    carrierOf(out);
    expect(out).toMatchObject({ ok: true });
    expect(out && out.ok && out.egress).toBeUndefined();
    expect(tracked).toEqual([]);
  });

  it('its egress address changing hands ends the carrier, and the association hears it (even before it listened)', async () => {
    const tracked: Array<{ destroy(): void }> = [];
    const d = direct('127.0.0.1', (c) => tracked.push(c));
    const early = carrierOf(await d.associate(request()));
    tracked[0]!.destroy();
    let endedEarly = 0;
    early.receive(
      () => {},
      () => endedEarly++,
    );
    expect(endedEarly).toBe(1);
    const late = carrierOf(await d.associate(request()));
    let ended = 0;
    late.receive(
      () => {},
      () => ended++,
    );
    tracked[1]!.destroy();
    expect(ended).toBe(1);
    // Closed by its association: not an end to report.
    const closed = carrierOf(await d.associate(request()));
    let closedEnds = 0;
    closed.receive(
      () => {},
      () => closedEnds++,
    );
    closed.close();
    expect(closedEnds).toBe(0);
  });

  it('the pool chooses the egress as for a connection: a session sticks, none free is no_exit', async () => {
    const pool = ['127.0.0.2', '127.0.0.3'];
    const dialer = new PoolDialer(direct(), pool, new SessionTable(pool.length));
    const first = await dialer.associate(request({ session: { key: '1:u:s', minutes: 10 } }));
    const again = await dialer.associate(request({ session: { key: '1:u:s', minutes: 10 } }));
    carrierOf(first);
    carrierOf(again);
    expect(first && first.ok && first.egress).toBe(again && again.ok && again.egress);
    expect(pool).toContain(first && first.ok && first.egress);
    const reserved = new PoolDialer(direct(), pool, new SessionTable(pool.length), {
      reserved: () => true,
      generation: () => 1,
    });
    expect(await reserved.associate(request())).toEqual({ ok: false, failure: 'no_exit', detail: NO_SHARED_ADDRESS });
  });

  it("dedicated addresses: the account's own address, no_exit when they are all elsewhere, the shared dialer for everyone else", async () => {
    const view: DedicatedEgress = {
      here: (id) => (id === 1 ? ['127.0.0.5'] : []),
      holdsAny: (id) => id === 1 || id === 2,
      reserved: () => false,
      generation: () => 0,
      nodeOf: () => null,
      nodesOf: () => new Set(),
    };
    const dialer = new DedicatedDialer(direct(), direct('127.0.0.1'), view);
    const own = await dialer.associate(request({ accountId: 1 }));
    carrierOf(own);
    expect(own).toMatchObject({ ok: true, egress: '127.0.0.5' });
    expect(await dialer.associate(request({ accountId: 2 }))).toEqual({
      ok: false,
      failure: 'no_exit',
      detail: NO_DEDICATED_EXIT,
    });
    const shared = await dialer.associate(request({ accountId: 3 }));
    carrierOf(shared);
    expect(shared).toMatchObject({ ok: true, egress: '127.0.0.1' });
  });

  it('a `both` node targeted elsewhere: no_exit naming what was asked, as a CONNECT gets', async () => {
    const dialer = new LocatedDialer(direct(), { country: 'de', city: null });
    expect(await dialer.associate(request({ exitWish: { country: 'us', city: null } }))).toEqual({
      ok: false,
      failure: 'no_exit',
      detail: 'no exit for country us',
    });
    carrierOf(await dialer.associate(request({ exitWish: { country: 'de', city: null } })));
  });

  it("an entry's guard adds the check of its own listeners and relay range to the request", async () => {
    let seen: AssociateRequest | null = null;
    const inner = {
      dial: () => Promise.resolve(null),
      associate: (req: AssociateRequest) => ((seen = req), Promise.resolve(null)),
    };
    const guard = new OwnListenerGuard(
      inner,
      () => [{ host: '127.0.0.1', port: 1080 }],
      () => {},
    );
    await guard.associate!(request({ relayPorts: { lo: 40_000, hi: 44_999 } }));
    const own = (seen as AssociateRequest | null)?.ownTarget;
    expect(own?.('127.0.0.1', 1080)).toBe(true);
    expect(own?.('localhost', 40_100)).toBe(true);
    expect(own?.('192.0.2.1', 40_100)).toBe(false);
    expect(
      new OwnListenerGuard(
        { dial: () => Promise.resolve(null) },
        () => [],
        () => {},
      ).associate,
    ).toBeUndefined();
  });
});

describe('the hop carrier (hop/udp-carrier.ts)', () => {
  async function pair(): Promise<[net.Socket, net.Socket]> {
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const accepted = new Promise<net.Socket>((r) => server.once('connection', r));
    const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    const other = await accepted;
    server.close();
    cleanup.push(() => {
      client.destroy();
      other.destroy();
    });
    return [client, other];
  }

  it('writes a frame per datagram the entry allows; the account rules and its own sockets drop as policy', async () => {
    const [entry, exit] = await pair();
    const drops: string[] = [];
    const carrier = new HopUdpCarrier(entry, {
      judge: (host) => (host === 'denied.test' ? { denied: 'target_denied' } : null),
      ownTarget: (_host, port) => port === 1080,
      drop: (r) => drops.push(r),
    });
    const frames: Array<{ host: string; port: number; data: string }> = [];
    readFrames(exit, (f) => frames.push({ host: f.host, port: f.port, data: f.data.toString() }));
    expect(carrier.send('denied.test', 53, Buffer.from('a'))).toBe(false);
    expect(carrier.send('127.0.0.1', 1080, Buffer.from('b'))).toBe(false);
    expect(carrier.send('example.com', 53, Buffer.from('c'))).toBe(true);
    await waitFor('the frame', () => frames.length === 1);
    expect(frames).toEqual([{ host: 'example.com', port: 53, data: 'c' }]);
    expect(drops).toEqual(['policy', 'policy']);
  });

  it('answers come back from frames; a named sender is dropped as malformed; the stream closing ends it, close() does not report', async () => {
    const [entry, exit] = await pair();
    const drops: string[] = [];
    const carrier = new HopUdpCarrier(entry, { drop: (r) => drops.push(r) });
    const answers: Array<{ from: UdpSender; data: string }> = [];
    let ended = 0;
    carrier.receive(
      (from, data) => answers.push({ from, data: data.toString() }),
      () => ended++,
    );
    exit.write(encodeFrame({ host: '192.0.2.7', port: 53 }, Buffer.from('answer'))!);
    exit.write(encodeFrame({ host: 'named.test', port: 53 }, Buffer.from('x'))!);
    await waitFor('the answer and the drop', () => answers.length === 1 && drops.length === 1);
    expect(answers).toEqual([{ from: { address: '192.0.2.7', family: 4, port: 53 }, data: 'answer' }]);
    expect(drops).toEqual(['malformed']);
    exit.destroy();
    await waitFor('the end', () => ended === 1);

    const [entry2] = await pair();
    const closing = new HopUdpCarrier(entry2, { drop: () => {} });
    let ended2 = 0;
    closing.receive(
      () => {},
      () => ended2++,
    );
    closing.close();
    await new Promise((r) => setTimeout(r, 30));
    expect(entry2.destroyed).toBe(true);
    expect(ended2).toBe(0);
  });

  // The exit's frames name an IPv6 sender as bytes; the entry reads them as RFC 5952 text (src/rules/socks5-address.ts,
  // no longer ipaddr.js's `::ffff:c000:207` for an IPv4-mapped one) and the client's answer header re-encodes that
  // text: the bytes the client gets are the ones the exit sent.
  it.each(['::ffff:192.0.2.7', '2001:db8::1:0:0:1', '::1', '192.0.2.7'])(
    'an answer from %s reaches the client with the sender bytes the exit framed',
    async (sender) => {
      const [entry, exit] = await pair();
      const carrier = new HopUdpCarrier(entry, { drop: () => {} });
      const answers: UdpSender[] = [];
      carrier.receive(
        (from) => answers.push(from),
        () => {},
      );
      const frame = encodeFrame({ host: sender, port: 5353 }, Buffer.from('a'))!;
      exit.write(frame);
      await waitFor('the answer', () => answers.length === 1);
      const from = answers[0]!;
      expect(from.family).toBe(sender.includes(':') ? 6 : 4);
      expect(from.address).toBe(sender);
      expect(encodeUdpHeader(from.address, from.port)).toEqual(
        Buffer.concat([Buffer.from([0, 0, 0]), frame.subarray(2, frame.length - 1)]),
      );
    },
  );
});

describe('the UDP defaults (src/rules/udp-defaults.ts)', () => {
  it("are what proxyd serve's flags default to", () => {
    expect(SERVE_DEFAULTS.udpPorts).toBe(`${UDP_DEFAULTS.ports.lo}-${UDP_DEFAULTS.ports.hi}`);
    expect(SERVE_DEFAULTS.udpPorts).toBe('40000-44999');
    expect(SERVE_DEFAULTS.udpIdle).toBe('120');
    expect(SERVE_DEFAULTS.udpMaxAssociations).toBe('10000');
    expect(UDP_DEFAULTS.idleMs).toBe(120_000);
  });
});
