// A client that half-closes (FIN) mid-handshake can never finish it: the gateway closes at once,
// at every stage of every listener, instead of holding the socket until the header timeout.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import { RawClient, basic, eventually, startTestGateway, type TestGateway } from '../helpers.js';

// Far below the header timeout, generous for a loaded machine.
const PROMPT_MS = 3000;
const HEADER_TIMEOUT_MS = 20_000;

let t: TestGateway;

beforeAll(async () => {
  // 127.0.0.1 is trusted, so a PROXY header is parsed (not refused) and a partial one is awaited.
  t = await startTestGateway({ proxyProtocolFrom: ['127.0.0.1'], limits: { headerTimeoutMs: HEADER_TIMEOUT_MS } });
});
afterAll(async () => {
  await t.gw.close(100);
});

/** Send each step (awaiting the expected answer bytes), then FIN; the gateway must close promptly. */
async function finAfter(port: number, steps: Array<{ send: Buffer | string; expect?: number[] }>): Promise<Buffer> {
  const c = await RawClient.connect(port);
  for (const s of steps) {
    c.write(s.send);
    if (s.expect) expect([...(await c.read(s.expect.length))]).toEqual(s.expect);
  }
  // Let the last bytes be read and parsed as incomplete before the FIN arrives.
  await new Promise((r) => setTimeout(r, 30));
  const started = Date.now();
  c.socket.end();
  const rest = await c.readToEnd(PROMPT_MS);
  await c.waitClosed(PROMPT_MS);
  expect(Date.now() - started).toBeLessThan(PROMPT_MS);
  return rest;
}

const pv2 = Buffer.from('0d0a0d0a000d0a515549540a', 'hex');

describe('EOF mid-handshake closes at once', () => {
  it('HTTP listener: during the PROXY header (v1 and v2)', async () => {
    expect((await finAfter(t.httpPort, [{ send: 'PROXY TCP4 203.0.113.1 127.0.0.1 400' }])).length).toBe(0);
    expect((await finAfter(t.httpPort, [{ send: pv2.subarray(0, 14) }])).length).toBe(0);
  });

  it('HTTP listener: during the request head (no line end, one line, after a PROXY header, nothing at all)', async () => {
    expect((await finAfter(t.httpPort, [{ send: 'junk-without-a-line-end' }])).length).toBe(0);
    expect((await finAfter(t.httpPort, [{ send: 'CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: x' }])).length).toBe(0);
    expect(
      (await finAfter(t.httpPort, [{ send: 'PROXY TCP4 203.0.113.1 127.0.0.1 40000 1\r\nGET http://x/ HT' }])).length,
    ).toBe(0);
    expect((await finAfter(t.httpPort, [])).length).toBe(0);
  });

  it('SOCKS5 listener: during the PROXY header, greeting, RFC 1929 auth and request', async () => {
    await finAfter(t.socksPort, [{ send: 'PROXY TCP4 203.0.113.1' }]);
    await finAfter(t.socksPort, [{ send: Buffer.from([5, 2]) }]);
    await finAfter(t.socksPort, [
      { send: Buffer.from([5, 1, 2]), expect: [5, 2] },
      { send: Buffer.from([1, 5, 0x61]) },
    ]);
    const auth = Buffer.concat([Buffer.from([1, 5]), Buffer.from('alice'), Buffer.from([9]), Buffer.from('s3cret:pw')]);
    await finAfter(t.socksPort, [
      { send: Buffer.from([5, 1, 2]), expect: [5, 2] },
      { send: auth, expect: [1, 0] },
      { send: Buffer.from([5, 1, 0, 3, 20, 0x61]) },
    ]);
  });

  it('every such connection is released', async () => {
    const deadline = Date.now() + PROMPT_MS;
    while (t.gw.stats().connectionsOpen > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(t.gw.stats().connectionsOpen).toBe(0);
  });
});

describe('EOF or reset while admission runs', () => {
  it('a FIN right after a CONNECT head: admitted, tunnelled, the FIN passed on; a reset gives the slot back', async () => {
    const g = await startTestGateway();
    const admit = g.admission.admitByCredentials.bind(g.admission);
    g.admission.admitByCredentials = async (u, p) => {
      await new Promise((r) => setTimeout(r, 150));
      return admit(u, p);
    };
    const target = net.createServer({ allowHalfOpen: true }, (s) => {
      let n = 0;
      s.on('data', (d: Buffer) => (n += d.length));
      s.on('end', () => s.end(`got ${n}`));
    });
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
    const port = (target.address() as net.AddressInfo).port;
    const head = `CONNECT 127.0.0.1:${port} HTTP/1.1\r\nProxy-Authorization: ${basic('alice', 's3cret:pw')}\r\n\r\n`;

    const c = await RawClient.connect(g.httpPort);
    c.socket.end(head + 'abc');
    expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    expect((await c.readToEnd()).toString()).toBe('got 3');

    const d = await RawClient.connect(g.httpPort);
    d.write(head);
    await new Promise((r) => setTimeout(r, 30));
    d.socket.resetAndDestroy();
    // The reset connection's admission still succeeds after it is gone: its slot comes straight back.
    await eventually(
      () => g.usage.collect().byAccount.get(1)?.connections === 2 && g.gw.stats().connectionsOpen === 0,
      PROMPT_MS,
    );
    expect(g.gw.stats().connectionsOpen).toBe(0);
    await g.gw.close(100);
    target.close();
  });
});
