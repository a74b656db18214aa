// The egress pool inside the gateway (in process, fake clock): whitelist admission rotates, a session
// sticks until MIN minutes after its first connection and then starts over.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionTable } from '../../../src/gateway/dial/sticky-sessions.js';
import { basic, startTcpEcho, startTestGateway, type TestGateway } from '../helpers.js';

const POOL = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'];

function once(socket: net.Socket, n: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const onData = (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length >= n) {
        socket.off('data', onData);
        resolve(buf);
      }
    };
    socket.on('data', onData);
    socket.once('error', reject);
  });
}

describe('egress pool in the gateway', () => {
  let g: TestGateway;
  let echo: Awaited<ReturnType<typeof startTcpEcho>>;
  const clock = { t: 1_700_000_000_000 };
  const table = new SessionTable(POOL.length, { now: () => clock.t });

  beforeAll(async () => {
    echo = await startTcpEcho();
    g = await startTestGateway({ egressPool: { addresses: POOL, sessions: table } });
    g.admission.whitelist.set('127.0.0.1', 7);
  });
  afterAll(async () => {
    await g.gw.close(0);
    echo.server.close();
  });

  /** One CONNECT with credentials; the peer the echo target saw. */
  async function viaConnect(user: string): Promise<string> {
    const s = net.connect(g.httpPort, '127.0.0.1');
    s.write(
      `CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${basic(user, 's3cret:pw')}\r\n\r\n`,
    );
    const head = (await once(s, 12)).toString('latin1');
    expect(head).toMatch(/^HTTP\/1\.1 200/);
    s.destroy();
    return echo.peers.at(-1)!;
  }

  /** One SOCKS5 CONNECT without credentials (whitelist admission of 127.0.0.1). */
  async function viaWhitelistSocks(): Promise<string> {
    const s = net.connect(g.socksPort, '127.0.0.1');
    s.write(Buffer.from([5, 1, 0]));
    expect([...(await once(s, 2))]).toEqual([5, 0]);
    s.write(Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, echo.port >> 8, echo.port & 255]));
    expect((await once(s, 10))[1]).toBe(0);
    s.destroy();
    return echo.peers.at(-1)!;
  }

  it('whitelist admission rotates over the pool', async () => {
    const seen: string[] = [];
    for (let i = 0; i < 8; i++) seen.push(await viaWhitelistSocks());
    expect(new Set(seen)).toEqual(new Set(POOL));
  });

  it('a session sticks for MIN minutes from its first connection, then starts over', async () => {
    const user = 'alice-session-exp1-sesstime-1';
    const first = await viaConnect(user);
    const started = clock.t;
    clock.t += 59_000;
    for (let i = 0; i < 5; i++) expect(await viaConnect(user)).toBe(first);
    expect(table.get('1:alice:exp1')?.expiresAt).toBe(started + 60_000); // use does not extend it
    clock.t += 1_000; // one minute after the first connection
    expect(table.get('1:alice:exp1')).toBeUndefined();
    await viaConnect(user);
    expect(table.get('1:alice:exp1')?.expiresAt).toBe(clock.t + 60_000); // a new session from now
  });

  it('counts connections per egress address', () => {
    const e = g.gw.stats().egressConnections;
    expect(Object.keys(e).sort()).toEqual(POOL);
    expect(Object.values(e).reduce((a, b) => a + b, 0)).toBe(8 + 1 + 5 + 1);
  });
});
