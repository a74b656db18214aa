// The HTTP port's CONNECT on raw sockets (src/gateway/listen/http-connect.ts): a head split byte by byte or sent
// with early data, half-close and reset through the tunnel, malformed and oversize heads, another protocol's
// first bytes answered at once, a slow head cut at the header deadline; and no socket left half-closed after.
// (Which room a test goes in: docs/decisions.md#d-070.)
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { RawClient, eventually, sleep, startTestGateway, type TestGateway } from '../helpers.js';
import { AUTH, withSharedGateway, type Echo, expectReleased, socksConnectV4, socksOpen } from '../handshakes.js';
import { patient } from '../../helpers/patience.js';

let echo: Echo;
let t: TestGateway;
withSharedGateway((shared) => ({ t, echo } = shared));

describe('HTTP CONNECT framing', () => {
  it('accepts a head split byte by byte, and passes bytes sent with the head into the tunnel', async () => {
    const c = await RawClient.connect(t.httpPort);
    const head = `CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nHost: 127.0.0.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`;
    for (const ch of head.slice(0, -1)) {
      c.write(ch);
      await sleep(1);
    }
    c.write(head.slice(-1) + 'EARLY-DATA');
    expect(await c.readUntil('\r\n\r\n')).toMatch(
      /^HTTP\/1\.1 200 Connection established\r\nVia: 1\.1 proxyd\r\nProxy-Status: proxyd\r\nX-Request-Id: [0-9a-f]{12}-[0-9a-z]{6,}\r\n\r\n$/,
    );
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
    d.write(
      `POST http://127.0.0.1:${echo.port}/ HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n`,
    );
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
describe('socket release', () => {
  it('leaves no CLOSE_WAIT or FIN_WAIT_2 sockets behind', async () => {
    await expectReleased(t, echo);
  });
});
