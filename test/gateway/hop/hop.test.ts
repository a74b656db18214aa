// The hop between entry and exit at the socket level: an exit's TLS hop server with a real dialer, an entry's
// HopLink pinned to the exit's certificate fingerprint. Tunnels both ways with a half-close; a failed dial
// leaves no socket behind; nothing is reachable without the fleet secret, a proof from another TLS session is
// refused, an impostor with another certificate learns nothing, an expired certificate is refused; bounded
// unproven connections; secret and certificate rotation without a cut tunnel; a ready connection the exit
// closed as it was taken is replaced; a tunnel waiting on an exit that stopped answering goes elsewhere.
import { once } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { DirectDialer } from '../../../src/gateway/dial/dialer.js';
import { ExitDirectory, type ExitRow } from '../../../src/gateway/hop/directory.js';
import { makeHopIdentity, type HopIdentity } from '../../../src/gateway/hop/identity.js';
import { HopLink, type HopRejection } from '../../../src/gateway/hop/link.js';
import { startHopServer, type HopRefusal, type HopServer } from '../../../src/gateway/hop/server.js';
import { sourceKey } from '../../../src/gateway/dial/target-policy.js';
import { MuxSession } from '../../../src/gateway/hop/mux.js';
import { ALPN, ALPN_LEGACY, hopProof, readLine, sessionBinding } from '../../../src/gateway/hop/wire.js';
import { Tunnels } from '../../../src/gateway/relay/open-tunnels.js';
import { sleep, waitFor } from '../../helpers/wait.js';
import { patient } from '../../helpers/patience.js';

const SECRET = Buffer.alloc(32, 7);
const OTHER_SECRET = Buffer.alloc(32, 8);
const DAY = 86_400_000;
const ID = makeHopIdentity(90 * DAY);
const dialer = new DirectDialer({
  family: null,
  allowPrivateTargets: true,
  ownListeners: () => [],
  connectTimeoutMs: 2_000,
  countRefusal: () => {},
  countEgress: () => {},
});
const core = { tunnels: new Tunnels(60_000), limits: { idleTimeoutMs: 60_000 } };

/** A dial as the gateway asks it: wanted while its client is there (here: always), told each socket it tries. */
function request(host: string, port: number): Parameters<HopLink['dial']>[0] {
  return { host, port, session: null, stillWanted: () => true, connecting: () => {} };
}

async function refusedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

async function listening<T extends net.Server>(s: T): Promise<T & { port: number }> {
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  return Object.assign(s, { port: (s.address() as net.AddressInfo).port });
}

/** A target that counts what it gets until the client's FIN, then answers `got N` and closes. */
async function counter(): Promise<net.Server & { port: number }> {
  return listening(
    net.createServer({ allowHalfOpen: true }, (c) => {
      let n = 0;
      c.on('error', () => {});
      c.on('data', (d: Buffer) => (n += d.length));
      c.on('end', () => c.end(`got ${n}\n`));
    }),
  );
}

/** A TLS client of the hop port, as anyone could make one; `null` ALPN: none offered. */
function tlsClient(port: number, alpn: string | null = ALPN): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({
      host: '127.0.0.1',
      port,
      rejectUnauthorized: false,
      minVersion: 'TLSv1.3',
      ...(alpn ? { ALPNProtocols: [alpn] } : {}),
    });
    s.once('secureConnect', () => resolve(s));
    s.once('error', reject);
  });
}

/** Two ends of a loopback TCP connection (a customer and the gateway's side of it). */
async function socketPair(): Promise<[net.Socket, net.Socket]> {
  const srv = await listening(net.createServer({ allowHalfOpen: true }));
  const a = net.connect(srv.port, '127.0.0.1');
  const [b] = (await once(srv, 'connection')) as [net.Socket];
  srv.close();
  return [a, b];
}

