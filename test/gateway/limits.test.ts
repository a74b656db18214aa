// The gateway's limits and accounting on raw sockets (src/gateway/limits.ts, core.ts): the idle timeout, the
// per-account, total and per-source caps, a refused connection's slot given back with its answer, what counts
// as usage, the TrafficSink and stats(), close(drainMs).
// (Which room a test goes in: docs/decisions.md#d-070.)
import { describe, expect, it } from 'vitest';
import type { Admitter } from '../../src/gateway/types.js';
import { RawClient, basic, eventually, startTestGateway } from './helpers.js';
import { AUTH, withEcho, type Echo, socksConnectV4, socksGreetingAuth, socksOpen } from './handshakes.js';
import { freePort } from '../helpers/net.js';
import { TargetRuleSet } from '../../src/gateway/dial/target-rules.js';

let echo: Echo;
withEcho((e) => (echo = e));

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
    const idle = [
      await RawClient.connect(g.httpPort),
      await RawClient.connect(g.socksPort),
      await RawClient.connect(g.httpPort),
    ];
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
    const junk = [
      await RawClient.connect(g.httpPort),
      await RawClient.connect(g.httpPort),
      await RawClient.connect(g.httpPort),
    ];
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
    const g = await startTestGateway({
      limits: { maxHandshakesPerSource: 2, maxConnectionsPerAccount: 1, maxConnectionsTotal: 100 },
    });
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

  it('a refused connection gives its account slot back with the answer, not when the client closes (HTTP and SOCKS5)', async () => {
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
    expect(after.map((r) => [r.target, r.connections]).sort()).toEqual([
      [null, 1],
      ['127.0.0.1', 1],
    ]);
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
    expect({ up: u.up, down: u.down, connections: u.connections, subjects: [...u.subjects] }).toEqual({
      up: 15,
      down: 15,
      connections: 1,
      subjects: ['user:alice'],
    });
    const st = g.gw.stats();
    expect(st.connectionsTotal.connect).toBe(1);
    expect(st.bytesUp).toBe(15);
    expect(st.connectionsOpen).toBe(0);
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
});
