// `proxyctl usage` against a real API over a real store, with an API key (usage:read; the account token alone is exit 4):
// --json is the endpoint's data, the table (binary units, a bar per row on a terminal only), the CSV header and raw
// counts, exit codes, and shell completion listing it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiClient } from '../../../src/cli/api.js';
import type { Deps } from '../../../src/cli/deps.js';
import { main } from '../../../src/cli/main.js';
import { createOutput } from '../../../src/cli/output.js';
import { TokenStore } from '../../../src/cli/token-store.js';
import { USAGE_PATHS } from '../../../src/contract/paths.js';
import { bearer, makeTestApp, type TestApp } from '../../helpers/app.js';
import { FakeClock, MemoryKeychain, memoryIo, tempConfigDir } from '../helpers/fakes.js';

let t: TestApp;
let base: string;
let token: string;
/** The account's API key with usage:read: what proxyctl usage takes. */
let key: string;

async function cli(argv: string[], opts: { tty?: boolean; key?: string } = {}) {
  const dir = tempConfigDir();
  const io = memoryIo({ ...(opts.tty !== undefined ? { tty: opts.tty } : {}) });
  const env: NodeJS.ProcessEnv = {
    PROXYCTL_CONFIG_DIR: dir,
    PROXYCTL_BASE_URL: base,
    PROXYCTL_API_KEY: opts.key ?? key,
    NO_COLOR: '1',
  };
  const code = await main(argv, {
    io,
    env,
    deps: async (ctx): Promise<Deps> => {
      const out = createOutput(io, { color: ctx.color, json: ctx.json, quiet: ctx.quiet });
      return {
        io,
        env,
        clock: new FakeClock(),
        out,
        tokens: new TokenStore({
          env,
          keychain: new MemoryKeychain(),
          dir: ctx.configDir,
          warn: (m) => out.warn(m),
          quiet: ctx.quiet,
        }),
        keys: new TokenStore({
          env,
          keychain: new MemoryKeychain(),
          dir: ctx.configDir,
          warn: (m) => out.warn(m),
          quiet: ctx.quiet,
          kind: 'key',
        }),
        makeApi: (b, tk) => new ApiClient({ baseUrl: b, token: tk, timeoutMs: 5000 }),
        readSecret: async () => '',
        progress: async () => null,
      };
    },
  });
  process.exitCode = 0;
  const result = { code, stdout: io.out(), stderr: io.err() };
  expect(result.stdout + result.stderr).not.toContain(token.split('.')[1]!);
  expect(result.stdout + result.stderr).not.toContain(key.slice(key.lastIndexOf('_') + 1));
  return result;
}

async function endpoint(path: string, query = ''): Promise<unknown> {
  const r = await fetch(`${base}${path}${query ? `?${query}` : ''}`, { headers: bearer(key) });
  return ((await r.json()) as { data: unknown }).data;
}

beforeAll(async () => {
  t = await makeTestApp();
  Object.defineProperty(t.clock, 'now', { get: () => Date.now() });
  const a = await t.account('cli-usage@example.com');
  token = a.token;
  key = (await t.key(a.accountId, ['usage:read'])).key;
  const now = Date.now();
  const d = (subject: string, target: string, up: number, down: number) => ({
    accountId: a.accountId,
    subject,
    target,
    bytesUp: up,
    bytesDown: down,
    connections: 1,
  });
  expect(
    await t.store.usage.addFlush('n1', 'f1', now, [
      d('user:alice', 'example.co.uk', 3 * 2 ** 20, 5 * 2 ** 20),
      d('ip:203.0.113.7', '198.51.100.1', 1024, 2048),
    ]),
  ).toBe('ok');
  expect(await t.store.usage.addFlush('n1', 'f2', now, [d('user:=bob', 'other.example', 10, 20)])).toBe('ok');
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await t?.close();
});

