// The HTTP port's forward path on raw sockets (src/gateway/listen/http-proxy.ts, forward.ts): 100 Continue,
// refused heads' details, empty lines before the request line, framing headers, no pipelining; a response head
// that trickles in is looked through once; the exchange ends with the response (an origin that keeps its
// socket open holds nothing); metering as the client sent and got; and no socket left half-closed after.
// (Which room a test goes in: docs/decisions.md#d-070.)
import http from 'node:http';
import net from 'node:net';
import { describe, expect, it, vi } from 'vitest';
import { RawClient, eventually, sleep, startTestGateway, type TestGateway } from '../helpers.js';
import { AUTH, withSharedGateway, type Echo, expectReleased } from '../handshakes.js';
import { patient } from '../../helpers/patience.js';

let echo: Echo;
let t: TestGateway;
withSharedGateway((shared) => ({ t, echo } = shared));

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
      [
        `GET http://127.0.0.1:${echo.port}/ HTTP/1.1\r\nX-Pad: ${'p'.repeat(4000)}\r\n\r\n`,
        /^HTTP\/1\.1 431 [^]*details="request head too large"/,
      ],
      [
        `GET http://127.0.0.1:${echo.port}/ HTTP/2.0\r\n\r\n`,
        /^HTTP\/1\.1 505 [^]*details="HTTP version not supported \(1\.0 and 1\.1 are\)"/,
      ],
      [
        `GET http://u:pw@127.0.0.1:${echo.port}/ HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`,
        /^HTTP\/1\.1 400 [^]*details="credentials in the URL are not accepted/,
      ],
      [
        `GET http:///x HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`,
        /^HTTP\/1\.1 400 [^]*details="the URL has no host"/,
      ],
      [
        `GET http://127.0.0.1:99999/ HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`,
        /^HTTP\/1\.1 400 [^]*details="the URL's host or port is not valid"/,
      ],
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
    const srv = net.createServer((s) =>
      s.once('data', () =>
        s.end('HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n'),
      ),
    );
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const c = await RawClient.connect(t.httpPort);
    c.write(
      `GET http://127.0.0.1:${(srv.address() as net.AddressInfo).port}/ HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`,
    );
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
  it(
    'is looked through once, not again from its start at every chunk (an origin sending a long head in small pieces costs the gateway linear work)',
    async () => {
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
        c.write(
          `GET http://127.0.0.1:${(origin.address() as net.AddressInfo).port}/ HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`,
        );
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
    },
    patient(30_000),
  );
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
    return {
      port: (srv.address() as net.AddressInfo).port,
      close: () => (sockets.forEach((s) => s.destroy()), srv.close()),
    };
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

  it("a chunked response the scanner does not take is still relayed as it comes, to the origin's close", async () => {
    const sloppy = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nok\n0\n\n';
    const srv = net.createServer((s) => s.once('data', () => s.end(sloppy)));
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const c = await RawClient.connect(t.httpPort);
    c.write(
      `GET http://127.0.0.1:${(srv.address() as net.AddressInfo).port}/ HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`,
    );
    const res = (await c.readToEnd(3000)).toString();
    expect(res.endsWith('\r\n\r\n2\nok\n0\n\n')).toBe(true);
    srv.close();
  });

  it('an origin that resets mid-body: the client gets a reset, not a clean end (a body to the close is not taken as whole)', async () => {
    const srv = net.createServer((s) =>
      s.once('data', () => {
        s.write(`HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n${'q'.repeat(3000)}`);
        setTimeout(() => s.resetAndDestroy(), 100);
      }),
    );
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const c = await RawClient.connect(t.httpPort);
    const reset = new Promise<string>((resolve) => {
      c.socket.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
      c.socket.on('end', () => resolve('end'));
    });
    c.write(
      `GET http://127.0.0.1:${(srv.address() as net.AddressInfo).port}/ HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`,
    );
    expect(await reset).toBe('ECONNRESET');
    srv.close();
  });

  it('a Connection header naming the framing: the request is refused (400), the response keeps its framing', async () => {
    const got: string[] = [];
    const srv = net.createServer((s) =>
      s.once('data', (d) => {
        got.push(d.toString('latin1'));
        s.end(
          'HTTP/1.1 200 OK\r\nConnection: transfer-encoding\r\nTransfer-Encoding: chunked\r\nTrailer: X-A\r\n\r\n4\r\nabcd\r\n0\r\nX-A: 1\r\n\r\n',
        );
      }),
    );
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as net.AddressInfo).port;
    const smuggle = await RawClient.connect(t.httpPort);
    smuggle.write(
      `POST http://127.0.0.1:${port}/ HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\nConnection: content-length\r\nContent-Length: 5\r\n\r\nhello`,
    );
    expect((await smuggle.readToEnd()).toString()).toMatch(
      /^HTTP\/1\.1 400 [^]*details="Connection names a framing header"/,
    );
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
describe('socket release', () => {
  it('leaves no CLOSE_WAIT or FIN_WAIT_2 sockets behind', async () => {
    await expectReleased(t, echo);
  });
});