/** Everything the peer says until it closes (or `ms`), and whether it closed. */
function hear(s: net.Socket, ms = 3_000): Promise<{ said: string; closed: boolean }> {
  return new Promise((resolve) => {
    let said = '';
    s.on('data', (d: Buffer) => (said += d.toString('latin1')));
    s.on('error', () => {});
    const t = setTimeout(() => resolve({ said, closed: false }), ms);
    s.on('close', () => {
      clearTimeout(t);
      resolve({ said, closed: true });
    });
    s.resume();
  });
}

describe('the hop', () => {
  const cleanup: Array<() => unknown> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  async function exit(
    o: {
      identity?: HopIdentity;
      secrets?: () => readonly Buffer[];
      proofDeadlineMs?: number;
      refused?: HopRefusal[];
      unproven?: { total: number; perSource: number };
    } = {},
  ): Promise<{ server: HopServer; link: HopLink; rejected: HopRejection[] }> {
    const server = await startHopServer({
      listen: { host: '127.0.0.1', port: 0 },
      identity: o.identity ?? ID,
      secrets: o.secrets ?? (() => [SECRET]),
      dialer,
      core,
      proofDeadlineMs: o.proofDeadlineMs,
      unproven: o.unproven,
      onRefused: (why) => o.refused?.push(why),
    });
    const rejected: HopRejection[] = [];
    const link = new HopLink(server.address(), {
      fingerprints: () => [(o.identity ?? ID).fingerprint],
      secrets: () => [SECRET],
      warm: 2,
      onRejected: (why) => rejected.push(why),
    });
    cleanup.push(
      () => server.close(0),
      () => link.close(),
    );
    return { server, link, rejected };
  }

  /** A tunnel through `link` to a counting target: sends `n` bytes, half-closes, and reads the answer. */
  async function countThrough(link: HopLink, n: number, target: { port: number }): Promise<string> {
    const out = await link.dial(request('127.0.0.1', target.port));
    if (out === null || out === 'retry' || !out.ok) throw new Error(`no tunnel: ${JSON.stringify(out)}`);
    const heard = hear(out.socket, 10_000);
    out.socket.end(Buffer.alloc(n, 1));
    return (await heard).said;
  }

  it('relays a tunnel after OK: bytes both ways, a half-close passed on, over TLS 1.3', async () => {
    const { link } = await exit();
    const target = await counter();
    cleanup.push(() => target.close());
    expect(await countThrough(link, 3 * 2 ** 20, target)).toBe(`got ${3 * 2 ** 20}\n`);
    const s = await link.open();
    expect(s?.socket.getProtocol()).toBe('TLSv1.3');
    expect(s?.socket.alpnProtocol).toBe(ALPN);
    s?.destroy();
  });

  it("a tunnel's local address is the exit's egress socket (a SOCKS5 reply's BND through an entry), not the hop connection's end", async () => {
    const { link } = await exit();
    const seen: Array<{ address: string; port: number }> = [];
    const target = net.createServer((s) => {
      seen.push({ address: s.remoteAddress!, port: s.remotePort! });
      s.end();
    });
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
    cleanup.push(() => target.close());
    const out = await link.dial(request('127.0.0.1', (target.address() as net.AddressInfo).port));
    if (out === null || out === 'retry' || !out.ok) throw new Error(`no tunnel: ${JSON.stringify(out)}`);
    await new Promise((r) => setTimeout(r, 50));
    expect({ address: out.socket.localAddress, port: out.socket.localPort, family: out.socket.localFamily }).toEqual({
      ...seen[0],
      family: 'IPv4',
    });
    out.socket.destroy();
  });

  it('many tunnels share a few connections; a customer who stops reading holds up only their own tunnel', async () => {
    const { server, link } = await exit();
    const target = await counter();
    // A target that sends 64 MiB as fast as it is taken.
    const firehose = await listening(
      net.createServer((c) => {
        c.on('error', () => {});
        const chunk = Buffer.alloc(64 * 1024, 2);
        let sent = 0;
        const pump = (): void => {
          while (sent < 64 * 2 ** 20 && c.write(chunk)) sent += chunk.length;
        };
        c.on('drain', pump);
        pump();
      }),
    );
    cleanup.push(
      () => target.close(),
      () => firehose.close(),
    );
    // The stalled tunnel: its client reads nothing.
    const stalled = await link.dial(request('127.0.0.1', firehose.port));
    if (stalled === null || stalled === 'retry' || !stalled.ok) throw new Error('no tunnel');
    stalled.socket.pause();
    await sleep(300);
    // Forty more tunnels at once on the same exit, each 256 KiB each way and a half-close.
    const answers = await Promise.all(Array.from({ length: 40 }, () => countThrough(link, 256 * 1024, target)));
    expect(answers.every((a) => a === `got ${256 * 1024}\n`)).toBe(true);
    expect(link.connections()).toBeLessThanOrEqual(2);
    expect(server.open()).toBeLessThanOrEqual(2);
    // What the stalled tunnel holds in the entry is bounded by its window, not by what the target has.
    let got = 0;
    stalled.socket.on('data', (d: Buffer) => (got += d.length));
    stalled.socket.resume();
    await waitFor('the stalled tunnel flows again', () => got > 4 * 2 ** 20, 10_000);
    stalled.socket.destroy();
    await waitFor('the exit lets the stalled tunnel go', () => server.tunnels() === 0, 5_000);
  });

  it('review fixes: tunnels racing a GOAWAY are retried, not failed; one handshake for a burst on a fresh link; a retired connection closes after its last bytes', async () => {
    // After the grace, ten tunnels at once on a connection proved with the old secret: each is told proof_expired
    // or going_away and goes over one new connection (before: the nine behind the first failed host_unreachable).
    let accepted: Buffer[] = [SECRET];
    const { server } = await exit({ secrets: () => accepted });
    const target = await counter();
    cleanup.push(() => target.close());
    let entrySecrets = [SECRET];
    const link = new HopLink(server.address(), {
      fingerprints: () => [ID.fingerprint],
      secrets: () => entrySecrets,
      warm: 1,
    });
    cleanup.push(() => link.close());
    expect(await countThrough(link, 10, target)).toBe('got 10\n');
    accepted = [OTHER_SECRET];
    entrySecrets = [OTHER_SECRET, SECRET];
    const after = await Promise.all(Array.from({ length: 10 }, () => countThrough(link, 10, target)));
    expect(after).toEqual(Array(10).fill('got 10\n'));
    // An exit that stops (GOAWAY) while tunnels are being opened: those not taken are 'retry' (another exit), never a target failure.
    const { server: stopping } = await exit();
    const l2 = new HopLink(stopping.address(), {
      fingerprints: () => [ID.fingerprint],
      secrets: () => [SECRET],
      warm: 1,
    });
    cleanup.push(() => l2.close());
    const keep = await l2.dial(request('127.0.0.1', target.port));
    const racing = Array.from({ length: 20 }, () => l2.dial(request('127.0.0.1', target.port)));
    const closing = stopping.close(2_000);
    for (const o of await Promise.all(racing)) {
      expect(o === 'retry' || (o !== null && o.ok), JSON.stringify(o)).toBe(true);
      if (o !== null && o !== 'retry' && o.ok) o.socket.destroy();
    }
    if (keep !== null && keep !== 'retry' && keep.ok) keep.socket.destroy();
    await closing;
    // A fresh link and a burst: one connection for all of them (before: one handshake per waiting tunnel).
    const l3 = new HopLink(server.address(), {
      fingerprints: () => [ID.fingerprint],
      secrets: () => [OTHER_SECRET],
      warm: 1,
    });
    cleanup.push(() => l3.close());
    expect(await Promise.all(Array.from({ length: 30 }, () => countThrough(l3, 1, target)))).toEqual(
      Array(30).fill('got 1\n'),
    );
    expect(l3.connections()).toBeLessThanOrEqual(2);
    // Retired while a 16 MiB upload is still queued: the connection closes after it, and the target gets every byte.
    const l4 = new HopLink(server.address(), {
      fingerprints: () => [ID.fingerprint],
      secrets: () => [OTHER_SECRET],
      warm: 1,
    });
    const out = await l4.dial(request('127.0.0.1', target.port));
    if (out === null || out === 'retry' || !out.ok) throw new Error('no tunnel');
    const heard = hear(out.socket, 10_000);
    l4.close();
    out.socket.end(Buffer.alloc(16 * 2 ** 20, 1));
    expect((await heard).said).toBe(`got ${16 * 2 ** 20}\n`);
  });

  it('review fixes: an answer sent just before a reset reaches the customer; a stream reset before the pump takes it closes the customer', async () => {
    const { link } = await exit();
    // A target that answers and resets at once (a 413 with the body unread).
    const answering = await listening(
      net.createServer((c) => {
        c.on('error', () => {});
        // After the exit's dial has answered: the answer and the reset then cross the hop together.
        setTimeout(() => c.write('HTTP/1.1 413 Payload Too Large\r\n\r\n', () => c.resetAndDestroy()), 30);
      }),
    );
    const resetting = await listening(
      net.createServer((c) => {
        c.on('error', () => {});
        c.resetAndDestroy();
      }),
    );
    cleanup.push(
      () => answering.close(),
      () => resetting.close(),
    );
    for (let i = 0; i < 10; i++) {
      const out = await link.dial(request('127.0.0.1', answering.port));
      if (out === null || out === 'retry' || !out.ok) throw new Error(`no tunnel: ${JSON.stringify(out)}`);
      expect((await hear(out.socket)).said).toContain('413');
    }
    // Reset right after the connect: taken by the pump even if already gone, the customer's side closes at once.
    const { splice } = await import('../../../src/gateway/relay/splice.js');
    for (let i = 0; i < 10; i++) {
      const out = await link.dial(request('127.0.0.1', resetting.port));
      if (out === null || out === 'retry' || !out.ok) continue; // the reset may come first: a failed dial is fine too
      const [a, b] = await socketPair();
      await sleep(20); // the RESET has arrived by now
      let closed = false;
      a.on('close', () => (closed = true));
      a.on('error', () => {});
      splice(
        { socket: b, upstream: null, budget: null, rate: null, bytesUp: 0, bytesDown: 0, core },
        out.socket,
        Buffer.alloc(0),
      );
      await waitFor('the customer closed', () => closed, 2_000);
    }
  });

  it('an entry of the release before (one tunnel per connection, by lines) is still served', async () => {
    const { server } = await exit();
    const target = await counter();
    cleanup.push(() => target.close());
    const old = await tlsClient(server.address().port, ALPN_LEGACY);
    expect(old.alpnProtocol).toBe(ALPN_LEGACY);
    old.write(`AUTH ${hopProof(SECRET, sessionBinding(old))}\n`);
    expect(await readLine(old, 2_000)).toBe('OK');
    old.write('PING\n');
    expect(await readLine(old, 2_000)).toBe('PONG');
    old.write(`DIAL 127.0.0.1 ${target.port} - 0\n`);
    expect(await readLine(old, 2_000)).toMatch(/^OK 127\.0\.0\.1 \d+$/);
    const heard = hear(old);
    old.end(Buffer.alloc(1000));
    expect((await heard).said).toBe('got 1000\n');
  });

  it('a failed dial leaves no socket behind on the exit, even when the entry keeps its end open', async () => {
    const { server, link } = await exit();
    const port = await refusedPort();
    for (let i = 0; i < 4; i++)
      expect(await link.dial(request('127.0.0.1', port))).toEqual({ ok: false, failure: 'refused' });
    // By hand, an entry that says nothing more after the ERR and keeps its stream and connection open.
    const raw = await link.open();
    if (!raw) throw new Error('no hop connection');
    const stream = raw.open(`DIAL 127.0.0.1 ${port} - 0`);
    expect(await stream.answer(5_000)).toBe('ERR refused');
    expect(server.tunnels()).toBe(0);
    link.close(); // connections without a tunnel go too
    await waitFor('the exit holds nothing', () => server.open() === 0, 5_000);
    raw.destroy();
  });

  it('without the fleet secret nothing is reached: a wrong secret, no proof, any TLS client, a proof from another session', async () => {
    const refused: HopRefusal[] = [];
    const { server } = await exit({ refused });
    const target = await counter();
    cleanup.push(() => target.close());
    let reached = 0;
    target.on('connection', () => reached++);
    const port = server.address().port;

    const rejected: HopRejection[] = [];
    const bad = new HopLink(server.address(), {
      fingerprints: () => [ID.fingerprint],
      secrets: () => [OTHER_SECRET],
      onRejected: (why) => rejected.push(why),
    });
    cleanup.push(() => bad.close());
    expect(await bad.open()).toBeNull();
    expect(await bad.ping()).toBe(false);
    expect(rejected).toContain('proof_refused');

    // A TLS client that skips the proof and asks for a tunnel.
    const noProof = await tlsClient(port);
    noProof.write(`DIAL 127.0.0.1 ${target.port} - 0\n`);
    expect(await hear(noProof)).toEqual({ said: '', closed: true });
    // One without our ALPN name, or speaking HTTP.
    const http = await tlsClient(port, 'http/1.1').catch(() => null);
    if (http) {
      http.write(`CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\n\r\n`);
      expect((await hear(http)).said).toBe('');
    }
    // A plain TCP client (no TLS at all) gets no line of ours.
    const plain = net.connect(port, '127.0.0.1');
    plain.write(`AUTH ${'0'.repeat(64)}\nDIAL 127.0.0.1 ${target.port} - 0\n`);
    expect((await hear(plain)).said).not.toMatch(/OK|PROXYD/);

    // A valid proof, but made for another TLS session (captured, or relayed): refused.
    const a = await tlsClient(port);
    const b = await tlsClient(port);
    b.write(`AUTH ${hopProof(SECRET, sessionBinding(a))}\nDIAL 127.0.0.1 ${target.port} - 0\n`);
    expect(await hear(b)).toEqual({ said: '', closed: true });
    // The same proof in its own session is accepted (the test above is not vacuous).
    a.write(`AUTH ${hopProof(SECRET, sessionBinding(a))}\n`);
    expect(await readLine(a, 2_000)).toBe('OK');
    a.destroy();
    expect(reached).toBe(0);
    expect(refused.filter((r) => r === 'proof').length).toBeGreaterThanOrEqual(3);
  });

  it('an impostor with another certificate gets no proof and no plaintext; an expired certificate is refused', async () => {
    // The impostor answers on the address with a certificate of its own, and records what it is sent.
    const impostorId = makeHopIdentity(90 * DAY);
    const received: Buffer[] = [];
    const impostor = await listening(
      tls.createServer(
        { key: impostorId.key, cert: impostorId.cert, minVersion: 'TLSv1.3', ALPNProtocols: [ALPN] },
        (s) => {
          s.on('data', (d: Buffer) => received.push(d));
          s.on('error', () => {});
        },
      ),
    );
    cleanup.push(() => impostor.close());
    const rejected: HopRejection[] = [];
    const link = new HopLink(
      { host: '127.0.0.1', port: impostor.port },
      { fingerprints: () => [ID.fingerprint], secrets: () => [SECRET], onRejected: (why) => rejected.push(why) },
    );
    cleanup.push(() => link.close());
    expect(await link.open()).toBeNull();
    expect(await link.dial(request('127.0.0.1', 9))).toBe('retry');
    await sleep(100);
    expect(rejected).toContain('certificate_mismatch');
    expect(Buffer.concat(received).length).toBe(0);

    // A pinned certificate that has expired.
    const expired = makeHopIdentity(DAY, Date.now() - 3 * DAY);
    const { link: stale, rejected: why } = await exit({ identity: expired });
    expect(await stale.open()).toBeNull();
    expect(why).toEqual(['certificate_expired']);
  });

  it('unproven connections: at most 64 per source held, each closed at its deadline', async () => {
    const refused: HopRefusal[] = [];
    const { server, link } = await exit({ refused, proofDeadlineMs: 1_500 });
    const idle: net.Socket[] = [];
    for (let i = 0; i < 70; i++) {
      const s = net.connect(server.address().port, '127.0.0.1');
      s.on('error', () => {});
      idle.push(s);
    }
    await waitFor('six refused at once', () => refused.filter((r) => r === 'limit').length === 6, 3_000);
    // A proving entry from another source would still get in; from this one, it waits for the deadline.
    const t0 = Date.now();
    await waitFor(
      'the idle ones closed at the deadline',
      () => idle.every((s) => s.destroyed || s.readableEnded),
      5_000,
    );
    expect(Date.now() - t0).toBeLessThan(patient(3_000));
    expect(refused.filter((r) => r === 'handshake').length).toBe(64);
    for (const s of idle) s.destroy();
    // Then the entry gets in as before.
    expect(await link.ping()).toBe(true);
  });

  it('unproven connections in all: when the bound is full the oldest makes room, so an entry still gets in', async () => {
    const refused: HopRefusal[] = [];
    const { server, link } = await exit({ refused, unproven: { total: 8, perSource: 64 } });
    const idle: net.Socket[] = [];
    for (let i = 0; i < 8; i++) {
      const s = net.connect(server.address().port, '127.0.0.1');
      s.on('error', () => {});
      idle.push(s);
    }
    await sleep(200);
    expect(await link.ping()).toBe(true);
    await waitFor('the oldest idle one closed', () => idle[0]!.destroyed || idle[0]!.readableEnded, 2_000);
    expect(refused).toEqual(['limit']); // each connection counted once
    for (const s of idle) s.destroy();
    // Sources: an IPv4 address each; IPv6 by its /64 (one host holds a whole /64).
    expect(sourceKey('203.0.113.5')).toBe('203.0.113.5');
    expect(sourceKey('::ffff:203.0.113.5')).toBe('203.0.113.5');
    expect(sourceKey('2001:db8:1:2:aaaa::1')).toBe(sourceKey('2001:db8:1:2:bbbb:cccc:dddd:eeee'));
    expect(sourceKey('2001:db8:1:2::1')).not.toBe(sourceKey('2001:db8:1:3::1'));
  });

  it('secret rotation: during the grace both secrets are accepted, then only the new one; an open tunnel goes on', async () => {
    let accepted: Buffer[] = [SECRET];
    const { server } = await exit({ secrets: () => accepted });
    const target = await counter();
    cleanup.push(() => target.close());
    let entrySecrets = [SECRET];
    const oldLink = new HopLink(server.address(), {
      fingerprints: () => [ID.fingerprint],
      secrets: () => entrySecrets,
      warm: 1,
    });
    cleanup.push(() => oldLink.close());
    const open = await oldLink.dial(request('127.0.0.1', target.port));
    if (open === null || open === 'retry' || !open.ok) throw new Error('no tunnel');
    const heard = hear(open.socket, 10_000);
    open.socket.write(Buffer.alloc(1000));
    accepted = [OTHER_SECRET, SECRET]; // rotated: the grace
    const both = new HopLink(server.address(), {
      fingerprints: () => [ID.fingerprint],
      secrets: () => [OTHER_SECRET, SECRET],
    });
    cleanup.push(() => both.close());
    expect(await both.ping()).toBe(true);
    expect(await oldLink.ping()).toBe(true);
    accepted = [OTHER_SECRET]; // the grace is over
    expect(await both.ping()).toBe(true);
    const late = new HopLink(server.address(), { fingerprints: () => [ID.fingerprint], secrets: () => [SECRET] });
    cleanup.push(() => late.close());
    expect(await late.open()).toBeNull();
    // The entry whose connection proved only the old secret learns the new one: its next tunnel is refused on
    // that connection (proof_expired) and goes at once over a new one, proved with the new secret.
    entrySecrets = [OTHER_SECRET, SECRET];
    expect(await countThrough(oldLink, 100, target)).toBe('got 100\n');
    expect(await countThrough(both, 100, target)).toBe('got 100\n');
    open.socket.end(Buffer.alloc(1000));
    expect((await heard).said).toBe('got 2000\n');
  });

  it('certificate rotation: new connections get the new one, entries that pin both follow, an open tunnel goes on', async () => {
    const { server } = await exit();
    const target = await counter();
    cleanup.push(() => target.close());
    const next = makeHopIdentity(90 * DAY);
    let pinned = [ID.fingerprint];
    const link = new HopLink(server.address(), { fingerprints: () => pinned, secrets: () => [SECRET], warm: 1 });
    cleanup.push(() => link.close());
    const open = await link.dial(request('127.0.0.1', target.port));
    if (open === null || open === 'retry' || !open.ok) throw new Error('no tunnel');
    const heard = hear(open.socket, 10_000);
    open.socket.write(Buffer.alloc(500));
    pinned = [ID.fingerprint, next.fingerprint]; // announced
    link.repin();
    server.setIdentity(next);
    pinned = [next.fingerprint];
    link.repin();
    // Accepted while only the new certificate is pinned: the exit presents it (and no ticket of the old one is offered).
    const fresh = await link.open();
    expect(fresh).not.toBeNull();
    fresh!.destroy();
    expect(await countThrough(link, 100, target)).toBe('got 100\n');
    open.socket.end(Buffer.alloc(500));
    expect((await heard).said).toBe('got 1000\n');
  });

  it('the directory: a malformed fingerprint or a truncated handshake is said once and skipped (not also as unreachable); other exits serve', async () => {
    const { server } = await exit();
    // Something on an address that accepts and closes after a few bytes (a truncated handshake).
    const truncating = await listening(
      net.createServer((c) => {
        c.on('error', () => {});
        c.once('data', () => c.end(Buffer.from([0x16, 0x03, 0x03, 0x00])));
      }),
    );
    cleanup.push(() => truncating.close());
    const warnings: Array<{ event?: string; exit?: string; why?: string }> = [];
    const rows: ExitRow[] = [
      {
        node: 'good',
        hop: `127.0.0.1:${server.address().port}`,
        country: 'us',
        city: null,
        fingerprints: [ID.fingerprint],
        ageMs: 0,
      },
      {
        node: 'bad-pin',
        hop: `127.0.0.1:${server.address().port}`,
        country: 'us',
        city: null,
        fingerprints: ['not-a-fingerprint'],
        ageMs: 0,
      },
      {
        node: 'truncated',
        hop: `127.0.0.1:${truncating.port}`,
        country: 'us',
        city: null,
        fingerprints: [ID.fingerprint],
        ageMs: 0,
      },
      {
        node: 'nobody',
        hop: `127.0.0.1:${await refusedPort()}`,
        country: 'us',
        city: null,
        fingerprints: [ID.fingerprint],
        ageMs: 0,
      },
    ];
    const dir = new ExitDirectory(
      { list: async () => rows },
      {
        secrets: () => [SECRET],
        log: { info: () => {}, warn: (o) => warnings.push(o as { event?: string; exit?: string; why?: string }) },
      },
    );
    cleanup.push(() => dir.stop());
    await dir.start();
    await sleep(2_500);
    expect(dir.view().map((e) => [e.node, e.healthy])).toEqual([
      ['good', true],
      ['bad-pin', false],
      ['truncated', false],
      ['nobody', false],
    ]);
    for (let i = 0; i < 20; i++) expect(dir.pick(null, null, new Set())?.row.node).toBe('good');
    const said = (exit: string, why: string) => warnings.filter((w) => w.exit === exit && w.why === why).length;
    expect(said('bad-pin', 'bad_fingerprint')).toBe(1);
    expect(said('truncated', 'handshake_failed')).toBe(1);
    // An exit that answered but was refused is not also said to be unreachable; one that never answers is, once.
    const unreachable = warnings.filter((w) => w.event === 'exit_unreachable').map((w) => w.exit);
    expect(unreachable).toEqual(['nobody']);
  });

  it('a ready connection the exit closed as it was taken is replaced by a new one', async () => {
    // An exit that answers its first connection's DIAL by closing it, and dials properly on the next ones.
    let n = 0;
    const fake = await listening(
      tls.createServer({ key: ID.key, cert: ID.cert, minVersion: 'TLSv1.3', ALPNProtocols: [ALPN] }, (c) => {
        c.on('error', () => {});
        const mine = n++;
        void (async () => {
          if (!(await readLine(c, 2_000))?.startsWith('AUTH ')) return;
          c.write('OK\n');
          new MuxSession(c, {
            onOpen: (stream, line) => {
              if (!line.startsWith('DIAL')) return;
              if (mine === 0) c.destroy();
              else stream.reply('OK 127.0.0.1');
            },
          });
        })();
      }),
    );
    cleanup.push(() => fake.close());
    const link = new HopLink(
      { host: '127.0.0.1', port: fake.port },
      { fingerprints: () => [ID.fingerprint], secrets: () => [SECRET], warm: 1 },
    );
    cleanup.push(() => link.close());
    link.fill();
    await sleep(300); // the first (doomed) connection is ready
    const out = await link.dial(request('127.0.0.1', 9));
    expect(out !== null && out !== 'retry' && out.ok).toBe(true);
    if (out && out !== 'retry' && out.ok) out.socket.destroy();
  });

  it('a tunnel waiting on an exit that stopped answering goes elsewhere when the entry gives up on it', async () => {
    // An exit that authenticates and then never answers a DIAL (a hung process).
    const fake = await listening(
      tls.createServer({ key: ID.key, cert: ID.cert, minVersion: 'TLSv1.3', ALPNProtocols: [ALPN] }, (c) => {
        c.on('error', () => {});
        c.once('data', () => c.write('OK\n'));
      }),
    );
    cleanup.push(() => fake.close());
    const opts = { fingerprints: () => [ID.fingerprint], secrets: () => [SECRET] };
    const link = new HopLink({ host: '127.0.0.1', port: fake.port }, { ...opts, warm: 3 });
    cleanup.push(() => link.close());
    link.fill();
    await sleep(300); // ready connections to it (authenticated: it answers that much)
    const pending = link.dial(request('127.0.0.1', 9));
    await sleep(300);
    const t0 = Date.now();
    link.abortWaiting(); // what the directory does when the exit fails its probes
    // Not tried again on another of its ready connections (that wait would have no end but the 30 s cap).
    expect(await pending).toBe('retry');
    expect(Date.now() - t0).toBeLessThan(patient(1_000));
    // Nor by the next tunnel, until a probe answers.
    const t1 = Date.now();
    expect(await link.dial(request('127.0.0.1', 9))).toBe('retry');
    expect(Date.now() - t1).toBeLessThan(patient(500));

    // An exit that leaves the registry (its heartbeat went stale first) releases its waiting tunnels too.
    const other = new HopLink({ host: '127.0.0.1', port: fake.port }, { ...opts, warm: 1 });
    const waiting = other.dial(request('127.0.0.1', 9));
    await sleep(300);
    const t2 = Date.now();
    other.close();
    expect(await waiting).toBe('retry');
    expect(Date.now() - t2).toBeLessThan(patient(1_000));
  });
});