describe('proxyctl usage', () => {
  it("--json prints exactly the endpoint's data, for every --by", async () => {
    const cases: Array<[string[], string, string]> = [
      [[], USAGE_PATHS.summary, ''],
      [['--by', 'day'], USAGE_PATHS.series, 'granularity=day'],
      [
        ['--by', 'hour', '--from', new Date(Date.now() - 5 * 3_600_000).toISOString()],
        USAGE_PATHS.series,
        `granularity=hour&from=${new Date(Date.now() - 5 * 3_600_000).toISOString()}`,
      ],
      [['--by', 'domain', '--limit', '1'], USAGE_PATHS.domains, 'limit=1'],
      [['--by', 'domain', '--user', 'alice'], USAGE_PATHS.domains, 'user=alice'],
    ];
    for (const [args, path, query] of cases) {
      const r = await cli(['usage', '--json', ...args]);
      expect(r.code, r.stderr).toBe(0);
      const want = await endpoint(path, query);
      // A summary's `to` is "now": compare the rest, and `to` within a few seconds.
      const got = JSON.parse(r.stdout) as Record<string, unknown>;
      if (path === USAGE_PATHS.summary) {
        expect(Math.abs(Date.parse(got.to as string) - Date.parse((want as { to: string }).to))).toBeLessThan(5000);
        expect({ ...got, to: '' }).toEqual({ ...(want as object), to: '' });
      } else expect(got).toEqual(want);
    }
  });

  it('a table in binary units, totals, a bar per row on a terminal and none on a pipe', async () => {
    const tty = await cli(['usage'], { tty: true });
    expect(tty.code, tty.stderr).toBe(0);
    if (process.env.PROXYD_TEST_PRINT) console.log(tty.stdout);
    expect(tty.stdout).toMatch(/alice.*3 MiB.*5 MiB.*8 MiB.*1.*█/);
    expect(tty.stdout).toMatch(/ip:203\.0\.113\.7.*1 KiB.*2 KiB.*3 KiB/);
    expect(tty.stdout).toMatch(/total/);
    const pipe = await cli(['usage', '--by', 'domain']);
    expect(pipe.code).toBe(0);
    expect(pipe.stdout).toMatch(/example\.co\.uk.*3 MiB.*5 MiB/);
    expect(pipe.stdout).not.toMatch(/█/);
    const other = await cli(['usage', '--by', 'domain', '--limit', '1']);
    expect(other.stdout).toMatch(/\(other\)/);
  });

  it('--csv: the header per --by and raw byte counts; a formula-looking name is defused', async () => {
    const users = await cli(['usage', '--csv']);
    expect(users.code).toBe(0);
    const lines = users.stdout.trimEnd().split('\r\n');
    expect(lines[0]).toBe('user,bytes_up,bytes_down,connections');
    expect(lines).toContain(`alice,${3 * 2 ** 20},${5 * 2 ** 20},1`);
    expect(lines).toContain(`'=bob,10,20,1`);
    expect((await cli(['usage', '--csv', '--by', 'day'])).stdout.split('\r\n')[0]).toBe(
      'time,bytes_up,bytes_down,connections',
    );
    const domains = (await cli(['usage', '--csv', '--by', 'domain'])).stdout.split('\r\n');
    expect(domains[0]).toBe('domain,bytes_up,bytes_down,connections');
    expect(domains).toContain('198.51.100.1,1024,2048,1');
  });

  it('exit codes: 2 for usage errors, 4 for a rejected key, 5 when rate limited', async () => {
    for (const args of [
      ['usage', '--by', 'week'],
      ['usage', '--by', 'domain', '--from', '2026-11-01T00:00:00Z'],
      ['usage', '--from', 'yesterday'],
      ['usage', '--by', 'hour', '--from', '2026-11-26T10:00:00+25:00'],
      ['usage', '--limit', '5'],
      ['usage', '--user', 'alice'],
      ['usage', '--csv', '--json'],
      ['usage', '--by', 'domain', '--limit', '1001'],
    ]) {
      const r = await cli(args);
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
    }
    const bad = await cli(['usage'], { key: `${key.slice(0, key.lastIndexOf('_'))}_${'x'.repeat(43)}` });
    expect(bad.code).toBe(4);
    expect(bad.stderr).toContain('rejected the API key');
    const limited = await t.account('cli-usage-limited@example.com');
    const limitedKey = (await t.key(limited.accountId, ['usage:read'])).key;
    for (let i = 0; i < 60; i++) await fetch(`${base}${USAGE_PATHS.summary}`, { headers: bearer(limitedKey) });
    const r = await cli(['usage'], { key: limitedKey });
    expect(r.code).toBe(5);
    expect(r.stderr).toMatch(/rate limited/);
  });

  it('shell completion lists the command and its options', async () => {
    const r = await cli(['completion', 'bash']);
    expect(r.stdout).toMatch(/usage/);
    expect(r.stdout).toMatch(/--by/);
    expect(r.stdout).toMatch(/user day hour domain/);
  });
});

