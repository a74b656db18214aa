// What the raw-socket tests of the gateway write and check (test/gateway/listen/, dial/, limits, admission):
// SOCKS5 handshakes with alice's RFC 1929 credentials (TestAdmitter's), and that a gateway left no socket behind.
import { afterAll, beforeAll, expect } from 'vitest';
import {
  RawClient,
  basic,
  eventually,
  socketsInState,
  startTcpEcho,
  startTestGateway,
  type TestGateway,
} from './helpers.js';

/** Alice's `Proxy-Authorization` value (TestAdmitter's user). */
export const AUTH = basic('alice', 's3cret:pw');

export type Echo = Awaited<ReturnType<typeof startTcpEcho>>;

/** An echo target for a file's tests: started before them, closed after; `use` receives it. */
export function withEcho(use: (echo: Echo) => void): void {
  let echo: Echo | null = null;
  beforeAll(async () => use((echo = await startTcpEcho())));
  afterAll(() => echo?.server.close());
}

/**
 * The gateway a listen/ file's tests share (egress 127.0.0.2, 5 s header and idle deadlines, 2 KiB heads, 50
 * connections an account), with its echo target: started before them, closed after; `use` receives both.
 */
export function withSharedGateway(use: (shared: { t: TestGateway; echo: Echo }) => void): void {
  let shared: { t: TestGateway; echo: Echo } | null = null;
  beforeAll(async () => {
    const echo = await startTcpEcho();
    const t = await startTestGateway({
      egressAddress: '127.0.0.2',
      limits: { headerTimeoutMs: 5000, idleTimeoutMs: 5000, maxHeaderBytes: 2048, maxConnectionsPerAccount: 50 },
    });
    use((shared = { t, echo }));
  });
  afterAll(async () => {
    await shared?.t.gw.close(100);
    shared?.echo.server.close();
  });
}

export function socksGreetingAuth(user = 'alice', pass = 's3cret:pw'): Buffer {
  const u = Buffer.from(user);
  const p = Buffer.from(pass);
  return Buffer.concat([Buffer.from([5, 1, 2]), Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]);
}

export function socksConnectV4(host: string, port: number): Buffer {
  return Buffer.from([5, 1, 0, 1, ...host.split('.').map(Number), port >> 8, port & 0xff]);
}

export function socksConnectDomain(host: string, port: number, cmd = 1): Buffer {
  const h = Buffer.from(host);
  return Buffer.concat([Buffer.from([5, cmd, 0, 3, h.length]), h, Buffer.from([port >> 8, port & 0xff])]);
}

/** Greeting and auth as alice, then `request`: resolves with the 10-byte reply (its [1] is the reply code). */
export async function socksOpen(c: RawClient, request: Buffer): Promise<Buffer> {
  c.write(socksGreetingAuth());
  expect([...(await c.read(2))]).toEqual([5, 2]);
  expect([...(await c.read(2))]).toEqual([1, 0]);
  c.write(request);
  return c.read(10);
}

/**
 * No CLOSE_WAIT or FIN_WAIT_2 socket left on the gateway's side of its client connections nor on its outgoing
 * connections to `echo`, no connection open, none at the echo: run last in a file that shares one gateway.
 */
export async function expectReleased(t: TestGateway, echo: { port: number; sockets: Set<unknown> }): Promise<void> {
  const held = (): number =>
    socketsInState(t.httpPort, ['CLOSE_WAIT', 'FIN_WAIT2']) +
    socketsInState(t.socksPort, ['CLOSE_WAIT', 'FIN_WAIT2']) +
    socketsInState(echo.port, ['CLOSE_WAIT', 'FIN_WAIT2'], 'remote');
  await eventually(() => held() === 0, 3000);
  await eventually(() => t.gw.stats().connectionsOpen === 0, 3000);
  await eventually(() => echo.sockets.size === 0, 3000);
}
