// What a client is answered when the dial cannot go on (src/gateway/dial/): a connect timeout (504, SOCKS5 0x06),
// a private, reserved or own-listener target (403 / 502), and an entry refusing its own listeners before any
// exit is asked. (Which room a test goes in: docs/decisions.md#d-070.)
import { describe, expect, it } from 'vitest';
import { RawClient, startBlackhole, startTestGateway } from '../helpers.js';
import { AUTH, withEcho, type Echo, socksConnectV4, socksOpen } from '../handshakes.js';

let echo: Echo;
withEcho((e) => (echo = e));

describe('connect timeout', () => {
  it('504 for CONNECT and absolute-form, 0x06 for SOCKS5', async () => {
    const hole = await startBlackhole();
    const g = await startTestGateway({ limits: { connectTimeoutMs: 300 } });
    try {
      const c = await RawClient.connect(g.httpPort);
      c.write(`CONNECT 127.0.0.1:${hole.port} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
      expect((await c.readToEnd(3000)).toString()).toMatch(/^HTTP\/1\.1 504 /);
      const f = await RawClient.connect(g.httpPort);
      f.write(`GET http://127.0.0.1:${hole.port}/ HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
      expect((await f.readToEnd(3000)).toString()).toMatch(/^HTTP\/1\.1 504 /);
      const s = await RawClient.connect(g.socksPort);
      expect((await socksOpen(s, socksConnectV4('127.0.0.1', hole.port)))[1]).toBe(6);
    } finally {
      hole.stop();
      await g.gw.close(100);
    }
  });
});

describe('target policy', () => {
  it('refuses private, reserved and own-listener targets; resolves names before checking', async () => {
    const lookup = async (host: string): Promise<Array<{ address: string; family: 4 | 6 }>> =>
      host === 'rebind.example' ? [{ address: '127.0.0.1', family: 4 }] : [{ address: '192.168.1.1', family: 4 }];
    const g = await startTestGateway({
      allowPrivateTargets: false,
      lookup,
      ownListeners: () => [{ host: '127.0.0.1', port: 8080 }],
    });
    const targets = [
      '127.0.0.1:80',
      '10.0.0.1:80',
      '172.16.0.1:443',
      '192.168.0.1:80',
      '169.254.169.254:80',
      '100.64.0.1:80',
      '224.0.0.1:80',
      '240.0.0.1:80',
      '0.0.0.0:80',
      '[::1]:80',
      '[::ffff:127.0.0.1]:80',
      '[fe80::1]:80',
      '[fc00::1]:80',
      'rebind.example:80',
      'internal.example:443',
      '2130706433:80',
    ];
    for (const target of targets) {
      const c = await RawClient.connect(g.httpPort);
      c.write(`CONNECT ${target} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
      const res = (await c.readToEnd()).toString();
      expect(res, target).toMatch(/^HTTP\/1\.1 (403|502) /);
    }
    await g.gw.close(100);

    // With private targets allowed, the daemon's and the gateway's own listeners stay refused.
    const h = await startTestGateway({ ownListeners: () => [{ host: '127.0.0.1', port: echo.port }] });
    for (const target of [
      `127.0.0.1:${echo.port}`,
      `0.0.0.0:${echo.port}`,
      `127.0.0.1:${h.httpPort}`,
      `localhost:${h.socksPort}`,
    ]) {
      const c = await RawClient.connect(h.httpPort);
      c.write(`CONNECT ${target} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
      expect((await c.readToEnd()).toString(), target).toMatch(/^HTTP\/1\.1 403 /);
    }
    expect(h.gw.stats().targetRefusals.own_listener).toBe(4);
    await h.gw.close(100);
  });
});

describe('own listeners at an entry', () => {
  it('an entry refuses its own listeners as targets before any exit is asked (a customer went round through it, every lap metered)', async () => {
    const asked: string[] = [];
    const g = await startTestGateway({
      exitDialer: { dial: async (req) => (asked.push(`${req.host}:${req.port}`), { ok: false, failure: 'no_exit' }) },
    });
    const connect = async (target: string) => {
      const c = await RawClient.connect(g.httpPort);
      c.write(`CONNECT ${target} HTTP/1.1\r\nProxy-Authorization: ${AUTH}\r\n\r\n`);
      return (await c.readToEnd()).toString();
    };
    for (const target of [
      `127.0.0.1:${g.httpPort}`,
      `localhost:${g.socksPort}`,
      `[::ffff:127.0.0.1]:${g.httpPort}`,
      `0.0.0.0:${g.socksPort}`,
    ]) {
      const res = await connect(target);
      expect(res, target).toMatch(/^HTTP\/1\.1 403 /);
      expect(res, target).toContain('target is this proxy');
    }
    const s = await RawClient.connect(g.socksPort);
    expect((await socksOpen(s, socksConnectV4('127.0.0.1', g.socksPort)))[1]).toBe(2);
    s.socket.destroy();
    expect(asked).toEqual([]);
    // Anything else is the exit's to resolve and judge.
    expect(await connect(`127.0.0.1:${echo.port}`)).toMatch(/^HTTP\/1\.1 502 /);
    expect(asked).toEqual([`127.0.0.1:${echo.port}`]);
    await g.gw.close(100);
  });
});