describe('proxyctl usage --by ip: the summary\'s "ips" (SPEC section 22)', () => {
  let holder: string;
  beforeAll(async () => {
    const a = await t.account('cli-usage-ips@example.com');
    holder = (await t.key(a.accountId, ['usage:read'])).key;
    await t.store.egress.register('n-ips', ['203.0.113.40', '203.0.113.41', '203.0.113.42'], {
      country: 'us',
      city: null,
    });
    expect(await t.store.egress.assign(a.accountId, 'n-ips', ['203.0.113.40', '203.0.113.41'])).toBeNull();
    const day = Date.now() - (Date.now() % 86_400_000);
    await t.store.egress.addUsage(
      [
        {
          accountId: a.accountId,
          address: '203.0.113.41',
          bytesUp: 3 * 2 ** 20,
          bytesDown: 5 * 2 ** 20,
          connections: 4,
        },
      ],
      day,
    );
  });

  it('a row per address (held ones without traffic as zeros), --csv with an address header, --json the summary', async () => {
    const table = await cli(['usage', '--by', 'ip'], { key: holder });
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/Address/);
    expect(table.stdout).toMatch(/203\.0\.113\.41.*3 MiB.*5 MiB.*8 MiB.*4/);
    expect(table.stdout).toMatch(/203\.0\.113\.40.*0 B/);
    expect(table.stdout).not.toMatch(/203\.0\.113\.42/);
    expect(table.stdout).toMatch(/2 addresses/);
    const csv = (await cli(['usage', '--by', 'ip', '--csv'], { key: holder })).stdout.trimEnd().split('\r\n');
    expect(csv).toEqual([
      'address,bytes_up,bytes_down,connections',
      `203.0.113.41,${3 * 2 ** 20},${5 * 2 ** 20},4`,
      '203.0.113.40,0,0,0',
    ]);
    const json = JSON.parse((await cli(['usage', '--by', 'ip', '--json'], { key: holder })).stdout) as { ips: unknown };
    expect(json.ips).toEqual(
      (
        (await (await fetch(`${base}${USAGE_PATHS.summary}`, { headers: bearer(holder) })).json()) as {
          data: { ips: unknown };
        }
      ).data.ips,
    );
  });

  it('an account without dedicated addresses is told so; --user with --by ip is a usage error', async () => {
    const none = await cli(['usage', '--by', 'ip']);
    expect(none.code, none.stderr).toBe(0);
    expect(none.stdout).toContain('holds no dedicated addresses');
    expect((await cli(['usage', '--by', 'ip', '--user', 'alice'], { key: holder })).code).toBe(2);
    expect((await cli(['completion', 'bash'])).stdout).toMatch(/user day hour domain ip/);
  });
});

