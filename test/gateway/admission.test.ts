// The gateway's admission as core.ts drives it (src/gateway/core.ts, the Admitter in types.ts): an admitter
// that throws (late or at once) gives 503 or a SOCKS5 refusal and the gateway serves on; an answer given at once
// (a value) goes on in the same turn; a throw after it cuts that connection only; a thenable is waited for.
// (Which room a test goes in: docs/decisions.md#d-070.)
import { describe, expect, it } from 'vitest';
import type { AdmitResult, Admitter, PlanLimits } from '../../src/gateway/types.js';
import { RawClient, basic, eventually, startTestGateway } from './helpers.js';
import {
  AUTH,
  withEcho,
  type Echo,
  socksConnectDomain,
  socksConnectV4,
  socksGreetingAuth,
  socksOpen,
} from './handshakes.js';

let echo: Echo;
withEcho((e) => (echo = e));

describe('admission', () => {
  it('an admission that throws gives 503, never a crash or an open door', async () => {
    const g = await startTestGateway();
    g.admission.admitByCredentials = async () => {
      throw new Error('db down');
    };
    const c = await RawClient.connect(g.httpPort);
    c.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect((await c.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 503 /);
    await g.gw.close(100);
  });

  it('an admission that throws at once (not a rejection) gives 503 and SOCKS5 a refusal; the gateway serves on', async () => {
    const g = await startTestGateway();
    const answer = g.admission.admitByCredentials.bind(g.admission);
    g.admission.admitByCredentials = () => {
      throw new Error('view stale');
    };
    const c = await RawClient.connect(g.httpPort);
    c.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect((await c.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 503 /);
    const s = await RawClient.connect(g.socksPort);
    s.write(Buffer.concat([socksGreetingAuth(), socksConnectV4('127.0.0.1', echo.port)]));
    const reply = await s.readToEnd();
    expect([...reply.subarray(0, 2)]).toEqual([5, 2]);
    expect(reply.length === 4 ? reply[3] : reply[5], 'refused, not admitted').not.toBe(0);
    g.admission.admitByCredentials = answer;
    const ok = await RawClient.connect(g.httpPort);
    ok.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect(await ok.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    ok.socket.destroy();
    await g.gw.close(100);
  });

  it('an admission answered at once (a value, not a promise) carries tunnels and counts them, CONNECT, SOCKS5 and whitelist', async () => {
    // What the daemon's admission does for cached credentials and whitelisted addresses: the answer itself.
    const admission: Admitter = {
      admitByCredentials: (u, p) =>
        u === 'alice' && p === 's3cret:pw'
          ? { ok: true, accountId: 1, user: 'alice' }
          : { ok: false, reason: 'wrong_password', accountId: 1 },
      admitBySourceIp: (ip) =>
        ip === '127.0.0.1' ? { ok: true, accountId: 2 } : { ok: false, reason: 'not_whitelisted' },
    };
    const g = await startTestGateway({ admission });
    const c = await RawClient.connect(g.httpPort);
    c.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\nearly`);
    expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    expect((await c.read(5)).toString()).toBe('early');
    c.socket.end();
    await c.readToEnd();
    const s = await RawClient.connect(g.socksPort);
    s.write(Buffer.concat([socksGreetingAuth(), socksConnectV4('127.0.0.1', echo.port), Buffer.from('socks')]));
    expect([...(await s.read(4))]).toEqual([5, 2, 1, 0]);
    expect((await s.read(10))[1]).toBe(0);
    expect((await s.read(5)).toString()).toBe('socks');
    s.socket.end();
    await s.readToEnd();
    const w = await RawClient.connect(g.httpPort);
    w.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\n\r\nip`);
    expect(await w.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    expect((await w.read(2)).toString()).toBe('ip');
    w.socket.end();
    await w.readToEnd();
    const bad = await RawClient.connect(g.httpPort);
    bad.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${basic('alice', 'nope')}\r\n\r\n`);
    expect((await bad.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 407 /);
    await eventually(() => g.gw.stats().connectionsOpen === 0);
    g.usage.collect();
    expect(g.usage.of(1)).toMatchObject({ up: 10, down: 10, connections: 2 });
    expect(g.usage.of(2)).toMatchObject({ up: 2, down: 2, connections: 1 });
    await g.gw.close(100);
  });

  it('admission answered at once goes on in the same turn: nothing queued before it meanwhile has run when the dial starts', async () => {
    let turned: boolean | null = null;
    const seen: Array<boolean | null> = [];
    const admission: Admitter = {
      admitByCredentials: () => {
        turned = false;
        queueMicrotask(() => (turned = true));
        return { ok: true, accountId: 1, user: 'alice' };
      },
      admitBySourceIp: () => ({ ok: false, reason: 'not_whitelisted' }),
    };
    // The name's lookup is the dial's first step: it sees whether a promise turn came between admission and it.
    const lookup = async (): Promise<Array<{ address: string; family: 4 | 6 }>> => {
      seen.push(turned);
      return [{ address: '127.0.0.1', family: 4 }];
    };
    const g = await startTestGateway({ admission, lookup });
    const c = await RawClient.connect(g.httpPort);
    c.write(`CONNECT echo.test:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    const s = await RawClient.connect(g.socksPort);
    s.write(Buffer.concat([socksGreetingAuth(), socksConnectDomain('echo.test', echo.port)]));
    expect([...(await s.read(4))]).toEqual([5, 2, 1, 0]);
    expect((await s.read(10))[1]).toBe(0);
    expect(seen).toEqual([false, false]);
    c.socket.destroy();
    s.socket.destroy();
    await g.gw.close(100);
  });

  it('a throw after the admitter answered at once (a plan lookup) cuts that connection, never the process; SOCKS5 and HTTP', async () => {
    let broken = true;
    const admission: Admitter = {
      admitByCredentials: () => ({ ok: true, accountId: 1, user: 'alice' }),
      admitBySourceIp: () => ({ ok: true, accountId: 1 }),
    };
    const plans: PlanLimits = {
      refusal: () => {
        if (broken) throw new Error('plan table broken');
        return null;
      },
      pending: () => null,
      slotFree: () => true,
      moreSlots: async () => {},
      budgetFor: () => null,
    };
    const g = await startTestGateway({ admission, plans });
    const s = await RawClient.connect(g.socksPort);
    s.write(Buffer.from([5, 1, 0])); // no authentication: whitelist admission
    await s.readToEnd();
    const a = await RawClient.connect(g.socksPort);
    a.write(socksGreetingAuth());
    await a.readToEnd();
    const c = await RawClient.connect(g.httpPort);
    c.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect((await c.readToEnd()).toString()).not.toMatch(/^HTTP\/1\.1 200 /);
    broken = false;
    const ok = await RawClient.connect(g.socksPort);
    expect((await socksOpen(ok, socksConnectV4('127.0.0.1', echo.port)))[1]).toBe(0);
    ok.socket.destroy();
    await g.gw.close(100);
  });

  it('an admitter that answers with a thenable (not a native promise) is waited for: a wrong password is refused', async () => {
    const later = (r: AdmitResult): PromiseLike<AdmitResult> =>
      ({ then: (ok) => Promise.resolve(r).then(ok) }) as PromiseLike<AdmitResult>;
    const admission = {
      admitByCredentials: (u: string, p: string) =>
        later(
          u === 'alice' && p === 's3cret:pw'
            ? { ok: true, accountId: 1, user: 'alice' }
            : { ok: false, reason: 'wrong_password', accountId: 1 },
        ),
      admitBySourceIp: () => later({ ok: false, reason: 'not_whitelisted' }),
    } as unknown as Admitter;
    const g = await startTestGateway({ admission });
    const bad = await RawClient.connect(g.httpPort);
    bad.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${basic('alice', 'nope')}\r\n\r\n`);
    expect((await bad.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 407 /);
    const none = await RawClient.connect(g.httpPort);
    none.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\n\r\n`);
    expect((await none.readToEnd()).toString()).toMatch(/^HTTP\/1\.1 407 /);
    const good = await RawClient.connect(g.httpPort);
    good.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
    expect(await good.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    good.socket.destroy();
    expect(g.gw.stats().admissionFailures).toEqual({ wrong_password: 1, not_whitelisted: 1 });
    await g.gw.close(100);
  });
});
