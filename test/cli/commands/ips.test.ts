// `proxyctl ips list|replace` against a real API over a real store, with an API key (users:read / users:write):
// --json is the endpoint's data, a table on a terminal and tab-separated lines on a pipe, a replacement's answer,
// and the final answers (the month's allowance, no free address, not the account's) as exit codes, never waited out.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiClient } from '../../../src/cli/api.js';
import type { Deps } from '../../../src/cli/deps.js';
import { main } from '../../../src/cli/main.js';
import { createOutput } from '../../../src/cli/output.js';
import { TokenStore } from '../../../src/cli/token-store.js';
import { IPS_PATHS } from '../../../src/contract/paths.js';
import { assignAddresses } from '../../../src/daemon/services/dedicated.js';
import { operatorContext } from '../../../src/daemon/services/audit.js';
import { bearer, makeTestApp, type TestApp } from '../../helpers/app.js';
import { FakeClock, MemoryKeychain, memoryIo, tempConfigDir } from '../helpers/fakes.js';

let t: TestApp;
let base: string;
let writer: string;
let reader: string;
let usageOnly: string;
let nobody: string;
let accountId: number;

async function cli(argv: string[], opts: { tty?: boolean; key?: string } = {}) {
  const dir = tempConfigDir();
  const io = memoryIo({ ...(opts.tty !== undefined ? { tty: opts.tty } : {}) });
  const key = opts.key ?? writer;
  const env: NodeJS.ProcessEnv = {
    PROXYCTL_CONFIG_DIR: dir,
    PROXYCTL_BASE_URL: base,
    PROXYCTL_API_KEY: key,
    NO_COLOR: '1',
  };
  const clock = new FakeClock();
  const code = await main(argv, {
    io,
    env,
    deps: async (ctx): Promise<Deps> => {
      const out = createOutput(io, { color: ctx.color, json: ctx.json, quiet: ctx.quiet });
      return {
        io,
        env,
        clock,
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
  const result = { code, stdout: io.out(), stderr: io.err(), sleeps: clock.sleeps };
  expect(result.stdout + result.stderr).not.toContain(key.slice(key.lastIndexOf('_') + 1));
  return result;
}

const held = async () =>
  (await t.store.egress.list({ accountId })).filter((r) => r.state === 'assigned').map((r) => r.address);

beforeAll(async () => {
  t = await makeTestApp();
  const a = await t.account('cli-ips@example.com');
  accountId = a.accountId;
  writer = (await t.key(a.accountId, ['users:read', 'users:write'])).key;
  reader = (await t.key(a.accountId, ['users:read'])).key;
  usageOnly = (await t.key(a.accountId, ['usage:read'])).key;
  const b = await t.account('cli-ips-none@example.com');
  nobody = (await t.key(b.accountId, ['users:read'])).key;
  await t.store.egress.register('ny-1', ['203.0.113.1', '203.0.113.2', '203.0.113.3'], { country: 'us', city: 'nyc' });
  await assignAddresses(t.store, a.accountId, 'ny-1', '203.0.113.1,203.0.113.2', operatorContext());
  t.ctx.dedicated.replacementsPerMonth = 1;
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await t?.close();
});

describe('proxyctl ips list', () => {
  it("--json prints exactly the endpoint's data; a table on a terminal; tab-separated on a pipe", async () => {
    const json = await cli(['ips', 'list', '--json'], { key: reader });
    expect(json.code, json.stderr).toBe(0);
    const want = (
      (await (await fetch(`${base}${IPS_PATHS.list}`, { headers: bearer(reader) })).json()) as { data: unknown }
    ).data;
    expect(JSON.parse(json.stdout)).toEqual(want);
    const tty = await cli(['ips', 'list'], { key: reader, tty: true });
    expect(tty.code, tty.stderr).toBe(0);
    expect(tty.stdout).toMatch(/203\.0\.113\.1.*US.*nyc/);
    expect(tty.stdout).toMatch(/replacements left this month: 1 of 1/);
    const pipe = await cli(['ips', 'list'], { key: reader });
    expect(
      pipe.stdout
        .trimEnd()
        .split('\n')
        .map((l) => l.split('\t').slice(0, 3)),
    ).toEqual([
      ['203.0.113.1', 'us', 'nyc'],
      ['203.0.113.2', 'us', 'nyc'],
    ]);
  });

  it('an account without addresses is told so; a key without users:read is exit 4 naming the scope', async () => {
    const none = await cli(['ips', 'list'], { key: nobody, tty: true });
    expect(none.code).toBe(0);
    expect(none.stdout).toContain('holds no dedicated addresses');
    const scope = await cli(['ips', 'list'], { key: usageOnly });
    expect(scope.code).toBe(4);
    expect(scope.stderr).toContain('users:read');
  });
});

describe('proxyctl ips replace', () => {
  it("checks the address and --yes before any call; not the account's is exit 1, nothing changed", async () => {
    for (const args of [['203.0.113.01', '--yes'], ['::1', '--yes'], ['203.0.113.1']]) {
      const r = await cli(['ips', 'replace', ...args]);
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
    }
    const foreign = await cli(['ips', 'replace', '203.0.113.3', '--yes']);
    expect(foreign.code).toBe(1);
    expect(foreign.stderr).toContain("not one of the account's dedicated addresses");
    expect(await held()).toEqual(['203.0.113.1', '203.0.113.2']);
  });

  it('replaces within the allowance; then the allowance is exit 5 at once (no wait of weeks), saying from when', async () => {
    const r = await cli(['ips', 'replace', '203.0.113.2', '--yes', '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ old: '203.0.113.2', new: '203.0.113.3' });
    expect(await held()).toEqual(['203.0.113.1', '203.0.113.3']);
    const again = await cli(['ips', 'replace', '203.0.113.1', '--yes']);
    expect(again.code).toBe(5);
    expect(again.stderr).toMatch(/replacements a calendar month.*more from \d{4}-\d{2}-\d{2}/);
    expect(again.sleeps).toEqual([]);
    expect(await held()).toEqual(['203.0.113.1', '203.0.113.3']);
  });

  it('no free address is exit 1 at once, nothing changed', async () => {
    t.ctx.dedicated.replacementsPerMonth = 5;
    const r = await cli(['ips', 'replace', '203.0.113.1', '--yes']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('no free address to replace with');
    expect(r.sleeps).toEqual([]);
    expect(await held()).toEqual(['203.0.113.1', '203.0.113.3']);
  });

  it('shell completion lists the command', async () => {
    const r = await cli(['completion', 'bash']);
    expect(r.stdout).toMatch(/ips/);
    expect(r.stdout).toMatch(/replace/);
  });
});
