// The SOCKS5 port on raw sockets (src/gateway/listen/socks5.ts): a handshake byte by byte or in one packet with
// data, no acceptable method, IPv6 however it is spelled, reply codes for BIND, unknown address types, refused
// targets and connections, a bad version; and no socket left half-closed after.
// (Which room a test goes in: docs/decisions.md#d-070.)
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { RawClient, eventually, sleep, startTcpEcho, startTestGateway, type TestGateway } from '../helpers.js';
import {
  AUTH,
  withSharedGateway,
  type Echo,
  expectReleased,
  socksConnectDomain,
  socksConnectV4,
  socksGreetingAuth,
  socksOpen,
} from '../handshakes.js';

let echo: Echo;
let t: TestGateway;
withSharedGateway((shared) => ({ t, echo } = shared));

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
    c.write(
      Buffer.concat([socksGreetingAuth(), socksConnectDomain('localhost', echo.port), Buffer.from('optimistic')]),
    );
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
    for (const name of ['::1', '0:0::1'])
      expect(
        await viaSocks(
          Buffer.concat([Buffer.from([5, 1, 0, 3, name.length]), Buffer.from(name), Buffer.from([p >> 8, p & 0xff])]),
        ),
        name,
      ).toBe(0);
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

  it('answers BIND 0x07 (UDP ASSOCIATE is served: test/gateway/listen/udp.test.ts), an unknown address type 0x08, and closes on a bad version', async () => {
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
describe('socket release', () => {
  it('leaves no CLOSE_WAIT or FIN_WAIT_2 sockets behind', async () => {
    await expectReleased(t, echo);
  });
});