describe('proxyctl usage: the API key, not the token', () => {
  it('the account token alone is exit 4 saying to run proxyctl key set; nothing is asked of the API', async () => {
    const r = await cli(['usage'], { key: token });
    expect(r.code).toBe(4);
    expect(r.stderr).toContain('proxyctl key set');
    expect(r.stderr).toContain('opens only the whitelist');
  });

  it('a key without usage:read is exit 4 naming the scope', async () => {
    const a = await t.account('cli-usage-scope@example.com');
    const users = (await t.key(a.accountId, ['users:read'])).key;
    const r = await cli(['usage'], { key: users });
    expect(r.code).toBe(4);
    expect(r.stderr).toContain('usage:read');
    expect(r.stderr).not.toContain(users.slice(users.lastIndexOf('_') + 1));
  });
});

describe('proxyctl usage: captions and a lifetime plan', () => {
  let lifetime: { accountId: number; token: string; key: string };
  beforeAll(async () => {
    const acct = await t.account('cli-usage-lifetime@example.com');
    lifetime = { ...acct, key: (await t.key(acct.accountId, ['usage:read'])).key };
    await t.store.plans.set({
      accountId: lifetime.accountId,
      trafficLimit: 100 * 2 ** 30,
      period: 'lifetime',
      anchorDay: 1,
      maxConnections: null,
      expiresAt: null,
    });
    const d = (at: number, id: string) =>
      t.store.usage.addFlush('n1', id, at, [
        {
          accountId: lifetime.accountId,
          subject: 'user:carol',
          target: 'example.com',
          bytesUp: 100,
          bytesDown: 200,
          connections: 1,
        },
      ]);
    expect(await d(Date.now() - 50 * 86_400_000, 'lt1')).toBe('ok');
    expect(await d(Date.now(), 'lt2')).toBe('ok');
  });

  it("a lifetime plan's range starts at the first usage, not 1970; --by day fits by default; --by hour is the latest 1,000 hours", async () => {
    const summary = await cli(['usage'], { key: lifetime.key });
    expect(summary.code, summary.stderr).toBe(0);
    const firstDay = new Date(Math.floor((Date.now() - 50 * 86_400_000) / 86_400_000) * 86_400_000)
      .toISOString()
      .replace('.000Z', 'Z');
    expect(summary.stdout).toContain(`${firstDay} to `);
    expect(summary.stdout).not.toContain('1970');
    expect(summary.stdout).toMatch(/of 100 GiB for the plan's lifetime/);
    const days = await cli(['usage', '--by', 'day'], { key: lifetime.key });
    expect(days.code, days.stderr).toBe(0);
    expect(days.stdout).toMatch(/\n51 days\n?$/);
    const hours = await cli(['usage', '--by', 'hour', '--json'], { key: lifetime.key });
    expect(hours.code, hours.stderr).toBe(0);
    expect((JSON.parse(hours.stdout) as { points: unknown[] }).points).toHaveLength(1000);
    // Asked for more than fits: the API's 10400 says which from would.
    const far = await cli(['usage', '--by', 'day', '--from', '1970-01-01'], { key: lifetime.key });
    expect(far.code).toBe(1);
    expect(far.stderr).toMatch(/at most 1000 points: give a from of \d{4}-\d{2}-\d{2}T00:00:00Z or later/);
  });

  it('captions count in words: "1 domain", not "1 rows"', async () => {
    const one = await cli(['usage', '--by', 'domain'], { key: lifetime.key });
    expect(one.stdout).toMatch(/\n1 domain\n?$/);
    const two = await cli(['usage', '--by', 'domain', '--limit', '1']);
    expect(two.stdout).toMatch(/\n1 domain, the rest as \(other\)\n?$/);
    const all = await cli(['usage', '--by', 'domain']);
    expect(all.stdout).toMatch(/\n3 domains\n?$/);
  });

  it('a bad --from says which part is wrong (exit 2)', async () => {
    const r = await cli(['usage', '--by', 'hour', '--from', '2026-11-31T10:00:00Z']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('November 2026 has 30 days');
    const zone = await cli(['usage', '--by', 'hour', '--from', '2026-12-01T10:00:00']);
    expect(zone.code).toBe(2);
    expect(zone.stderr).toContain('no time zone');
  });
});
