// The usage endpoints against real traffic: tunnels through an in-process gateway, metered into the store as the
// daemon's meter does, read back through the API: exact bytes, every refused query, the uniform 401, the
// endpoints' own rate limit, and one account never seeing another's usage.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RATE_LIMITS, USAGE_PATHS } from '../../../src/contract/paths.js';
import { UsageMeter } from '../../../src/daemon/metering/meter.js';
import { adminUsage } from '../../../src/daemon/admin/usage.js';
import { bearer, makeTestApp, q, type TestApp } from '../../helpers/app.js';
import { LIST } from '../../helpers/daemon.js';
import { BACKENDS } from '../../helpers/postgres.js';
import { RawClient, basic, startTestGateway, type TestGateway } from '../../gateway/helpers.js';
import { patient } from '../../helpers/patience.js';

const PASSWORD = 'usage-api-pw-1';

/** Reads exactly `up` bytes from each connection, then writes `down` bytes and closes. */
async function exactTarget(up: number, down: number): Promise<net.Server> {
  const server = net.createServer((s) => {
    let got = 0;
    s.on('data', (b) => {
      got += b.length;
      if (got === up) s.end(Buffer.alloc(down, 0x61));
    });
    s.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return server;
}

interface Envelope<T = any> {
  code: number;
  message: string;
  requestId: string;
  data: T;
}

describe.each(BACKENDS)('usage API over metered gateway traffic (%s)', (backend) => {
  let t: TestApp;
  let g: TestGateway;
  let meter: UsageMeter;
  // Each account's usage:read key (the usage endpoints take API keys, not the account token).
  let a: { accountId: number; token: string; key: string };
  let b: { accountId: number; token: string; key: string };
  const servers: net.Server[] = [];
  const [U, D] = [1_234_567, 2_345_678];

  async function get<T = any>(path: string, key: string | null, query = '', headers: Record<string, string> = {}) {
    const url = `${path}${query ? `?${query}` : ''}`;
    const r = await t.app.inject({ method: 'GET', url, headers: { ...(key === null ? {} : bearer(key)), ...headers } });
    return { status: r.statusCode, headers: r.headers, body: r.json() as Envelope<T> };
  }

  async function tunnel(target: net.Server, up: number, auth: string | null, host = '127.0.0.1'): Promise<number> {
    const c = await RawClient.connect(g.httpPort);
    const port = (target.address() as net.AddressInfo).port;
    c.write(`CONNECT ${host}:${port} HTTP/1.1\r\n${auth ? `Proxy-Authorization: ${auth}\r\n` : ''}\r\n`);
    expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    c.write(Buffer.alloc(up, 0x62));
    return (await c.readToEnd(10_000)).length;
  }

  beforeAll(async () => {
    // Room for the 401 test's many refusals from one source (the lock-out has tests of its own).
    t = await makeTestApp({ backend, limits: { invalidTokenPerIp: 1000 } });
    // The meter stamps flushes with the wall clock: the API reads "now" from the same one.
    Object.defineProperty(t.clock, 'now', { get: () => Date.now() });
    const withKey = async (email: string) => {
      const acc = await t.account(email);
      return { ...acc, key: (await t.key(acc.accountId, ['usage:read'])).key };
    };
    a = await withKey('usage-a@example.com');
    b = await withKey('usage-b@example.com');
    // Every name resolves to loopback: the targets below are named as a customer would name them.
    g = await startTestGateway({ lookup: async () => [{ address: '127.0.0.1', family: 4 }] });
    g.admission.users.set('alice', { password: PASSWORD, accountId: a.accountId });
    g.admission.users.set('bob', { password: PASSWORD, accountId: b.accountId });
    g.admission.whitelist.set('127.0.0.1', a.accountId);
    meter = new UsageMeter(t.store.usage, () => g.gw.collectUsage());
    const target = await exactTarget(U, D);
    servers.push(target);
    expect(await tunnel(target, U, basic('alice', PASSWORD))).toBe(D);
    // Whitelist traffic (no credentials) counts for the account under the source IP.
    const small = await exactTarget(1000, 2000);
    servers.push(small);
    expect(await tunnel(small, 1000, null)).toBe(2000);
    const other = await exactTarget(777, 888);
    servers.push(other);
    expect(await tunnel(other, 777, basic('bob', PASSWORD))).toBe(888);
    // Two names under one registrable domain (example.co.uk: co.uk is a public suffix), one name of its own.
    const named = await exactTarget(1000, 500);
    servers.push(named);
    expect(await tunnel(named, 1000, basic('alice', PASSWORD), 'a.b.example.co.uk')).toBe(500);
    expect(await tunnel(named, 1000, basic('alice', PASSWORD), 'C.Example.CO.UK.')).toBe(500);
    expect(await tunnel(named, 1000, basic('alice', PASSWORD), 'localhost')).toBe(500);
    await meter.tick();
  }, patient(30_000));

  afterAll(async () => {
    for (const s of servers) s.close();
    await g?.gw.close(0);
    await t?.close();
  });

  it('summary: a tunnel of U up and D down is exactly U and D for its user, whitelist traffic under ip:, over the current month', async () => {
    const r = await get(USAGE_PATHS.summary, a.key);
    expect(r.status).toBe(200);
    expect(r.headers['cache-control']).toBe('no-store');
    expect(r.headers['x-request-id']).toBe(r.body.requestId);
    expect(r.body.code).toBe(200);
    const d = r.body.data;
    const now = new Date();
    expect(d.from).toBe(
      new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString().replace('.000Z', 'Z'),
    );
    expect(Date.parse(d.to)).toBeGreaterThan(Date.now() - 2000);
    expect(d.plan).toBeNull();
    expect(d.users).toEqual([
      { user: 'ip:127.0.0.1', bytes_up: 1000, bytes_down: 2000, connections: 1 },
      { user: 'alice', bytes_up: U + 3000, bytes_down: D + 1500, connections: 4 },
    ]);
    expect({ up: d.bytes_up, down: d.bytes_down, c: d.connections }).toEqual({ up: U + 4000, down: D + 3500, c: 5 });
  });

  it('summary shows the plan when there is one', async () => {
    await t.store.plans.set({
      accountId: b.accountId,
      trafficLimit: 5 * 2 ** 30,
      period: 'day',
      anchorDay: 1,
      maxConnections: 7,
      expiresAt: Date.UTC(2030, 0, 1),
    });
    const d = (await get(USAGE_PATHS.summary, b.key)).body.data;
    expect(d.plan).toEqual({
      traffic_limit: 5 * 2 ** 30,
      period: 'day',
      max_connections: 7,
      expires_at: '2030-01-01T00:00:00Z',
    });
    expect(d.from).toBe(new Date(Math.floor(Date.now() / 86_400_000) * 86_400_000).toISOString().replace('.000Z', 'Z'));
    expect(d.users).toEqual([{ user: 'bob', bytes_up: 777, bytes_down: 888, connections: 1 }]);
  });

  it('series: the current hour holds exactly the bytes; every hour of the range is a point, oldest first; user filters', async () => {
    const hour = 3_600_000;
    const thisHour = Math.floor(Date.now() / hour) * hour;
    const from = new Date(thisHour - 5 * hour).toISOString();
    const r = await get(USAGE_PATHS.series, a.key, `granularity=hour&from=${from}`);
    expect(r.body.code).toBe(200);
    const pts = r.body.data.points as Array<{
      time: string;
      bytes_up: number;
      bytes_down: number;
      connections: number;
    }>;
    expect(r.body.data.granularity).toBe('hour');
    expect(pts.length).toBe(6);
    expect(pts.map((p) => Date.parse(p.time))).toEqual([5, 4, 3, 2, 1, 0].map((k) => thisHour - k * hour));
    expect(pts.at(-1)).toMatchObject({ bytes_up: U + 4000, bytes_down: D + 3500, connections: 5 });
    expect(pts.slice(0, -1).every((p) => p.bytes_up === 0 && p.bytes_down === 0)).toBe(true);
    const alice = (await get(USAGE_PATHS.series, a.key, `granularity=day&user=alice`)).body.data.points;
    expect(alice.reduce((n: number, p: { bytes_up: number }) => n + p.bytes_up, 0)).toBe(U + 3000);
    expect(alice.reduce((n: number, p: { bytes_down: number }) => n + p.bytes_down, 0)).toBe(D + 1500);
    const ip = (await get(USAGE_PATHS.series, a.key, `granularity=day&user=ip:127.0.0.1`)).body.data.points;
    expect(ip.reduce((n: number, p: { bytes_up: number }) => n + p.bytes_up, 0)).toBe(1000);
  });

  it('domains: names under their registrable domain, an IP under its address, largest first; domains and other add up to the totals', async () => {
    const r = await get(USAGE_PATHS.domains, a.key);
    expect(r.body.code).toBe(200);
    expect(r.body.data).toEqual({
      domains: [
        { domain: '127.0.0.1', bytes_up: U + 1000, bytes_down: D + 2000, connections: 2 },
        { domain: 'example.co.uk', bytes_up: 2000, bytes_down: 1000, connections: 2 },
        { domain: 'localhost', bytes_up: 1000, bytes_down: 500, connections: 1 },
      ],
      other: { bytes_up: 0, bytes_down: 0, connections: 0 },
    });
    const alice = (await get(USAGE_PATHS.domains, a.key, 'user=alice&limit=1')).body.data;
    expect(alice).toEqual({
      domains: [{ domain: '127.0.0.1', bytes_up: U, bytes_down: D, connections: 1 }],
      other: { bytes_up: 3000, bytes_down: 1500, connections: 3 },
    });
    const today = new Date().toISOString().slice(0, 10);
    const one = (await get(USAGE_PATHS.domains, a.key, `from=${today}&to=${today}&user=ip:127.0.0.1`)).body.data;
    expect(one.domains).toEqual([{ domain: '127.0.0.1', bytes_up: 1000, bytes_down: 2000, connections: 1 }]);
    // Totals over domains equal the summary's, per user and for the account.
    const summary = (await get(USAGE_PATHS.summary, a.key)).body.data;
    const add = (d: {
      domains: Array<{ bytes_up: number; bytes_down: number; connections: number }>;
      other: { bytes_up: number; bytes_down: number; connections: number };
    }) =>
      [...d.domains, d.other].reduce(
        (t, x) => ({ up: t.up + x.bytes_up, down: t.down + x.bytes_down, c: t.c + x.connections }),
        { up: 0, down: 0, c: 0 },
      );
    expect(add(r.body.data)).toEqual({ up: summary.bytes_up, down: summary.bytes_down, c: summary.connections });
    const aliceRow = summary.users.find((u: { user: string }) => u.user === 'alice');
    expect(add(alice)).toEqual({ up: aliceRow.bytes_up, down: aliceRow.bytes_down, c: aliceRow.connections });
    // A day with no traffic is empty; the other account sees nothing of these.
    expect((await get(USAGE_PATHS.domains, a.key, 'from=2026-01-01&to=2026-01-02')).body.data).toEqual({
      domains: [],
      other: { bytes_up: 0, bytes_down: 0, connections: 0 },
    });
    const fromB = (await get(USAGE_PATHS.domains, b.key)).body.data;
    expect(fromB.domains).toEqual([{ domain: '127.0.0.1', bytes_up: 777, bytes_down: 888, connections: 1 }]);
  });

  it("one account never sees another's usage", async () => {
    const sb = (await get(USAGE_PATHS.summary, b.key)).body.data;
    expect(sb.users.map((u: { user: string }) => u.user)).toEqual(['bob']);
    expect(sb.bytes_up).toBe(777);
    const aliceFromB = (await get(USAGE_PATHS.series, b.key, 'granularity=day&user=alice')).body.data.points;
    expect(
      aliceFromB.every(
        (p: { bytes_up: number; bytes_down: number; connections: number }) =>
          p.bytes_up === 0 && p.bytes_down === 0 && p.connections === 0,
      ),
    ).toBe(true);
    const bobFromA = (await get(USAGE_PATHS.series, a.key, 'granularity=day&user=bob')).body.data.points;
    expect(bobFromA.every((p: { bytes_up: number }) => p.bytes_up === 0)).toBe(true);
  });

  it('10400 naming the field: unknown and repeated parameters, bad dates, from after to, more than 1,000 points', async () => {
    const cases: Array<[string, string, string]> = [
      [USAGE_PATHS.summary, 'foo=1', 'foo'],
      [USAGE_PATHS.summary, 'from=2026-13-01', 'from'],
      [USAGE_PATHS.summary, 'from=2026-02-30', 'from'],
      [USAGE_PATHS.summary, 'to=yesterday', 'to'],
      [USAGE_PATHS.summary, 'to=2026-11-21T10:00:00', 'to'],
      // A zone offset no clock has (hours past 23, minutes past 59) is a bad date, not a shift of a day or more.
      [USAGE_PATHS.summary, 'to=2026-11-21T10:00:00%2B25:00', 'to'],
      [USAGE_PATHS.summary, 'from=2026-11-21T10:00:00-99:99', 'from'],
      [USAGE_PATHS.series, 'granularity=hour&from=2026-11-21T10:00:00%2B05:60', 'from'],
      [USAGE_PATHS.summary, 'from=2026-11-02&to=2026-11-01', 'from'],
      [USAGE_PATHS.summary, 'from=2026-11-01&from=2026-11-02', 'from'],
      [USAGE_PATHS.series, '', 'granularity'],
      [USAGE_PATHS.series, 'granularity=minute', 'granularity'],
      [USAGE_PATHS.series, 'granularity=hour&from=2026-01-01&to=2026-03-01', 'from'],
      [USAGE_PATHS.series, 'granularity=day&from=2020-01-01&to=2026-01-01', 'from'],
      [USAGE_PATHS.series, 'granularity=day&from=2026-11-05T00:00:00Z&to=2026-11-04T23:59:59Z', 'from'],
      [USAGE_PATHS.series, 'granularity=day&user=', 'user'],
      // A NUL is in no username (on PostgreSQL the query failed: 500, 10500).
      [USAGE_PATHS.series, 'granularity=day&user=%00', 'user'],
      [USAGE_PATHS.domains, 'user=a%00b', 'user'],
      [USAGE_PATHS.series, 'granularity=day&bar=2', 'bar'],
      [USAGE_PATHS.domains, 'from=2026-11-01T00:00:00Z', 'from'],
      [USAGE_PATHS.domains, 'to=2026-11-31', 'to'],
      [USAGE_PATHS.domains, 'from=2026-11-02&to=2026-11-01', 'from'],
      [USAGE_PATHS.domains, 'limit=0', 'limit'],
      [USAGE_PATHS.domains, 'limit=1001', 'limit'],
      [USAGE_PATHS.domains, 'limit=ten', 'limit'],
      [USAGE_PATHS.domains, 'granularity=day', 'granularity'],
    ];
    for (const [path, query, field] of cases) {
      const r = await get(path, a.key, query);
      expect({ path, query, status: r.status, code: r.body.code, data: r.body.data }).toEqual({
        path,
        query,
        status: 200,
        code: 10400,
        data: null,
      });
      expect(r.body.message, `${path}?${query}`).toMatch(new RegExp(`^invalid parameters: ${field}\\b`));
    }
    // Exactly 1,000 points is fine; a zone offset is read as such.
    expect(
      (await get(USAGE_PATHS.series, a.key, 'granularity=hour&from=2026-01-01T00:00:00Z&to=2026-02-11T16:00:00Z')).body
        .data.points,
    ).toHaveLength(1000);
    const off = (await get(USAGE_PATHS.summary, a.key, 'from=2026-11-01T02:00:00%2B02:00&to=2026-11-02')).body.data;
    expect(off.from).toBe('2026-11-01T00:00:00Z');
    // A `+` left unencoded in the URL (as docs/api.md writes the time) arrives as a space: it is read as the `+`.
    const raw = await get(USAGE_PATHS.summary, a.key, 'from=2026-11-01T02:00:00+02:00&to=2026-11-02');
    expect({ code: raw.body.code, from: raw.body.data?.from }).toEqual({ code: 200, from: '2026-11-01T00:00:00Z' });
  });

  it('401 is the same for every cause, on every usage endpoint: the account token is not read here', async () => {
    const bodies = new Set<string>();
    const { token } = await t.account('usage-401@example.com');
    for (const path of Object.values(USAGE_PATHS)) {
      for (const r of [
        await get(path, null),
        await get(path, ''),
        await get(path, 'nonsense'),
        await get(path, `${a.key.slice(0, -4)}AAAA`),
        await get(path, 'pxk_0000000000000000_abcdefabcdefabcdefabcdefabcdef'),
        // The account token opens the whitelist only: in its query parameter, as a Bearer, or in X-API-Key.
        await get(path, null, `api_key=${encodeURIComponent(token)}`),
        await get(path, token),
        await get(path, null, '', { 'x-api-key': a.key }),
        await get(path, null, `api_key=${encodeURIComponent(a.key)}`),
      ]) {
        expect(r.status).toBe(401);
        bodies.add(JSON.stringify({ ...r.body, requestId: '' }));
      }
    }
    expect([...bodies]).toEqual([
      JSON.stringify({ code: 10401, message: 'invalid api key', requestId: '', data: null }),
    ]);
  });

  it(`${RATE_LIMITS.usage} calls per rolling 60 s per key across the three, then 10429 with Retry-After; the whitelist's own limit is apart`, async () => {
    const c = await t.account('usage-limit@example.com');
    const ck = (await t.key(c.accountId, ['usage:read'])).key;
    const paths = Object.values(USAGE_PATHS);
    for (let i = 0; i < RATE_LIMITS.usage; i++) {
      const r = await get(
        paths[i % paths.length]!,
        ck,
        paths[i % paths.length] === USAGE_PATHS.series ? 'granularity=day' : '',
      );
      expect(r.status).toBe(200);
    }
    for (const path of paths) {
      const r = await get(path, ck, path === USAGE_PATHS.series ? 'granularity=day' : '');
      expect(r.status).toBe(429);
      expect(r.body).toMatchObject({ code: 10429, data: null });
      expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(Number(r.headers['retry-after'])).toBeLessThanOrEqual(60);
    }
    expect((await t.app.inject({ method: 'GET', url: `${LIST}${q(c.token)}` })).json().code).toBe(200);
  });

  it('the OpenAPI document lists the usage endpoints with the parameters their schemas validate', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json() as {
      paths: Record<string, { get: { parameters: Array<{ name: string; required: boolean }> } }>;
    };
    for (const path of Object.values(USAGE_PATHS)) expect(doc.paths[path]?.get, path).toBeTruthy();
    const params = (path: string) =>
      Object.fromEntries(doc.paths[path]!.get.parameters.map((p) => [p.name, p.required]));
    expect(params(USAGE_PATHS.summary)).toEqual({ from: false, to: false });
    expect(params(USAGE_PATHS.series)).toEqual({ granularity: true, from: false, to: false, user: false });
    expect(params(USAGE_PATHS.domains)).toEqual({ from: false, to: false, user: false, limit: false });
  });
});

describe.each(BACKENDS)('usage API on a daemon keeping minutes less than 48 h (%s)', (backend) => {
  const HOUR = 3_600_000;
  const DAY = 24 * HOUR;

  it('summary reads the hours where its range starts before the minutes kept (--usage-retention minute=1h)', async () => {
    const t = await makeTestApp({ backend, usageRetentionMs: { minute: HOUR, hour: 90 * DAY, day: 730 * DAY } });
    try {
      const a = await t.account('usage-retention@example.com');
      const { key } = await t.key(a.accountId, ['usage:read']);
      const at = t.clock.now - 3 * HOUR;
      const delta = {
        accountId: a.accountId,
        subject: 'user:alice',
        target: 'example.com',
        bytesUp: 100,
        bytesDown: 200,
        connections: 1,
      };
      expect(await t.store.usage.addFlush('node-1', 'flush-1', at, [delta])).toBe('ok');
      await t.store.usage.rollUp?.();
      // What the daemon's meter prunes with minute=1h.
      await t.store.usage.prune('minute', t.clock.now - HOUR);
      for (const from of [new Date(t.clock.now - 4 * HOUR).toISOString(), '2026-11-21']) {
        const r = await t.app.inject({
          method: 'GET',
          url: `${USAGE_PATHS.summary}?from=${from}`,
          headers: bearer(key),
        });
        const d = r.json().data;
        expect({ from, users: d.users, up: d.bytes_up }).toEqual({
          from,
          users: [{ user: 'alice', bytes_up: 100, bytes_down: 200, connections: 1 }],
          up: 100,
        });
      }
      // `proxyd admin usage` is told the daemons' retention the same way.
      const report = await adminUsage(
        t.store,
        {
          email: 'usage-retention@example.com',
          from: new Date(t.clock.now - 4 * HOUR).toISOString(),
          usageRetention: 'minute=1h',
        },
        t.clock.now,
      );
      expect(report.rows).toEqual([{ user: 'alice', bytes_up: 100, bytes_down: 200, connections: 1 }]);
      await expect(
        adminUsage(t.store, { email: 'usage-retention@example.com', usageRetention: 'minute=soon' }, t.clock.now),
      ).rejects.toThrow(/--usage-retention/);
    } finally {
      await t.close();
    }
  });
});
