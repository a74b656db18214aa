// The admission view inside spawned daemons on SQLite (docs/operations.md Fleet): a change made by another process — the
// other daemon on a shared data dir, `proxyd admin` — admits or refuses on a running gateway within 1 s;
// each worker of --workers 2 follows it too. Propagation is measured (p50/p99 in a log line); only a
// generous bound is asserted, the figures that matter come from bench/fleet.mjs.
import type net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADD, admin, DEL, makeAccount, startDaemon, tempDir, type Daemon } from '../helpers/daemon.js';
import { addrOf, tcpEcho } from '../helpers/net.js';
import { api } from '../ops/helpers.js';
import { percentile, probe, report, until } from './fleet-probe.js';
import { patient } from '../helpers/patience.js';

const LIMITS = ['--rate-limits', 'list=10000,add=10000,delete=10000,invalid=10000'];
const GW = ['--allow-private-targets', '--proxy-protocol-from', '127.0.0.1/32', ...LIMITS];

describe('two daemons on one shared data dir', () => {
  let a: Daemon;
  let b: Daemon;
  let echo: net.Server;
  let target: string;
  let token: string;

  beforeAll(async () => {
    echo = await tcpEcho();
    target = addrOf(echo);
    const dir = tempDir();
    a = await startDaemon({ dataDir: dir, args: ['--shared-data-dir', ...GW] });
    b = await startDaemon({ dataDir: dir, args: ['--shared-data-dir', ...GW] });
    ({ token } = await makeAccount(dir, 'fleet@example.com'));
  }, patient(60_000));
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    echo?.close();
  });

  it(
    'a whitelist add/delete through one daemon admits/refuses on the other within 1 s (50 changes)',
    async () => {
      const ip = '8.8.4.4';
      const ms: number[] = [];
      for (let i = 0; i < 50; i++) {
        const adding = i % 2 === 0;
        const t0 = performance.now();
        const r = await api(a.api, adding ? ADD : DEL, token, adding ? { items: [{ ip }] } : { ips: [ip] });
        expect(r.json.code).toBe(200);
        ms.push(
          await until(t0, async () => (await probe(b.httpProxy, target, { source: ip })) === (adding ? 200 : 407)),
        );
      }
      report('api on daemon A -> gateway of daemon B', ms);
      expect(Math.max(...ms)).toBeLessThan(5000);
      expect(percentile(ms, 50)).toBeLessThan(1000);
    },
    patient(120_000),
  );

  it('and the other way round: a change through B applies on A', async () => {
    const ip = '8.8.8.8';
    const t0 = performance.now();
    expect((await api(b.api, ADD, token, { items: [{ ip }] })).json.code).toBe(200);
    expect(await until(t0, async () => (await probe(a.httpProxy, target, { source: ip })) === 200)).toBeLessThan(5000);
  });

  it('reports the view in /metrics and stays healthy', async () => {
    const text = await (await fetch(`${b.api}/metrics`)).text();
    expect(text).toMatch(/^proxyd_admission_view_sequence [1-9]\d*$/m);
    expect(text).toMatch(/^proxyd_admission_view_age_seconds [\d.e-]+$/m);
    expect(text).toMatch(/^proxyd_admission_view_stale 0$/m);
    expect(await (await fetch(`${b.api}/healthz`)).json()).toEqual({ status: 'ok' });
  });
});

describe('proxyd admin against a running daemon', () => {
  let d: Daemon;
  let echo: net.Server;
  let target: string;

  beforeAll(async () => {
    echo = await tcpEcho();
    target = addrOf(echo);
    d = await startDaemon({ args: GW });
  });
  afterAll(async () => {
    await d?.stop();
    echo?.close();
  });

  it('proxy user, whitelist status and account status changes apply to new connections within 1 s', async () => {
    const { token } = await makeAccount(d.dataDir, 'ops@example.com');
    expect((await api(d.api, ADD, token, { items: [{ ip: '8.8.4.4' }] })).json.code).toBe(200);
    const ms: number[] = [];
    const step = async (args: string[], check: () => Promise<boolean>) => {
      const r = await admin(d.dataDir, args);
      expect(r.code, r.stderr).toBe(0);
      // From the admin process's exit: its commit came just before.
      ms.push(await until(performance.now(), check));
    };
    const viaIp = () => probe(d.httpProxy, target, { source: '8.8.4.4' });
    const created = await admin(d.dataDir, [
      'proxy-user',
      'create',
      '--email',
      'ops@example.com',
      '--username',
      'dave',
    ]);
    const dave = { user: 'dave', password: created.json.password as string };
    ms.push(await until(performance.now(), async () => (await probe(d.httpProxy, target, dave)) === 200));
    for (let i = 0; i < 3; i++) {
      await step(
        ['whitelist', 'set-status', '--email', 'ops@example.com', '--ip', '8.8.4.4', '--status', 'disabled'],
        async () => (await viaIp()) === 407,
      );
      await step(
        ['whitelist', 'set-status', '--email', 'ops@example.com', '--ip', '8.8.4.4', '--status', 'active'],
        async () => (await viaIp()) === 200,
      );
      await step(
        ['account', 'set', '--email', 'ops@example.com', '--status', 'suspended'],
        async () => (await probe(d.httpProxy, target, dave)) === 407,
      );
      await step(
        ['account', 'set', '--email', 'ops@example.com', '--status', 'active'],
        async () => (await probe(d.httpProxy, target, dave)) === 200,
      );
    }
    report('proxyd admin -> gateway', ms);
    expect(Math.max(...ms)).toBeLessThan(5000);
    expect(percentile(ms, 50)).toBeLessThan(1000);
  }, 120_000); // 14 `proxyd admin` processes: seconds each on a loaded machine
});

describe('--workers 2: each worker holds its own view', () => {
  it(
    'a change reaches every worker (connections are spread round robin)',
    async () => {
      const echo = await tcpEcho();
      const target = addrOf(echo);
      const d = await startDaemon({ args: ['--workers', '2', ...GW] });
      try {
        const { token } = await makeAccount(d.dataDir, 'workers@example.com');
        const ip = '8.8.4.4';
        for (const adding of [true, false, true]) {
          const t0 = performance.now();
          const r = await api(d.api, adding ? ADD : DEL, token, adding ? { items: [{ ip }] } : { ips: [ip] });
          expect(r.json.code).toBe(200);
          // Eight connections in a row must all agree: with two workers, both views have the change.
          const ms = await until(t0, async () => {
            const codes = await Promise.all(
              Array.from({ length: 8 }, () => probe(d.httpProxy, target, { source: ip })),
            );
            return codes.every((c) => c === (adding ? 200 : 407));
          });
          expect(ms).toBeLessThan(5000);
        }
        const text = await (await fetch(`${d.api}/metrics`)).text();
        expect(text).toMatch(/^proxyd_admission_view_whitelist_ips 1$/m);
      } finally {
        await d.stop();
        echo.close();
      }
    },
    patient(120_000),
  );
});
