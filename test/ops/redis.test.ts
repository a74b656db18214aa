// --redis-url against a real redis-server: outage answers 503/10503 fast and executes nothing, service
// returns without a restart, and two daemons on one database and one Redis share a token's limit exactly.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  admin,
  inspectDb,
  makeAccount,
  PROXYD,
  run,
  startDaemon,
  tempDir,
  type Daemon,
  ADD,
  DEL,
  LIST,
} from '../helpers/daemon.js';
import { waitFor } from '../helpers/wait.js';
import { api, pub, startRedis, type RedisServer } from './helpers.js';
import { patient } from '../helpers/patience.js';

const liveEntries = async (dataDir: string, ip: string): Promise<number> => {
  const db = await inspectDb(dataDir);
  try {
    return db.get<{ n: number }>('SELECT COUNT(*) AS n FROM whitelist_entries WHERE ip = ? AND deleted_at IS NULL', ip)
      .n;
  } finally {
    db.close();
  }
};

describe('proxyd serve --redis-url: Redis outage', () => {
  let redis: RedisServer;
  let d: Daemon;
  let token: string;
  beforeAll(async () => {
    redis = await startRedis();
    d = await startDaemon({ args: ['--redis-url', redis.url] });
    token = (await makeAccount(d.dataDir, 'outage@example.com')).token;
  });
  afterAll(async () => {
    await d?.stop();
    await redis?.kill();
  });

  it('serves and reports healthy while Redis is up', async () => {
    expect((await api(d.api, LIST, token)).json.code).toBe(200);
    expect(await (await fetch(`${d.api}/healthz`)).json()).toEqual({ status: 'ok' });
    expect(await (await fetch(`${d.api}/metrics`)).text()).toMatch(/^proxyd_dependency_up\{dependency="redis"\} 1$/m);
  });

  it('Redis killed: every whitelist request is 503/10503 within 500 ms and nothing is executed', async () => {
    await redis.kill('SIGKILL');
    const ip = pub(1);
    for (const [p, body] of [
      [LIST, undefined],
      [ADD, { items: [{ ip }] }],
      [DEL, { ips: [ip] }],
    ] as const) {
      const r = await api(d.api, p, token, body);
      expect(r.status).toBe(503);
      expect(r.json).toMatchObject({ code: 10503, data: null });
      expect(r.ms).toBeLessThan(patient(500));
    }
    // An invalid token is not a way around the limiter either: it is refused before the token is checked.
    const bad = await api(d.api, LIST, 'akXXXXXXXXXXXXXXXXXXXX.nope');
    expect(bad.status).toBe(503);
    expect(await liveEntries(d.dataDir, ip)).toBe(0);
    const h = await fetch(`${d.api}/healthz`);
    expect(h.status).toBe(503);
    expect(await h.json()).toEqual({ status: 'unavailable', down: ['redis'] });
    // What ProxydRedisUnreachable reads.
    const metrics = await (await fetch(`${d.api}/metrics`)).text();
    expect(metrics).toMatch(/^proxyd_dependency_up\{dependency="redis"\} 0$/m);
    expect(metrics).toMatch(/^proxyd_dependency_up\{dependency="database"\} 1$/m);
  });

  it('comes back by itself when Redis returns', async () => {
    await redis.restart();
    await waitFor('healthz 200', async () => (await fetch(`${d.api}/healthz`)).status === 200, 5000);
    const r = await api(d.api, ADD, token, { items: [{ ip: pub(2) }] });
    expect(r.json.code).toBe(200);
    expect(await liveEntries(d.dataDir, pub(2))).toBe(1);
  });

  it('Redis hanging (SIGSTOP): still 503/10503 within 500 ms, nothing executed, then recovers', async () => {
    redis.stop();
    try {
      const ip = pub(3);
      const results = await Promise.all([0, 1, 2, 3].map(() => api(d.api, ADD, token, { items: [{ ip }] })));
      for (const r of results) {
        expect(r.status).toBe(503);
        expect(r.json.code).toBe(10503);
        expect(r.ms).toBeLessThan(patient(500));
      }
      expect(await liveEntries(d.dataDir, ip)).toBe(0);
    } finally {
      redis.cont();
    }
    await waitFor('service back', async () => (await api(d.api, LIST, token)).status === 200, 5000);
  });
});

describe('two daemons on one database and one Redis (--shared-data-dir)', () => {
  let redis: RedisServer;
  let a: Daemon;
  let b: Daemon;
  const dataDir = tempDir();
  beforeAll(async () => {
    redis = await startRedis();
    a = await startDaemon({ dataDir, args: ['--redis-url', redis.url, '--shared-data-dir'] });
    b = await startDaemon({ dataDir, args: ['--redis-url', redis.url, '--shared-data-dir'] });
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await redis?.kill();
  });

  it('share a token limit exactly: 10 adds in total, the 11th is 429 on either daemon', async () => {
    const { token } = await makeAccount(dataDir, 'shared@example.com');
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => api(i % 2 ? a.api : b.api, ADD, token, { items: [{ ip: pub(100 + i) }] })),
    );
    expect(results.map((r) => r.json.code)).toEqual(Array(10).fill(200));
    for (const d of [a, b]) {
      const r = await api(d.api, ADD, token, { items: [{ ip: pub(200) }] });
      expect(r.status).toBe(429);
      expect(r.json.code).toBe(10429);
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
    }
  });

  it('share it under parallel load too: of 30 racing adds exactly 10 succeed', async () => {
    const { token } = await makeAccount(dataDir, 'race@example.com');
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, i) => api(i % 2 ? a.api : b.api, ADD, token, { items: [{ ip: pub(300 + i) }] })),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(10);
    expect(results.filter((r) => r.status === 429)).toHaveLength(20);
  });

  it('see each other: an entry added on one is listed on the other; a token reset kills the old token on both', async () => {
    const { token } = await makeAccount(dataDir, 'seen@example.com');
    expect((await api(a.api, ADD, token, { items: [{ ip: pub(500) }] })).json.code).toBe(200);
    expect((await api(b.api, LIST, token)).json.data.items.map((i: { ip: string }) => i.ip)).toEqual([pub(500)]);
    const reset = await admin(dataDir, ['token', 'reset', '--email', 'seen@example.com']);
    for (const d of [a, b]) {
      expect((await api(d.api, LIST, token)).status).toBe(401);
      expect((await api(d.api, LIST, reset.json.token)).status).toBe(200);
    }
  });

  it('a daemon without --shared-data-dir is still refused while sharers run, and vice versa', async () => {
    const args = [
      'serve',
      '--data-dir',
      dataDir,
      '--api-listen',
      '127.0.0.1:0',
      '--http-proxy-listen',
      '127.0.0.1:0',
      '--socks-listen',
      '127.0.0.1:0',
    ];
    const excl = await run(PROXYD, args);
    expect(excl.code).not.toBe(0);
    expect(excl.stdout).toBe('');
    expect(excl.stderr).toMatch(/--shared-data-dir/);

    const lone = tempDir();
    const owner = await startDaemon({ dataDir: lone });
    try {
      const sharer = await run(PROXYD, ['serve', '--data-dir', lone, '--shared-data-dir', ...args.slice(3)]);
      expect(sharer.code).not.toBe(0);
      expect(sharer.stderr).toMatch(/another proxyd \(pid \d+\) is serving this data dir/);
    } finally {
      await owner.stop();
    }
  });
});
