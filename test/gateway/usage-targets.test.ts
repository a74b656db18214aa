// What collectUsage says of each connection's target: the host as the client asked (lower-case, no trailing dot),
// through CONNECT and SOCKS5; the connection counted once, with its target; one admitted but gone before it named
// a target counted without one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UsageDelta } from '../../src/gateway/types.js';
import { RawClient, basic, eventually, startTcpEcho, startTestGateway, type TestGateway } from './helpers.js';

const AUTH = basic('alice', 's3cret:pw');

describe('usage per target', () => {
  let g: TestGateway;
  let echo: Awaited<ReturnType<typeof startTcpEcho>>;
  const collected: UsageDelta[] = [];
  const collect = () => {
    collected.push(...g.gw.collectUsage());
    return collected;
  };

  beforeAll(async () => {
    g = await startTestGateway({ lookup: async () => [{ address: '127.0.0.1', family: 4 }] });
    echo = await startTcpEcho();
  });
  afterAll(async () => {
    echo.server.close();
    await g.gw.close(0);
  });

  const byTarget = (target: string | null) => {
    const ds = collect().filter((d) => d.target === target);
    return {
      up: ds.reduce((n, d) => n + d.bytesUp, 0),
      down: ds.reduce((n, d) => n + d.bytesDown, 0),
      connections: ds.reduce((n, d) => n + d.connections, 0),
    };
  };

  it('a CONNECT tunnel: its bytes and its connection under the host it asked for', async () => {
    const c = await RawClient.connect(g.httpPort);
    c.write(`CONNECT A.B.Example.CO.UK.:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    c.write('hello');
    expect((await c.read(5)).toString()).toBe('hello');
    // Counted while open, under its target.
    expect(byTarget('a.b.example.co.uk')).toEqual({ up: 5, down: 5, connections: 1 });
    c.write('again');
    await c.read(5);
    c.socket.end();
    await c.waitClosed();
    expect(byTarget('a.b.example.co.uk')).toEqual({ up: 10, down: 10, connections: 1 });
  });

  it('SOCKS5 with a domain and with an IP literal', async () => {
    for (const [host, atyp] of [
      ['c.example.co.uk', 3],
      ['127.0.0.1', 1],
    ] as const) {
      const s = await RawClient.connect(g.socksPort, '127.0.0.1');
      s.write(Buffer.from([5, 1, 2]));
      expect([...(await s.read(2))]).toEqual([5, 2]);
      const [u, p] = ['alice', 's3cret:pw'].map((x) => Buffer.from(x));
      s.write(Buffer.concat([Buffer.from([1, u!.length]), u!, Buffer.from([p!.length]), p!]));
      expect([...(await s.read(2))]).toEqual([1, 0]);
      const addr =
        atyp === 3
          ? Buffer.concat([Buffer.from([host.length]), Buffer.from(host)])
          : Buffer.from(host.split('.').map(Number));
      s.write(Buffer.concat([Buffer.from([5, 1, 0, atyp]), addr, Buffer.from([echo.port >> 8, echo.port & 0xff])]));
      expect((await s.read(10))[1]).toBe(0);
      s.write('1234567');
      await s.read(7);
      s.socket.end();
      await s.waitClosed();
      expect(byTarget(host)).toEqual({ up: 7, down: 7, connections: 1 });
    }
  });

  it('admitted, then gone before naming a target: counted without one', async () => {
    const before = byTarget(null).connections;
    const s = await RawClient.connect(g.socksPort, '127.0.0.1');
    s.write(Buffer.from([5, 1, 2]));
    await s.read(2);
    s.write(Buffer.concat([Buffer.from([1, 5]), Buffer.from('alice'), Buffer.from([9]), Buffer.from('s3cret:pw')]));
    expect([...(await s.read(2))]).toEqual([1, 0]);
    s.socket.destroy();
    await eventually(() => byTarget(null).connections === before + 1);
  });
});
