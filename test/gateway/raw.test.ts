// Raw-socket tests of the gateway: split and coalesced handshakes, early data, half-close,
// PROXY headers, timeouts and limits, SOCKS reply codes, the target policy, socket release.
import http from 'node:http';
import net from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { AdmitResult, Admitter, PlanLimits } from '../../src/gateway/types.js';
import {
  RawClient,
  basic,
  eventually,
  sleep,
  socketsInState,
  startBlackhole,
  startTcpEcho,
  startTestGateway,
  type TestGateway,
} from './helpers.js';
import { freePort } from '../helpers/net.js';
import { TargetRuleSet } from '../../src/gateway/dial/target-rules.js';
import { patient } from '../helpers/patience.js';

const AUTH = basic('alice', 's3cret:pw');
let echo: Awaited<ReturnType<typeof startTcpEcho>>;
let t: TestGateway;

beforeAll(async () => {
  echo = await startTcpEcho();
  t = await startTestGateway({
    egressAddress: '127.0.0.2',
    limits: { headerTimeoutMs: 5000, idleTimeoutMs: 5000, maxHeaderBytes: 2048, maxConnectionsPerAccount: 50 },
  });
});
afterAll(async () => {
  await t.gw.close(100);
  echo.server.close();
});

function socksGreetingAuth(user = 'alice', pass = 's3cret:pw'): Buffer {
  const u = Buffer.from(user);
  const p = Buffer.from(pass);
  return Buffer.concat([Buffer.from([5, 1, 2]), Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]);
}

function socksConnectV4(host: string, port: number): Buffer {
  return Buffer.from([5, 1, 0, 1, ...host.split('.').map(Number), port >> 8, port & 0xff]);
}

function socksConnectDomain(host: string, port: number, cmd = 1): Buffer {
  const h = Buffer.from(host);
  return Buffer.concat([Buffer.from([5, cmd, 0, 3, h.length]), h, Buffer.from([port >> 8, port & 0xff])]);
}

async function socksOpen(c: RawClient, request: Buffer): Promise<Buffer> {
  c.write(socksGreetingAuth());
  expect([...(await c.read(2))]).toEqual([5, 2]);
  expect([...(await c.read(2))]).toEqual([1, 0]);
  c.write(request);
  return c.read(10);
}

