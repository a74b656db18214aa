// The ready line means "serving" with --redis-url: it comes after the Redis client is connected, or after a
// bounded wait with a redis_down line (then the daemon serves degraded and recovers when Redis comes).
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { ApiLimits, DEFAULT_LIMITS } from '../../src/daemon/ratelimit/api-limits.js';
import { RedisWindowStore } from '../../src/daemon/ratelimit/redis-store.js';
import { makeAccount, PROXYD, run, startDaemon, tempDir, type Daemon, LIST } from '../helpers/daemon.js';
import { waitFor } from '../helpers/wait.js';
import { freePort } from '../helpers/net.js';
import { api, startRedis, type RedisServer } from './helpers.js';
import { patient } from '../helpers/patience.js';

const events = (d: Daemon) => d.logs.map((l) => JSON.parse(l) as { event?: string; level: number });

describe('start-up with Redis up', () => {
  let redis: RedisServer;
  const daemons: Daemon[] = [];
  afterAll(async () => {
    await Promise.all(daemons.map((d) => d.stop()));
    await redis?.kill();
  });

  it('the first request after the ready line is served (three fresh starts)', async () => {
    redis = await startRedis();
    const dataDir = tempDir();
    const { token } = await makeAccount(dataDir, 'first@example.com');
    for (let i = 0; i < 3; i++) {
      const d = await startDaemon({ dataDir, args: ['--redis-url', redis.url] });
      daemons.push(d);
      const r = await api(d.api, LIST, token);
      expect(r.status).toBe(200);
      expect(r.json.code).toBe(200);
      await waitFor('redis_up line', () => events(d).some((e) => e.event === 'redis_up'));
      expect(events(d).some((e) => e.event === 'redis_down')).toBe(false);
      expect(await d.stop()).toBe(0);
    }
  });
});

describe('start-up with Redis away', () => {
  let redis: RedisServer | undefined;
  let d: Daemon | undefined;
  afterAll(async () => {
    await d?.stop();
    await redis?.kill();
  });

  it('is ready within the bound, logs redis_down, answers 503/10503, then recovers when Redis starts', async () => {
    // A port with no Redis on it yet; the same port gets a real redis-server later.
    redis = await startRedis();
    await redis.kill();
    const dataDir = tempDir();
    const { token } = await makeAccount(dataDir, 'away@example.com');
    const t0 = Date.now();
    d = await startDaemon({ dataDir, args: ['--redis-url', redis.url], timeoutMs: 20_000 });
    const toReady = Date.now() - t0;
    expect(toReady).toBeLessThan(patient(15_000)); // 3 s wait plus start-up, generous for a loaded machine
    await waitFor('redis_down line', () => events(d!).find((e) => e.event === 'redis_down'));
    expect(events(d).find((e) => e.event === 'redis_down')!.level).toBe(40);

    const down = await api(d.api, LIST, token);
    expect(down.status).toBe(503);
    expect(down.json).toMatchObject({ code: 10503, data: null });
    expect(down.ms).toBeLessThan(patient(2000));

    await redis.restart();
    await waitFor('served again', async () => (await api(d!.api, LIST, token)).status === 200, 10_000);
    expect(events(d).some((e) => e.event === 'redis_up')).toBe(true);
    expect((await fetch(`${d.api}/healthz`)).status).toBe(200);
  });
});

describe('start-up failure with --redis-url', () => {
  it('exits 1 at once instead of hanging on a Redis client that keeps reconnecting', async () => {
    const deadRedis = `redis://127.0.0.1:${await freePort()}`;
    const busy = net.createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
    const busyPort = (busy.address() as net.AddressInfo).port;
    try {
      const common = [
        'serve',
        '--data-dir',
        tempDir(),
        '--http-proxy-listen',
        '127.0.0.1:0',
        '--socks-listen',
        '127.0.0.1:0',
        '--redis-url',
        deadRedis,
      ];
      const geo = await run(PROXYD, [...common, '--api-listen', '127.0.0.1:0', '--geoip-db', '/nonexistent/geo.mmdb'], {
        timeoutMs: 20_000,
      });
      expect(geo.code).toBe(1);
      expect(geo.stderr).toMatch(/nonexistent/);
      const inUse = await run(PROXYD, [...common, '--api-listen', `127.0.0.1:${busyPort}`], { timeoutMs: 20_000 });
      expect(inUse.code).toBe(1);
      expect(inUse.stderr).toMatch(/address in use/);
    } finally {
      busy.close();
    }
  });
});

describe('RedisWindowStore before its first connection', () => {
  it('a command sent while the client is still connecting waits for it instead of failing at once', async () => {
    const redis = await startRedis();
    const store = new RedisWindowStore(redis.url);
    try {
      // No wait for 'ready': before the fix this failed at once ("Stream isn't writeable").
      const limits = new ApiLimits(store, DEFAULT_LIMITS);
      expect(await limits.consumeToken('akfirst', 'list')).toEqual({ allowed: true });
    } finally {
      await store.close();
      await redis.kill();
    }
  });

  it('ready() gives up after its bound with one state change to down; commands then fail fast', async () => {
    const port = await freePort();
    const changes: boolean[] = [];
    const store = new RedisWindowStore(`redis://127.0.0.1:${port}`, { onStateChange: (up) => changes.push(up) });
    try {
      const t0 = Date.now();
      expect(await store.ready(300)).toBe(false);
      expect(Date.now() - t0).toBeLessThan(patient(3000));
      expect(changes).toEqual([false]);
      // Down is known now: commands fail fast instead of waiting.
      const limits = new ApiLimits(store, DEFAULT_LIMITS);
      await expect(limits.consumeToken('akdown', 'list')).rejects.toThrow(/unavailable/);
    } finally {
      await store.close();
    }
  });
});
