// A change that closes an account's or a user's open connections (plan expired, traffic used up, user disabled:
// core.closeWhere, the daemon's plans and admission view call it) used to destroy a connection still resolving or
// dialling its target without a word: the client saw the socket end before any answer. It now gets the refusal a
// new attempt would get, and its record says why; a tunnel already relaying is closed as before.
import { afterEach, describe, expect, it } from 'vitest';
import type { ConnectionLogSink, ConnectionRecord } from '../../src/gateway/types.js';
import { RawClient, basic, startTcpEcho, startTestGateway, type TestGateway } from './helpers.js';
import { socksConnectDomain, socksOpen } from './handshakes.js';
import { waitFor } from '../helpers/wait.js';

class Records implements ConnectionLogSink {
  all: ConnectionRecord[] = [];
  record(r: ConnectionRecord): void {
    this.all.push(r);
  }
}

const open: TestGateway[] = [];
const release: Array<() => void> = [];
afterEach(async () => {
  for (const r of release.splice(0)) r();
  for (const g of open.splice(0)) await g.gw.close(100);
});

/** A gateway whose name lookups for `hang.test` wait until the test ends: a connection there stays resolving. */
async function gatewayWithHangingLookup(log: Records): Promise<TestGateway> {
  let pending = 0;
  const g = await startTestGateway({
    connectionLog: log,
    lookup: (host) =>
      host === 'hang.test'
        ? new Promise((resolve) => {
            pending++;
            release.push(() => resolve([{ address: '127.0.0.1', family: 4 }]));
          })
        : Promise.resolve([{ address: '127.0.0.1', family: 4 }]),
  });
  Object.defineProperty(g, 'pendingLookups', { get: () => pending });
  open.push(g);
  return g;
}

const resolving = (g: TestGateway) => (g as unknown as { pendingLookups: number }).pendingLookups;

describe('closeWhere: connections cut by a change to their account or user', () => {
  it('a CONNECT still resolving its target is answered 403 "the plan has expired" and logged plan_expired', async () => {
    const log = new Records();
    const g = await gatewayWithHangingLookup(log);
    const c = await RawClient.connect(g.httpPort);
    c.write(`CONNECT hang.test:80 HTTP/1.1\r\nProxy-Authorization: ${basic('alice', 's3cret:pw')}\r\n\r\n`);
    await waitFor('resolving', () => resolving(g) === 1, 5_000);
    expect(g.gw.closeWhere((accountId) => (accountId === 1 ? 'plan_expired' : null))).toBe(1);
    const head = await c.readUntil('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 403 /);
    expect(head).toContain('details="the plan has expired"');
    await c.waitClosed();
    await waitFor('record', () => log.all.length === 1, 5_000);
    expect(log.all[0]).toMatchObject({ reason: 'plan_expired', accountId: 1, target: 'hang.test:80' });
  });

  it('a SOCKS5 CONNECT still resolving gets reply 0x02 (traffic_limit); a disabled user over HTTP gets 407', async () => {
    const log = new Records();
    const g = await gatewayWithHangingLookup(log);
    const s = await RawClient.connect(g.socksPort);
    const reply = socksOpen(s, socksConnectDomain('hang.test', 80));
    await waitFor('resolving', () => resolving(g) === 1, 5_000);
    expect(g.gw.closeWhere(() => 'traffic_limit')).toBe(1);
    expect((await reply)[1]).toBe(0x02);
    await s.waitClosed();

    const h = await RawClient.connect(g.httpPort);
    h.write(`CONNECT hang.test:443 HTTP/1.1\r\nProxy-Authorization: ${basic('alice', 's3cret:pw')}\r\n\r\n`);
    await waitFor('resolving', () => resolving(g) === 2, 5_000);
    expect(g.gw.closeWhere(() => 'user_disabled')).toBe(1);
    const head = await h.readUntil('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 407 /);
    await h.waitClosed();
    await waitFor('records', () => log.all.length === 2, 5_000);
    expect(log.all.map((r) => r.reason)).toEqual(['traffic_limit', 'user_disabled']);
  });

  it('a tunnel already relaying is closed (its answer was given), and a cause of null leaves a connection be', async () => {
    const log = new Records();
    const g = await gatewayWithHangingLookup(log);
    const echo = await startTcpEcho();
    try {
      const c = await RawClient.connect(g.httpPort);
      c.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${basic('alice', 's3cret:pw')}\r\n\r\n`);
      expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
      expect(g.gw.closeWhere(() => null)).toBe(0);
      c.write('ping');
      expect((await c.read(4)).toString()).toBe('ping');
      expect(g.gw.closeWhere(() => 'plan_expired')).toBe(1);
      await c.waitClosed();
    } finally {
      echo.server.close();
      for (const s of echo.sockets) s.destroy();
    }
  });
});
