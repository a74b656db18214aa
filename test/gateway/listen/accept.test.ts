// What a listener does with what arrives first (src/gateway/listen/, wire/proxy-protocol.ts): random bytes never
// crash it and every connection is released; a PROXY header (v1, v2) from a trusted peer sets the admission
// source, from anyone else it closes the connection; and no socket left half-closed after.
// (Which room a test goes in: docs/decisions.md#d-070.)
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RawClient, eventually, startTestGateway, type TestGateway } from '../helpers.js';
import { AUTH, withSharedGateway, type Echo, expectReleased, socksConnectV4 } from '../handshakes.js';

let echo: Echo;
let t: TestGateway;
withSharedGateway((shared) => ({ t, echo } = shared));

describe('junk on the wire', () => {
  it('random bytes never crash a listener; every connection is released', async () => {
    const g = await startTestGateway({ limits: { headerTimeoutMs: 150 }, proxyProtocolFrom: ['127.0.0.1'] });
    const prefixes = [
      Buffer.alloc(0),
      Buffer.from([5]),
      Buffer.from([5, 1, 0]),
      Buffer.from('CONNECT '),
      Buffer.from('PROXY '),
      Buffer.from('0d0a0d0a000d0a515549540a21', 'hex'),
    ];
    await fc.assert(
      fc.asyncProperty(
        fc.uint8Array({ maxLength: 200 }),
        fc.nat(prefixes.length - 1),
        fc.boolean(),
        async (bytes, p, socks) => {
          const c = await RawClient.connect(socks ? g.socksPort : g.httpPort);
          c.write(Buffer.concat([prefixes[p] as Buffer, Buffer.from(bytes)]));
          await c.waitClosed(3000);
          c.socket.destroy();
        },
      ),
      { numRuns: 40 },
    );
    await eventually(() => g.gw.stats().connectionsOpen === 0, 3000);
    await g.gw.close(100);
  });
});

describe('PROXY protocol', () => {
  it('v1 from a trusted peer sets the admission source; also fine without a header', async () => {
    const g = await startTestGateway({ proxyProtocolFrom: ['127.0.0.1'] });
    g.admission.whitelist.set('203.0.113.50', 9);
    const c = await RawClient.connect(g.httpPort);
    c.write(
      `PROXY TCP4 203.0.113.50 127.0.0.1 40000 ${g.httpPort}\r\nCONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\n\r\nhi`,
    );
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
describe('socket release', () => {
  it('leaves no CLOSE_WAIT or FIN_WAIT_2 sockets behind', async () => {
    await expectReleased(t, echo);
  });
});