describe('HTTP CONNECT framing', () => {
  it('accepts a head split byte by byte, and passes bytes sent with the head into the tunnel', async () => {
    const c = await RawClient.connect(t.httpPort);
    const head = `CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nHost: 127.0.0.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`;
    for (const ch of head.slice(0, -1)) {
      c.write(ch);
      await sleep(1);
    }
    c.write(head.slice(-1) + 'EARLY-DATA');
    expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 Connection established\r\nVia: 1\.1 proxyd\r\nProxy-Status: proxyd\r\nX-Request-Id: [0-9a-f]{12}-[0-9a-z]{6,}\r\n\r\n$/);
    expect((await c.read(10)).toString()).toBe('EARLY-DATA');
    c.socket.end();
    await c.readToEnd();
  });

  it('half-close: the client FIN reaches the target, whose reply still arrives', async () => {
    // Target: reads until FIN, then answers with the byte count and closes.
    const srv = net.createServer({ allowHalfOpen: true }, (s) => {
      let n = 0;
      s.on('data', (d: Buffer) => (n += d.length));
      s.on('end', () => setTimeout(() => s.end(`got ${n} bytes`), 50));
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as net.AddressInfo).port;

    const c = await RawClient.connect(t.httpPort);
    c.write(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\nabc`);
    c.socket.end('defg'); // FIN right away, possibly before the tunnel exists
    expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    expect((await c.readToEnd()).toString()).toBe('got 7 bytes');

    const s = await RawClient.connect(t.socksPort);
    expect((await socksOpen(s, socksConnectV4('127.0.0.1', port)))[1]).toBe(0);
    s.write('12345');
    s.socket.end();
    expect((await s.readToEnd()).toString()).toBe('got 5 bytes');
    srv.close();
  });

  it('a reset on either side ends the whole tunnel', async () => {
    const held = new Set<net.Socket>();
    const srv = net.createServer((s) => {
      held.add(s);
      s.on('error', () => {});
      s.on('close', () => held.delete(s));
      s.on('data', (d) => {
        if (d.toString() === 'reset-please') s.resetAndDestroy();
      });
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as net.AddressInfo).port;
    // Target resets: the client side closes.
    const a = await RawClient.connect(t.httpPort);
    a.write(`CONNECT 127.0.0.1:${port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\nreset-please`);
    await a.readUntil('\r\n\r\n');
    await a.waitClosed();
    // Client resets: the target's socket closes.
    const b = await RawClient.connect(t.socksPort);
    expect((await socksOpen(b, socksConnectV4('127.0.0.1', port)))[1]).toBe(0);
    await eventually(() => held.size === 1);
    b.socket.resetAndDestroy();
    await eventually(() => held.size === 0);
    srv.close();
  });

  it('rejects malformed heads with 400 and oversize heads with 431', async () => {
    const a = await RawClient.connect(t.httpPort);
    a.write('CONNECT  bad\r\n\r\n');
    expect((await a.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 400 /);
    const b = await RawClient.connect(t.httpPort);
    b.write(`GET http://127.0.0.1/ HTTP/1.1\r\nX: ${'a'.repeat(3000)}\r\n\r\n`);
    expect((await b.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 431 /);
    const c = await RawClient.connect(t.httpPort);
    c.write(`CONNECT 127.0.0.1:${echo.port} HTTP/2.0\r\n\r\n`);
    expect((await c.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 505 /);
    const d = await RawClient.connect(t.httpPort);
    d.write(`POST http://127.0.0.1:${echo.port}/ HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n`);
    expect((await d.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 400 /);
    const e = await RawClient.connect(t.httpPort);
    e.write(`GET /origin-form HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect((await e.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 400 /);
  });

  it('a SOCKS5 greeting or a TLS ClientHello on the HTTP port gets its 400 at once, not at the header deadline', async () => {
    // t's header timeout is 5 s: an answer within one second is the early one.
    for (const first of [Buffer.from([5, 1, 2]), Buffer.from([0x16, 3, 1, 0, 0xc8, 1])]) {
      const c = await RawClient.connect(t.httpPort);
      const t0 = Date.now();
      c.write(first);
      expect((await c.readToEnd()).toString('latin1')).toMatch(/^HTTP\/1\.1 400 /);
      expect(Date.now() - t0).toBeLessThan(patient(1000));
    }
    // A head arriving byte by byte still waits for its end.
    const slow = await RawClient.connect(t.httpPort);
    slow.write('C');
    await sleep(200);
    slow.write(`ONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect(await slow.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    slow.socket.destroy();
  });

  it('closes a slow head after the header timeout (slowloris)', async () => {
    const g = await startTestGateway({ limits: { headerTimeoutMs: 400 } });
    const c = await RawClient.connect(g.httpPort);
    const started = Date.now();
    c.write('CONNECT 127.0.0.1:1 HTTP/1.1\r\n');
    const drip = setInterval(() => c.socket.writable && c.write('X'), 50);
    await c.waitClosed(3000);
    clearInterval(drip);
    expect(Date.now() - started).toBeLessThan(patient(1500));
    // Same for a SOCKS5 handshake that stops half-way.
    const s = await RawClient.connect(g.socksPort);
    s.write(Buffer.from([5, 2, 0]));
    await s.waitClosed(3000);
    await g.gw.close(100);
  });
});

describe('SOCKS5 framing', () => {
  it('accepts the handshake byte by byte', async () => {
    const c = await RawClient.connect(t.socksPort);
    const all = [socksGreetingAuth(), socksConnectV4('127.0.0.1', echo.port)];
    let i = 0;
    for (const part of all) {
      for (const b of part) {
        c.write(Buffer.from([b]));
        await sleep(1);
      }
      if (i++ === 0) expect([...(await c.read(4))]).toEqual([5, 2, 1, 0]);
    }
    const reply = await c.read(10);
    expect(reply[1]).toBe(0);
    expect(reply[3]).toBe(1);
    expect([...reply.subarray(4, 8)]).toEqual([127, 0, 0, 2]); // bound address = egress
    c.write('ping');
    expect((await c.read(4)).toString()).toBe('ping');
    c.socket.destroy();
  });

  it('a greeting that offers no method is answered 0xFF (no acceptable method), then closed', async () => {
    const c = await RawClient.connect(t.socksPort);
    c.write(Buffer.from([5, 0]));
    expect([...(await c.readToEnd())]).toEqual([5, 0xff]);
  });

  it('accepts greeting, auth, request and data in one packet without losing a byte', async () => {
    const c = await RawClient.connect(t.socksPort);
    c.write(Buffer.concat([socksGreetingAuth(), socksConnectDomain('localhost', echo.port), Buffer.from('optimistic')]));
    expect([...(await c.read(4))]).toEqual([5, 2, 1, 0]);
    expect((await c.read(10))[1]).toBe(0);
    expect((await c.read(10)).toString()).toBe('optimistic');
    c.socket.destroy();
  });

  it("an IPv6 address is one target however it comes: SOCKS5's address type, an IP literal sent as a name, an HTTP authority", async () => {
    const g = await startTestGateway();
    const srv = await startTcpEcho('::1').catch(() => null);
    if (!srv) return; // no IPv6 loopback here
    const p = srv.port;
    const viaSocks = async (req: Buffer) => {
      const c = await RawClient.connect(g.socksPort);
      const reply = await socksOpen(c, req);
      c.socket.destroy();
      return reply[1];
    };
    // Address type 4, and `::1` / `0:0::1` sent as names (they were refused as malformed names, 0x04).
    expect(await viaSocks(Buffer.from([5, 1, 0, 4, ...new Array(15).fill(0), 1, p >> 8, p & 0xff]))).toBe(0);
    for (const name of ['::1', '0:0::1']) expect(await viaSocks(Buffer.concat([Buffer.from([5, 1, 0, 3, name.length]), Buffer.from(name), Buffer.from([p >> 8, p & 0xff])])), name).toBe(0);
    const h = await RawClient.connect(g.httpPort);
    h.write(`CONNECT [0:0:0:0:0:0:0:1]:${p} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect(await h.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    h.socket.destroy();
    await eventually(() => g.gw.stats().connectionsOpen === 0);
    // One domain row for the four, under RFC 5952's spelling.
    const rows = g.gw.collectUsage().filter((r) => r.connections > 0);
    expect(rows.map((r) => [r.target, r.connections])).toEqual([['::1', 4]]);
    srv.server.close();
    await g.gw.close(100);
  });

  it('IPv6 address type (gateway without an IPv4 egress)', async () => {
    const g = await startTestGateway();
    const srv = await startTcpEcho('::1').catch(() => null);
    if (!srv) return; // no IPv6 loopback here
    const c = await RawClient.connect(g.socksPort);
    const req = Buffer.from([5, 1, 0, 4, ...new Array(15).fill(0), 1, srv.port >> 8, srv.port & 0xff]);
    const reply = await socksOpen(c, req);
    expect(reply[1]).toBe(0);
    expect(reply[3]).toBe(4);
    await c.read(12); // rest of the IPv6 bound address
    c.write('v6');
    expect((await c.read(2)).toString()).toBe('v6');
    c.socket.destroy();
    srv.server.close();
    await g.gw.close(100);
  });

  it('answers BIND 0x07 (UDP ASSOCIATE is served: test/gateway/udp.test.ts), an unknown address type 0x08, and closes on a bad version', async () => {
    const c = await RawClient.connect(t.socksPort);
    expect((await socksOpen(c, socksConnectDomain('localhost', echo.port, 2)))[1]).toBe(7);
    await c.waitClosed();
    const d = await RawClient.connect(t.socksPort);
    expect((await socksOpen(d, Buffer.from([5, 1, 0, 9, 1, 2, 3, 4, 0, 80])))[1]).toBe(8);
    const e = await RawClient.connect(t.socksPort);
    e.write(Buffer.from([4, 1, 0, 80, 127, 0, 0, 1, 0]));
    expect((await e.readToEnd()).length).toBe(0);
    const f = await RawClient.connect(t.socksPort);
    f.write(Buffer.from([5, 1, 2, 2, 5, 'alice'.charCodeAt(0)]));
    f.write(Buffer.from('lice'));
    expect([...(await f.read(2))]).toEqual([5, 2]);
    expect([...(await f.readToEnd())]).toEqual([1, 1]); // RFC 1929 version must be 1
  });

  it('0x02 for refused targets and 0x05 for refused connections', async () => {
    const g = await startTestGateway({ allowPrivateTargets: false });
    const c = await RawClient.connect(g.socksPort);
    expect((await socksOpen(c, socksConnectV4('10.1.2.3', 80)))[1]).toBe(2);
    const d = await RawClient.connect(g.socksPort);
    // IPv4-mapped IPv6 loopback: still loopback.
    const mapped = Buffer.from([5, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1, 0, 80]);
    expect((await socksOpen(d, mapped))[1]).toBe(2);
    await g.gw.close(100);
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const e = await RawClient.connect(t.socksPort);
    expect((await socksOpen(e, socksConnectV4('127.0.0.1', port)))[1]).toBe(5);
  });
});

describe('forward path details', () => {
  it('passes 100 Continue through, then the final response with Connection: close', async () => {
    const srv = http.createServer((req, res) => {
      let n = 0;
      req.on('data', (d: Buffer) => (n += d.length));
      req.on('end', () => res.end(`got ${n}`));
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as net.AddressInfo).port;
    const c = await RawClient.connect(t.httpPort);
    c.write(
      `PUT http://127.0.0.1:${port}/up HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${AUTH}\r\n` +
        'Expect: 100-continue\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\n',
    );
    expect(await c.readUntil('\r\n\r\n')).toBe('HTTP/1.1 100 Continue\r\n\r\n');
    c.write('12345');
    const res = (await c.readToEnd()).toString();
    expect(res).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(res).toContain('\r\nConnection: close\r\n');
    expect(res).not.toMatch(/keep-alive/i);
    expect(res.endsWith('got 5')).toBe(true);
    srv.close();
  });

  it("a refused head's details say what is wrong: too large, the version, credentials in the URL, no host, a bad port", async () => {
    const cases: Array<[string, RegExp]> = [
      [`GET http://127.0.0.1:${echo.port}/ HTTP/1.1\r\nX-Pad: ${'p'.repeat(4000)}\r\n\r\n`, /^HTTP\/1\.1 431 [^]*details="request head too large"/],
      [`GET http://127.0.0.1:${echo.port}/ HTTP/2.0\r\n\r\n`, /^HTTP\/1\.1 505 [^]*details="HTTP version not supported \(1\.0 and 1\.1 are\)"/],
      [`GET http://u:pw@127.0.0.1:${echo.port}/ HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`, /^HTTP\/1\.1 400 [^]*details="credentials in the URL are not accepted/],
      [`GET http:///x HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`, /^HTTP\/1\.1 400 [^]*details="the URL has no host"/],
      [`GET http://127.0.0.1:99999/ HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`, /^HTTP\/1\.1 400 [^]*details="the URL's host or port is not valid"/],
    ];
    for (const [req, want] of cases) {
      const c = await RawClient.connect(t.httpPort);
      c.write(req);
      expect((await c.readToEnd()).toString(), req.slice(0, 40)).toMatch(want);
    }
  });

  it('more than four empty lines before the request line are a malformed head, however they arrive', async () => {
    const c = await RawClient.connect(t.httpPort);
    for (let i = 0; i < 5; i++) {
      c.write('\r\n');
      await sleep(10);
    }
    c.write(`GET http://127.0.0.1:${echo.port}/ HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect((await c.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 400 /);
  });

  it('a response with chunked framing and a Content-Length reaches the client without the Content-Length', async () => {
    const srv = net.createServer((s) => s.once('data', () => s.end('HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n')));
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const c = await RawClient.connect(t.httpPort);
    c.write(`GET http://127.0.0.1:${(srv.address() as net.AddressInfo).port}/ HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    const res = (await c.readToEnd(3000)).toString();
    expect(res).toMatch(/\r\nTransfer-Encoding: chunked\r\n/);
    expect(res).not.toMatch(/content-length/i);
    expect(res.endsWith('2\r\nok\r\n0\r\n\r\n')).toBe(true);
    srv.close();
  });

  it('empty lines before the request line are ignored (RFC 9112 2.2), also when they arrive apart', async () => {
    const srv = http.createServer((_req, res) => res.end('fine'));
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as net.AddressInfo).port;
    const c = await RawClient.connect(t.httpPort);
    c.write('\r');
    await sleep(20);
    c.write('\n\r\n');
    await sleep(20);
    c.write(`GET http://127.0.0.1:${port}/ HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    const res = (await c.readToEnd()).toString();
    expect(res).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(res.endsWith('fine')).toBe(true);
    srv.close();
  });

  it('does not forward a second, pipelined request', async () => {
    const seen: string[] = [];
    const srv = http.createServer((req, res) => {
      seen.push(req.url ?? '');
      res.end('one');
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as net.AddressInfo).port;
    const c = await RawClient.connect(t.httpPort);
    c.write(
      `GET http://127.0.0.1:${port}/a HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n` +
        `GET http://127.0.0.1:${port}/b HTTP/1.1\r\n\r\n`,
    );
    const res = (await c.readToEnd()).toString();
    expect(res.endsWith('one')).toBe(true);
    expect(seen).toEqual(['/a']);
    srv.close();
  });
});

describe('forward path: a response head that trickles in', () => {
  it('is looked through once, not again from its start at every chunk (an origin sending a long head in small pieces costs the gateway linear work)', async () => {
    const g = await startTestGateway();
    const LINES = 3000;
    const head = `HTTP/1.1 200 OK\r\n${'a: b\n'.repeat(LINES)}Content-Length: 2\r\n\r\nok`;
    let writes = 0;
    const origin = net.createServer((s) => {
      s.on('error', () => {});
      s.once('data', async () => {
        s.setNoDelay(true);
        // In pieces of 8 bytes, a turn apart: hundreds of chunks reach the gateway.
        for (let i = 0; i < head.length && !s.destroyed; i += 8) {
          s.write(head.slice(i, i + 8));
          writes++;
          await new Promise((r) => setImmediate(r));
        }
      });
    });
    await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
    const spy = vi.spyOn(Buffer.prototype, 'indexOf');
    try {
      const c = await RawClient.connect(g.httpPort);
      c.write(`GET http://127.0.0.1:${(origin.address() as net.AddressInfo).port}/ HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
      const res = (await c.readToEnd(20_000)).toString('latin1');
      expect(res).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      expect(res.endsWith('\r\n\r\nok')).toBe(true);
      // Linear: about one search per line break and per chunk. Searching the whole head again at each chunk
      // made it hundreds of thousands (LINES line breaks times the chunks).
      expect(spy.mock.calls.length).toBeLessThan(10 * (LINES + writes));
    } finally {
      spy.mockRestore();
      origin.close();
      await g.gw.close(100);
    }
  }, patient(30_000));
});

describe('forward path: the exchange ends with the response', () => {
  /** An origin that answers each request with `reply` and then keeps its socket open (never closes it). */
  async function stubbornOrigin(reply: string) {
    const sockets: net.Socket[] = [];
    const srv = net.createServer((s) => {
      sockets.push(s);
      s.once('data', () => s.write(reply));
      s.on('error', () => {});
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    return { port: (srv.address() as net.AddressInfo).port, close: () => (sockets.forEach((s) => s.destroy()), srv.close()) };
  }

  it('an origin that keeps its socket open after a complete response (Content-Length, chunked, 204, HEAD) holds nothing: the client gets the response and EOF, the slot comes back', async () => {
    const g = await startTestGateway({ limits: { idleTimeoutMs: 60_000, maxConnectionsPerAccount: 1 } });
    const cases: Array<[string, string, string]> = [
      ['GET', 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA', 'ok'],
      ['GET', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\nEXTRA', '2\r\nok\r\n0\r\n\r\n'],
      ['GET', 'HTTP/1.1 204 No Content\r\n\r\n', ''],
      ['HEAD', 'HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n', ''],
      // 1xx first, then the final response in the same write.
      ['GET', 'HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcZZ', 'abc'],
    ];
    try {
      for (const [method, reply, body] of cases) {
        const origin = await stubbornOrigin(reply);
        // One connection per account: a second exchange goes through only once the first gave its slot back.
        for (let i = 0; i < 2; i++) {
          const c = await RawClient.connect(g.httpPort);
          c.write(`${method} http://127.0.0.1:${origin.port}/ HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
          const res = (await c.readToEnd(3000)).toString();
          expect(res, `${method} ${reply}`).toMatch(/^HTTP\/1\.1 (200|204|103) /);
          expect(res).toMatch(/(^|\r\n\r\n)HTTP\/1\.1 (200|204) [^]*Connection: close\r\n/);
          expect(res.slice(res.lastIndexOf('\r\n\r\n', res.length - body.length) + 4), reply).toBe(body);
          c.socket.destroy();
          await eventually(() => g.gw.stats().connectionsOpen === 0, 3000);
        }
        origin.close();
      }
    } finally {
      await g.gw.close(100);
    }
  });

  it('a chunked response the scanner does not take is still relayed as it comes, to the origin\'s close', async () => {
    const sloppy = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nok\n0\n\n';
    const srv = net.createServer((s) => s.once('data', () => s.end(sloppy)));
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const c = await RawClient.connect(t.httpPort);
    c.write(`GET http://127.0.0.1:${(srv.address() as net.AddressInfo).port}/ HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    const res = (await c.readToEnd(3000)).toString();
    expect(res.endsWith('\r\n\r\n2\nok\n0\n\n')).toBe(true);
    srv.close();
  });

  it('an origin that resets mid-body: the client gets a reset, not a clean end (a body to the close is not taken as whole)', async () => {
    const srv = net.createServer((s) => s.once('data', () => {
      s.write(`HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n${'q'.repeat(3000)}`);
      setTimeout(() => s.resetAndDestroy(), 100);
    }));
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const c = await RawClient.connect(t.httpPort);
    const reset = new Promise<string>((resolve) => {
      c.socket.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
      c.socket.on('end', () => resolve('end'));
    });
    c.write(`GET http://127.0.0.1:${(srv.address() as net.AddressInfo).port}/ HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect(await reset).toBe('ECONNRESET');
    srv.close();
  });

  it('a Connection header naming the framing: the request is refused (400), the response keeps its framing', async () => {
    const got: string[] = [];
    const srv = net.createServer((s) => s.once('data', (d) => {
      got.push(d.toString('latin1'));
      s.end('HTTP/1.1 200 OK\r\nConnection: transfer-encoding\r\nTransfer-Encoding: chunked\r\nTrailer: X-A\r\n\r\n4\r\nabcd\r\n0\r\nX-A: 1\r\n\r\n');
    }));
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as net.AddressInfo).port;
    const smuggle = await RawClient.connect(t.httpPort);
    smuggle.write(`POST http://127.0.0.1:${port}/ HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\nConnection: content-length\r\nContent-Length: 5\r\n\r\nhello`);
    expect((await smuggle.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 400 [^]*details="Connection names a framing header"/);
    expect(got).toEqual([]);
    const c = await RawClient.connect(t.httpPort);
    c.write(`GET http://127.0.0.1:${port}/ HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    const res = (await c.readToEnd(3000)).toString();
    expect(res).toMatch(/\r\nTransfer-Encoding: chunked\r\n/);
    expect(res).toMatch(/\r\nTrailer: X-A\r\n/);
    expect(res.endsWith('\r\n\r\n4\r\nabcd\r\n0\r\nX-A: 1\r\n\r\n')).toBe(true);
    srv.close();
  });

  it('meters the request as the client sent it (its own head, not the rewritten one) and the response as the client got it', async () => {
    const g = await startTestGateway();
    const origin = await stubbornOrigin('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello');
    try {
      // Two empty lines first (ignored, but sent: counted).
      const req = `\r\n\r\nPOST http://127.0.0.1:${origin.port}/x HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\nProxy-Connection: keep-alive\r\nX-Pad: ${'p'.repeat(500)}\r\nContent-Length: 3\r\n\r\nabc`;
      const c = await RawClient.connect(g.httpPort);
      c.write(req);
      const res = await c.readToEnd(3000);
      await eventually(() => g.gw.stats().connectionsOpen === 0, 3000);
      const u = g.usage.of(1);
      expect({ up: u.up, down: u.down }).toEqual({ up: Buffer.byteLength(req), down: res.length });
    } finally {
      origin.close();
      await g.gw.close(100);
    }
  });
});

describe('junk on the wire', () => {
  it('random bytes never crash a listener; every connection is released', async () => {
    const g = await startTestGateway({ limits: { headerTimeoutMs: 150 }, proxyProtocolFrom: ['127.0.0.1'] });
    const prefixes = [Buffer.alloc(0), Buffer.from([5]), Buffer.from([5, 1, 0]), Buffer.from('CONNECT '), Buffer.from('PROXY '), Buffer.from('0d0a0d0a000d0a515549540a21', 'hex')];
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 200 }), fc.nat(prefixes.length - 1), fc.boolean(), async (bytes, p, socks) => {
        const c = await RawClient.connect(socks ? g.socksPort : g.httpPort);
        c.write(Buffer.concat([prefixes[p] as Buffer, Buffer.from(bytes)]));
        await c.waitClosed(3000);
        c.socket.destroy();
      }),
      { numRuns: 40 },
    );
    await eventually(() => g.gw.stats().connectionsOpen === 0, 3000);
    await g.gw.close(100);
  });
});

describe('connect timeout', () => {
  it('504 for CONNECT and absolute-form, 0x06 for SOCKS5', async () => {
    const hole = await startBlackhole();
    const g = await startTestGateway({ limits: { connectTimeoutMs: 300 } });
    try {
      const c = await RawClient.connect(g.httpPort);
      c.write(`CONNECT 127.0.0.1:${hole.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
      expect((await c.readToEnd(3000)).toString()).toMatch(/^HTTP\/1\.1 504 /);
      const f = await RawClient.connect(g.httpPort);
      f.write(`GET http://127.0.0.1:${hole.port}/ HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
      expect((await f.readToEnd(3000)).toString()).toMatch(/^HTTP\/1\.1 504 /);
      const s = await RawClient.connect(g.socksPort);
      expect((await socksOpen(s, socksConnectV4('127.0.0.1', hole.port)))[1]).toBe(6);
    } finally {
      hole.stop();
      await g.gw.close(100);
    }
  });
});

describe('target policy', () => {
  it('refuses private, reserved and own-listener targets; resolves names before checking', async () => {
    const lookup = async (host: string): Promise<Array<{ address: string; family: 4 | 6 }>> =>
      host === 'rebind.example' ? [{ address: '127.0.0.1', family: 4 }] : [{ address: '192.168.1.1', family: 4 }];
    const g = await startTestGateway({ allowPrivateTargets: false, lookup, ownListeners: () => [{ host: '127.0.0.1', port: 8080 }] });
    const targets = [
      '127.0.0.1:80', '10.0.0.1:80', '172.16.0.1:443', '192.168.0.1:80', '169.254.169.254:80', '100.64.0.1:80',
      '224.0.0.1:80', '240.0.0.1:80', '0.0.0.0:80', '[::1]:80', '[::ffff:127.0.0.1]:80', '[fe80::1]:80', '[fc00::1]:80',
      'rebind.example:80', 'internal.example:443', '2130706433:80',
    ];
    for (const target of targets) {
      const c = await RawClient.connect(g.httpPort);
      c.write(`CONNECT ${target} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
      const res = (await c.readToEnd()).toString();
      expect(res, target).toMatch(/^HTTP\/1\.1 (403|502) /);
    }
    await g.gw.close(100);

    // With private targets allowed, the daemon's and the gateway's own listeners stay refused.
    const h = await startTestGateway({ ownListeners: () => [{ host: '127.0.0.1', port: echo.port }] });
    for (const target of [`127.0.0.1:${echo.port}`, `0.0.0.0:${echo.port}`, `127.0.0.1:${h.httpPort}`, `localhost:${h.socksPort}`]) {
      const c = await RawClient.connect(h.httpPort);
      c.write(`CONNECT ${target} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
      expect((await c.readToEnd()).toString(), target).toMatch(/^HTTP\/1\.1 403 /);
    }
    expect(h.gw.stats().targetRefusals.own_listener).toBe(4);
    await h.gw.close(100);
  });
});

describe('PROXY protocol', () => {
  it('v1 from a trusted peer sets the admission source; also fine without a header', async () => {
    const g = await startTestGateway({ proxyProtocolFrom: ['127.0.0.1'] });
    g.admission.whitelist.set('203.0.113.50', 9);
    const c = await RawClient.connect(g.httpPort);
    c.write(`PROXY TCP4 203.0.113.50 127.0.0.1 40000 ${g.httpPort}\r\nCONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\n\r\nhi`);
    expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    expect((await c.read(2)).toString()).toBe('hi');
    c.socket.destroy();
    const d = await RawClient.connect(g.httpPort);
    d.write(`PROXY TCP4 203.0.113.51 127.0.0.1 40000 ${g.httpPort}\r\nCONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\n\r\n`);
    expect((await d.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 407 /);
    const e = await RawClient.connect(g.httpPort);
    e.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect(await e.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    e.socket.destroy();
    // A malformed header from a trusted peer: closed, no reply.
    const f = await RawClient.connect(g.httpPort);
    f.write('PROXY TCP4 999.0.0.1 127.0.0.1 1 2\r\n');
    expect((await f.readToEnd()).length).toBe(0);
    await g.gw.close(100);
  });

  it('v2 before SOCKS5; a header from an untrusted peer closes the connection', async () => {
    const g = await startTestGateway({ proxyProtocolFrom: ['127.0.0.1/32'] });
    g.admission.whitelist.set('198.51.100.20', 3);
    const hdr = Buffer.concat([
      Buffer.from('0d0a0d0a000d0a515549540a', 'hex'),
      Buffer.from([0x21, 0x11, 0, 12, 198, 51, 100, 20, 127, 0, 0, 1, 0x9c, 0x40, 0x04, 0x38]),
    ]);
    const c = await RawClient.connect(g.socksPort);
    for (const b of Buffer.concat([hdr, Buffer.from([5, 1, 0])])) c.write(Buffer.from([b]));
    expect([...(await c.read(2))]).toEqual([5, 0]);
    c.write(socksConnectV4('127.0.0.1', echo.port));
    expect((await c.read(10))[1]).toBe(0);
    c.socket.destroy();
    await g.gw.close(100);

    const u = await RawClient.connect(t.socksPort); // t trusts nobody
    u.write(Buffer.concat([hdr, Buffer.from([5, 1, 0])]));
    expect((await u.readToEnd()).length).toBe(0);
  });
});

describe('limits and accounting', () => {
  it('idle tunnels are closed after the idle timeout', async () => {
    const g = await startTestGateway({ limits: { idleTimeoutMs: 300 } });
    const c = await RawClient.connect(g.httpPort);
    c.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    await c.readUntil('\r\n\r\n');
    const started = Date.now();
    await c.waitClosed(3000);
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    await g.gw.close(100);
  });

  it('caps connections per account (429) and in total (503)', async () => {
    const g = await startTestGateway({ limits: { maxConnectionsPerAccount: 2, maxConnectionsTotal: 4 } });
    const open: RawClient[] = [];
    for (let i = 0; i < 2; i++) {
      const c = await RawClient.connect(g.httpPort);
      c.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
      await c.readUntil('\r\n\r\n');
      open.push(c);
    }
    const third = await RawClient.connect(g.httpPort);
    third.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect((await third.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 429 /);
    const s = await RawClient.connect(g.socksPort);
    expect((await socksOpen(s, socksConnectV4('127.0.0.1', echo.port)))[1]).toBe(2); // handshake ok, CONNECT refused 0x02
    s.socket.destroy();
    open[0]?.socket.destroy();
    await eventually(() => g.gw.stats().connectionsOpen === 1);
    const again = await RawClient.connect(g.httpPort);
    again.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect(await again.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    open.push(again);
    // Total: two idle handshakes fill it up.
    const idle = [await RawClient.connect(g.httpPort), await RawClient.connect(g.httpPort)];
    await eventually(() => g.gw.stats().connectionsOpen === 4);
    const over = await RawClient.connect(g.httpPort);
    expect((await over.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 503 /);
    for (const c of [...open, ...idle]) c.socket.destroy();
    await g.gw.close(100);
  });

  it('caps connections not yet admitted from one source: its idle or junk connections cannot fill the total and lock everyone out', async () => {
    const g = await startTestGateway({ limits: { maxHandshakesPerSource: 3, maxConnectionsTotal: 100 } });
    // One source opens connections and never sends a head: past its 3 the next is refused at once, on either port.
    const idle = [await RawClient.connect(g.httpPort), await RawClient.connect(g.socksPort), await RawClient.connect(g.httpPort)];
    await eventually(() => g.gw.stats().connectionsOpen === 3);
    const over = await RawClient.connect(g.httpPort);
    expect((await over.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 503 /);
    const overSocks = await RawClient.connect(g.socksPort);
    expect((await overSocks.readToEnd()).length).toBe(0);
    // Another source is served meanwhile.
    const other = await RawClient.connect(g.httpPort, '127.0.0.1', '127.0.0.3');
    other.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect(await other.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    // A handshake that completes leaves the count: the source may open another.
    idle[0]!.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect(await idle[0]!.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    const next = await RawClient.connect(g.httpPort);
    next.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect(await next.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    // Refused connections the client keeps open (junk answered 400, lingering) count until they close.
    idle[1]!.socket.destroy();
    idle[2]!.socket.destroy();
    await eventually(() => g.gw.stats().connectionsOpen === 3); // the three admitted
    const junk = [await RawClient.connect(g.httpPort), await RawClient.connect(g.httpPort), await RawClient.connect(g.httpPort)];
    for (const c of junk) {
      c.write('garbage\r\n\r\n');
      expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 400 /);
    }
    const overJunk = await RawClient.connect(g.httpPort);
    expect((await overJunk.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 503 /);
    for (const c of [...idle, other, next, ...junk]) c.socket.destroy();
    await g.gw.close(100);
    // A trusted PROXY peer (a load balancer) carries many clients: its connections are not counted.
    const lb = await startTestGateway({ limits: { maxHandshakesPerSource: 2 }, proxyProtocolFrom: ['127.0.0.1'] });
    const many = await Promise.all(Array.from({ length: 4 }, () => RawClient.connect(lb.httpPort)));
    await eventually(() => lb.gw.stats().connectionsOpen === 4);
    many[3]!.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect(await many[3]!.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    for (const c of many) c.socket.destroy();
    await lb.gw.close(100);
  });

  it('a SOCKS5 refusal deferred to the request (the account at its cap: auth answered OK) still counts for its source', async () => {
    const g = await startTestGateway({ limits: { maxHandshakesPerSource: 2, maxConnectionsPerAccount: 1, maxConnectionsTotal: 100 } });
    const u = Buffer.from('alice');
    const pw = Buffer.from('s3cret:pw');
    const greet = Buffer.concat([Buffer.from([5, 1, 2, 1, u.length]), u, Buffer.from([pw.length]), pw]);
    const a = await RawClient.connect(g.socksPort);
    a.write(greet);
    expect([...(await a.read(4))]).toEqual([5, 2, 1, 0]);
    a.write(Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, echo.port >> 8, echo.port & 0xff]));
    expect((await a.read(10))[1]).toBe(0); // admitted: holds the account's one slot
    // Over the cap: auth is answered OK (the refusal comes with the request), and these stay in the source's count.
    const held: RawClient[] = [];
    for (let i = 0; i < 2; i++) {
      const c = await RawClient.connect(g.socksPort);
      c.write(greet);
      expect([...(await c.read(4))]).toEqual([5, 2, 1, 0]);
      held.push(c);
    }
    const over = await RawClient.connect(g.socksPort);
    expect((await over.readToEnd()).length).toBe(0); // past the source's 2: closed at once
    for (const c of [a, ...held, over]) c.socket.destroy();
    await g.gw.close(100);
  });

  it("a refused connection gives its account slot back with the answer, not when the client closes (HTTP and SOCKS5)", async () => {
    const g = await startTestGateway({ limits: { maxConnectionsPerAccount: 1 } });
    const closed = await freePort(); // nothing listens there
    // Refused at the target (502 / 0x05); the client keeps the socket open and reads nothing more.
    const held = await RawClient.connect(g.httpPort);
    held.write(`CONNECT 127.0.0.1:${closed} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect(await held.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 502 /);
    const s = await RawClient.connect(g.socksPort);
    expect((await socksOpen(s, socksConnectV4('127.0.0.1', closed)))[1]).toBe(5);
    // Both refused sockets still open (the linger), yet the account's one slot is free: no 429.
    expect(g.gw.stats().connectionsOpen).toBe(2);
    const next = await RawClient.connect(g.httpPort);
    next.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect(await next.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    // And given back once: with the tunnel open, the account is at its cap after the refused ones close.
    held.socket.destroy();
    s.socket.destroy();
    await eventually(() => g.gw.stats().connectionsOpen === 1);
    const over = await RawClient.connect(g.httpPort);
    over.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect((await over.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 429 /);
    next.socket.destroy();
    await g.gw.close(100);
  });

  it("the gateway's own answers after admission are not connections of the usage, nor their targets domains used (SPEC 11)", async () => {
    const g = await startTestGateway({
      targetRules: { forAccount: () => ({ service: null, account: new TargetRuleSet(['denied.example'], []) }) },
      lookup: async (host: string) => {
        if (host === 'nowhere.example') throw Object.assign(new Error('ENOTFOUND'), { code: 'ENOTFOUND' });
        return [{ address: '127.0.0.1', family: 4 }];
      },
    });
    const closed = await freePort();
    const refusedBy = async (target: string) => {
      const c = await RawClient.connect(g.httpPort);
      c.write(`CONNECT ${target} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
      return (await c.readToEnd()).toString().slice(0, 12);
    };
    expect(await refusedBy('denied.example:443')).toBe('HTTP/1.1 403'); // target rules
    expect(await refusedBy(`nowhere.example:${closed}`)).toBe('HTTP/1.1 502'); // DNS
    expect(await refusedBy(`127.0.0.1:${closed}`)).toBe('HTTP/1.1 502'); // refused dial
    const s = await RawClient.connect(g.socksPort);
    expect((await socksOpen(s, socksConnectV4('127.0.0.1', closed)))[1]).toBe(5);
    s.socket.destroy();
    await eventually(() => g.gw.stats().connectionsOpen === 0);
    const rows = g.gw.collectUsage();
    expect(rows.reduce((n, r) => n + r.connections, 0)).toBe(0);
    expect(rows.filter((r) => r.target !== null)).toEqual([]);
    // A tunnel that reached its target counts, under its target; one that ended before asking for any counts too.
    const ok = await RawClient.connect(g.httpPort);
    ok.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    await ok.readUntil('\r\n\r\n');
    ok.socket.destroy();
    const quiet = await RawClient.connect(g.socksPort);
    quiet.write(socksGreetingAuth());
    await quiet.read(4);
    quiet.socket.destroy();
    await eventually(() => g.gw.stats().connectionsOpen === 0);
    const after = g.gw.collectUsage();
    expect(after.map((r) => [r.target, r.connections]).sort()).toEqual([[null, 1], ['127.0.0.1', 1]]);
    await g.gw.close(100);
  });

  it("an entry refuses its own listeners as targets before any exit is asked (a customer went round through it, every lap metered)", async () => {
    const asked: string[] = [];
    const g = await startTestGateway({ exitDialer: { dial: async (req) => (asked.push(`${req.host}:${req.port}`), { ok: false, failure: 'no_exit' }) } });
    const connect = async (target: string) => {
      const c = await RawClient.connect(g.httpPort);
      c.write(`CONNECT ${target} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
      return (await c.readToEnd()).toString();
    };
    for (const target of [`127.0.0.1:${g.httpPort}`, `localhost:${g.socksPort}`, `[::ffff:127.0.0.1]:${g.httpPort}`, `0.0.0.0:${g.socksPort}`]) {
      const res = await connect(target);
      expect(res, target).toMatch(/^HTTP\/1\.1 403 /);
      expect(res, target).toContain('target is this proxy');
    }
    const s = await RawClient.connect(g.socksPort);
    expect((await socksOpen(s, socksConnectV4('127.0.0.1', g.socksPort)))[1]).toBe(2);
    s.socket.destroy();
    expect(asked).toEqual([]);
    // Anything else is the exit's to resolve and judge.
    expect(await connect(`127.0.0.1:${echo.port}`)).toMatch(/^HTTP\/1\.1 502 /);
    expect(asked).toEqual([`127.0.0.1:${echo.port}`]);
    await g.gw.close(100);
  });

  it('reports per-account bytes and connections to the TrafficSink and stats()', async () => {
    const g = await startTestGateway();
    const c = await RawClient.connect(g.httpPort);
    c.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n0123456789`);
    await c.readUntil('\r\n\r\n');
    await c.read(10);
    c.write('abcde');
    await c.read(5);
    c.socket.end();
    await c.readToEnd();
    await eventually(() => g.gw.stats().connectionsOpen === 0);
    const u = g.usage.of(1);
    expect({ up: u.up, down: u.down, connections: u.connections, subjects: [...u.subjects] }).toEqual({ up: 15, down: 15, connections: 1, subjects: ['user:alice'] });
    const st = g.gw.stats();
    expect(st.connectionsTotal.connect).toBe(1);
    expect(st.bytesUp).toBe(15);
    expect(st.connectionsOpen).toBe(0);
    await g.gw.close(100);
  });

  it('an admission that throws gives 503, never a crash or an open door', async () => {
    const g = await startTestGateway();
    g.admission.admitByCredentials = async () => {
      throw new Error('db down');
    };
    const c = await RawClient.connect(g.httpPort);
    c.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect((await c.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 503 /);
    await g.gw.close(100);
  });

  it('an admission that throws at once (not a rejection) gives 503 and SOCKS5 a refusal; the gateway serves on', async () => {
    const g = await startTestGateway();
    const answer = g.admission.admitByCredentials.bind(g.admission);
    g.admission.admitByCredentials = () => {
      throw new Error('view stale');
    };
    const c = await RawClient.connect(g.httpPort);
    c.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect((await c.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 503 /);
    const s = await RawClient.connect(g.socksPort);
    s.write(Buffer.concat([socksGreetingAuth(), socksConnectV4('127.0.0.1', echo.port)]));
    const reply = await s.readToEnd();
    expect([...reply.subarray(0, 2)]).toEqual([5, 2]);
    expect(reply.length === 4 ? reply[3] : reply[5], 'refused, not admitted').not.toBe(0);
    g.admission.admitByCredentials = answer;
    const ok = await RawClient.connect(g.httpPort);
    ok.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect(await ok.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    ok.socket.destroy();
    await g.gw.close(100);
  });

  it('an admission answered at once (a value, not a promise) carries tunnels and counts them, CONNECT, SOCKS5 and whitelist', async () => {
    // What the daemon's admission does for cached credentials and whitelisted addresses: the answer itself.
    const admission: Admitter = {
      admitByCredentials: (u, p) => (u === 'alice' && p === 's3cret:pw' ? { ok: true, accountId: 1, user: 'alice' } : { ok: false, reason: 'wrong_password', accountId: 1 }),
      admitBySourceIp: (ip) => (ip === '127.0.0.1' ? { ok: true, accountId: 2 } : { ok: false, reason: 'not_whitelisted' }),
    };
    const g = await startTestGateway({ admission });
    const c = await RawClient.connect(g.httpPort);
    c.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\nearly`);
    expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    expect((await c.read(5)).toString()).toBe('early');
    c.socket.end();
    await c.readToEnd();
    const s = await RawClient.connect(g.socksPort);
    s.write(Buffer.concat([socksGreetingAuth(), socksConnectV4('127.0.0.1', echo.port), Buffer.from('socks')]));
    expect([...(await s.read(4))]).toEqual([5, 2, 1, 0]);
    expect((await s.read(10))[1]).toBe(0);
    expect((await s.read(5)).toString()).toBe('socks');
    s.socket.end();
    await s.readToEnd();
    const w = await RawClient.connect(g.httpPort);
    w.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\n\r\nip`);
    expect(await w.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    expect((await w.read(2)).toString()).toBe('ip');
    w.socket.end();
    await w.readToEnd();
    const bad = await RawClient.connect(g.httpPort);
    bad.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${basic('alice', 'nope')}\r\n\r\n`);
    expect((await bad.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 407 /);
    await eventually(() => g.gw.stats().connectionsOpen === 0);
    g.usage.collect();
    expect(g.usage.of(1)).toMatchObject({ up: 10, down: 10, connections: 2 });
    expect(g.usage.of(2)).toMatchObject({ up: 2, down: 2, connections: 1 });
    await g.gw.close(100);
  });

  it('admission answered at once goes on in the same turn: nothing queued before it meanwhile has run when the dial starts', async () => {
    let turned: boolean | null = null;
    const seen: Array<boolean | null> = [];
    const admission: Admitter = {
      admitByCredentials: () => {
        turned = false;
        queueMicrotask(() => (turned = true));
        return { ok: true, accountId: 1, user: 'alice' };
      },
      admitBySourceIp: () => ({ ok: false, reason: 'not_whitelisted' }),
    };
    // The name's lookup is the dial's first step: it sees whether a promise turn came between admission and it.
    const lookup = async (): Promise<Array<{ address: string; family: 4 | 6 }>> => {
      seen.push(turned);
      return [{ address: '127.0.0.1', family: 4 }];
    };
    const g = await startTestGateway({ admission, lookup });
    const c = await RawClient.connect(g.httpPort);
    c.write(`CONNECT echo.test:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    const s = await RawClient.connect(g.socksPort);
    s.write(Buffer.concat([socksGreetingAuth(), socksConnectDomain('echo.test', echo.port)]));
    expect([...(await s.read(4))]).toEqual([5, 2, 1, 0]);
    expect((await s.read(10))[1]).toBe(0);
    expect(seen).toEqual([false, false]);
    c.socket.destroy();
    s.socket.destroy();
    await g.gw.close(100);
  });

  it('a throw after the admitter answered at once (a plan lookup) cuts that connection, never the process; SOCKS5 and HTTP', async () => {
    let broken = true;
    const admission: Admitter = {
      admitByCredentials: () => ({ ok: true, accountId: 1, user: 'alice' }),
      admitBySourceIp: () => ({ ok: true, accountId: 1 }),
    };
    const plans: PlanLimits = {
      refusal: () => {
        if (broken) throw new Error('plan table broken');
        return null;
      },
      pending: () => null,
      slotFree: () => true,
      moreSlots: async () => {},
      budgetFor: () => null,
    };
    const g = await startTestGateway({ admission, plans });
    const s = await RawClient.connect(g.socksPort);
    s.write(Buffer.from([5, 1, 0])); // no authentication: whitelist admission
    await s.readToEnd();
    const a = await RawClient.connect(g.socksPort);
    a.write(socksGreetingAuth());
    await a.readToEnd();
    const c = await RawClient.connect(g.httpPort);
    c.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect((await c.readToEnd()).toString()).not.toMatch(/^HTTP\/1\.1 200 /);
    broken = false;
    const ok = await RawClient.connect(g.socksPort);
    expect((await socksOpen(ok, socksConnectV4('127.0.0.1', echo.port)))[1]).toBe(0);
    ok.socket.destroy();
    await g.gw.close(100);
  });

  it('an admitter that answers with a thenable (not a native promise) is waited for: a wrong password is refused', async () => {
    const later = (r: AdmitResult): PromiseLike<AdmitResult> => ({ then: (ok) => Promise.resolve(r).then(ok) }) as PromiseLike<AdmitResult>;
    const admission = {
      admitByCredentials: (u: string, p: string) => later(u === 'alice' && p === 's3cret:pw' ? { ok: true, accountId: 1, user: 'alice' } : { ok: false, reason: 'wrong_password', accountId: 1 }),
      admitBySourceIp: () => later({ ok: false, reason: 'not_whitelisted' }),
    } as unknown as Admitter;
    const g = await startTestGateway({ admission });
    const bad = await RawClient.connect(g.httpPort);
    bad.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${basic('alice', 'nope')}\r\n\r\n`);
    expect((await bad.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 407 /);
    const none = await RawClient.connect(g.httpPort);
    none.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\n\r\n`);
    expect((await none.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 407 /);
    const good = await RawClient.connect(g.httpPort);
    good.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect(await good.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    good.socket.destroy();
    expect(g.gw.stats().admissionFailures).toEqual({ wrong_password: 1, not_whitelisted: 1 });
    await g.gw.close(100);
  });

  it('stats: every refusal by its log reason (a throttled login apart), and the set-up time of each connection that reached its target', async () => {
    const admission = {
      admitByCredentials: (u: string, p: string) =>
        u === 'alice' && p === 's3cret:pw'
          ? { ok: true, accountId: 1, user: 'alice' }
          : u === 'carol'
            ? { ok: false, reason: 'login_throttled' }
            : { ok: false, reason: 'wrong_password', accountId: 1 },
      admitBySourceIp: () => ({ ok: false, reason: 'not_whitelisted' }),
    } as unknown as Admitter;
    const g = await startTestGateway({ admission });
    const answer = async (auth: string, target: string) => {
      const c = await RawClient.connect(g.httpPort);
      c.write(`CONNECT ${target} HTTP/1.1\r\nProxy-Authorization: ${auth}\r\n\r\n`);
      const head = await c.readUntil('\r\n\r\n');
      c.socket.destroy();
      return head.split(' ')[1];
    };
    expect(await answer(basic('alice', 'nope'), `127.0.0.1:${echo.port}`)).toBe('407');
    expect(await answer(basic('carol', 'x'), `127.0.0.1:${echo.port}`)).toBe('407');
    expect(await answer(AUTH, `127.0.0.1:${await freePort()}`)).toBe('502');
    expect(await answer(AUTH, `127.0.0.1:${echo.port}`)).toBe('200');
    expect(await answer(AUTH, `127.0.0.1:${echo.port}`)).toBe('200');
    const s = g.gw.stats();
    // The log says `admission_unavailable` for the throttled login; the metric keeps that reason for the gateway failing to decide.
    expect(s.refusals).toEqual({ wrong_password: 1, login_throttled: 1, target_refused: 1 });
    expect(s.setup.counts.reduce((a, b) => a + b, 0)).toBe(2);
    expect(s.setup.counts).toHaveLength(s.setup.boundsMs.length + 1);
    expect(s.setup.sumMs).toBeGreaterThanOrEqual(0);
    await g.gw.close(100);
  });

  it('close(drainMs) lets tunnels drain, then ends them', async () => {
    const g = await startTestGateway();
    const c = await RawClient.connect(g.httpPort);
    c.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    await c.readUntil('\r\n\r\n');
    const closing = g.gw.close(300);
    c.write('during drain');
    expect((await c.read(12)).toString()).toBe('during drain');
    await closing;
    await c.waitClosed();
  });

  it('leaves no CLOSE_WAIT or FIN_WAIT_2 sockets behind', async () => {
    // Gateway side of client connections, and its outgoing connections to the echo target.
    const held = (): number =>
      socketsInState(t.httpPort, ['CLOSE_WAIT', 'FIN_WAIT2']) +
      socketsInState(t.socksPort, ['CLOSE_WAIT', 'FIN_WAIT2']) +
      socketsInState(echo.port, ['CLOSE_WAIT', 'FIN_WAIT2'], 'remote');
    await eventually(() => held() === 0, 3000);
    await eventually(() => t.gw.stats().connectionsOpen === 0, 3000);
    await eventually(() => echo.sockets.size === 0, 3000);
  });
});
