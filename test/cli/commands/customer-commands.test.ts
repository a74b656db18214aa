// proxyctl key / users / proxies / usage-on-the-key, in-process through main() against a real scripted HTTP server on
// 127.0.0.1: where the credential goes (Bearer only), exit codes (4 for a missing, rejected or scope-less key), the
// keychain-less fallback, PROXYCTL_API_KEY, Idempotency-Key on writes and on resends, and no secret in any output.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiClient } from '../../../src/cli/api.js';
import type { Deps } from '../../../src/cli/deps.js';
import { main } from '../../../src/cli/main.js';
import { createOutput } from '../../../src/cli/output.js';
import { TokenStore } from '../../../src/cli/token-store.js';
import { FakeClock, MemoryKeychain, TOKEN, memoryIo, tempConfigDir } from '../helpers/fakes.js';
import {
  startScriptedServer,
  systemError,
  unauthorized,
  type Handler,
  type Reply,
  type ScriptedServer,
} from '../helpers/scripted-server.js';

export const KEY = 'pxk_k7Qm2x_' + 'Zs9'.repeat(10) + '-_Q';
const KEY_SECRET = KEY.slice('pxk_k7Qm2x_'.length);
const OTHER_KEY = 'pxk_other1_' + 'Y'.repeat(30);
const PASSWORD = 'pa:ss@w0rd/with%odd&chars';

let server: ScriptedServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

interface RunOpts {
  env?: NodeJS.ProcessEnv;
  stdin?: string;
  tty?: boolean;
  keychain?: MemoryKeychain;
  dir?: string;
  secret?: string;
  /** Passwords that may appear in the output (made ones, shown once; or exported lines). */
  allow?: string[];
}

async function cli(argv: string[], opts: RunOpts = {}) {
  const dir = opts.dir ?? tempConfigDir();
  const keychain = opts.keychain ?? new MemoryKeychain();
  const io = memoryIo({
    ...(opts.stdin !== undefined ? { stdin: opts.stdin } : {}),
    ...(opts.tty !== undefined ? { tty: opts.tty } : {}),
  });
  const env: NodeJS.ProcessEnv = {
    PROXYCTL_CONFIG_DIR: dir,
    NO_COLOR: '1',
    ...(server ? { PROXYCTL_BASE_URL: server.url } : {}),
    ...opts.env,
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
        tokens: new TokenStore({ env, keychain, dir: ctx.configDir, warn: (m) => out.warn(m), quiet: ctx.quiet }),
        keys: new TokenStore({
          env,
          keychain,
          dir: ctx.configDir,
          warn: (m) => out.warn(m),
          quiet: ctx.quiet,
          kind: 'key',
        }),
        makeApi: (b, t) => new ApiClient({ baseUrl: b, token: t, timeoutMs: 2000 }),
        readSecret: async () => opts.secret ?? '',
        progress: async () => null,
      };
    },
  });
  process.exitCode = 0;
  const r = { code, stdout: io.out(), stderr: io.err(), keychain, dir, clock };
  const all = r.stdout + r.stderr;
  expect(all).not.toContain(KEY_SECRET);
  expect(all).not.toContain(TOKEN.split('.')[1]!);
  if (!opts.allow?.includes(PASSWORD)) expect(all).not.toContain(PASSWORD);
  return r;
}

const GATEWAY = {
  http: '127.0.0.1:3128',
  socks5: '127.0.0.1:1080',
  udp: true,
  locations: [{ country: 'us', cities: ['nyc'], exits: 1 }],
};
const user = (username: string, extra: Record<string, unknown> = {}) => ({
  username,
  status: 'active',
  created_at: '2026-12-01T00:00:00Z',
  traffic_limit: null,
  max_connections: null,
  rate_limit: null,
  expires_at: null,
  allow: [],
  deny: [],
  used: { bytes_up: 0, bytes_down: 0, period_start: '2026-12-01T00:00:00Z' },
  ...extra,
});

/** A small customer API: Bearer KEY only; users kept in a map; Idempotency-Key answers replayed. */
function fakeApi(opts: { scopes?: string[] } = {}) {
  const users = new Map<string, ReturnType<typeof user>>();
  const answers = new Map<string, Reply>();
  const scopes = opts.scopes ?? ['users:read', 'users:write', 'usage:read'];
  const need = (s: string): Reply | null =>
    scopes.includes(s) ? null : { status: 403, code: 10403, message: `the key lacks scope ${s}` };
  let made = 0;
  const handler: Handler = (req) => {
    if (req.headers.authorization !== `Bearer ${KEY}` || req.apiKey !== null) return unauthorized;
    const idem = req.headers['idempotency-key'] as string | undefined;
    if (idem && answers.has(`${req.method} ${req.path} ${idem}`))
      return answers.get(`${req.method} ${req.path} ${idem}`)!;
    const remember = (r: Reply) => {
      if (idem) answers.set(`${req.method} ${req.path} ${idem}`, r);
      return r;
    };
    const name = decodeURIComponent(req.path.split('/')[5] ?? '');
    if (req.path === '/openapi/v1/proxy/gateway') return { data: GATEWAY };
    if (req.path === '/openapi/v1/usage/summary')
      return (
        need('usage:read') ?? {
          data: {
            from: '2026-12-01T00:00:00Z',
            to: '2026-12-07T00:00:00Z',
            plan: null,
            bytes_up: 1,
            bytes_down: 2,
            connections: 3,
            users: [],
          },
        }
      );
    if (req.path === '/openapi/v1/proxy/users' && req.method === 'GET') {
      const d = need('users:read');
      if (d) return d;
      const items = [...users.values()].sort((a, b) => a.username.localeCompare(b.username));
      const page = Number(req.query.get('page') ?? 1);
      const size = Number(req.query.get('page_size') ?? 20);
      return {
        data: { items: items.slice((page - 1) * size, page * size), page, page_size: size, total: items.length },
      };
    }
    if (req.method === 'GET' && name) {
      const d = need('users:read');
      if (d) return d;
      const u = users.get(name);
      return u ? { data: u } : { status: 404, code: 10404, message: 'no such user' };
    }
    const w = need('users:write');
    if (w) return w;
    if (req.path === '/openapi/v1/proxy/users' && req.method === 'POST') {
      if (users.has(req.body.username)) return remember({ status: 409, code: 10409, message: 'username taken' });
      const password = req.body.password ?? `made-${++made}-xxxxxxxxxxxxxxxx`;
      const { password: _p, ...rest } = req.body;
      users.set(req.body.username, user(req.body.username, rest));
      return remember({ data: { ...users.get(req.body.username), password } });
    }
    if (req.path === '/openapi/v1/proxy/users/batch') {
      const created: Array<{ username: string; password: string }> = [];
      const failed: Array<{ username: string; code: number; reason: string }> = [];
      for (const it of req.body.items) {
        if (users.has(it.username)) failed.push({ username: it.username, code: 10409, reason: 'username taken' });
        else {
          users.set(it.username, user(it.username));
          created.push({ username: it.username, password: it.password ?? `made-${++made}-xxxxxxxxxxxxxxxx` });
        }
      }
      const data = { success_count: created.length, failed_count: failed.length, failed_items: failed, created };
      return remember({ code: failed.length ? 10431 : 200, data });
    }
    const u = users.get(name);
    if (!u) return { status: 404, code: 10404, message: 'no such user' };
    if (req.method === 'PATCH') {
      Object.assign(u, req.body);
      return remember({ data: u });
    }
    if (req.method === 'POST' && req.path.endsWith('/password'))
      return remember({ data: { username: name, password: req.body.password ?? `made-${++made}-xxxxxxxxxxxxxxxx` } });
    if (req.method === 'DELETE') {
      users.delete(name);
      return remember({ data: { username: name } });
    }
    return { status: 404, code: 10404, message: 'not found' };
  };
  return { handler, users };
}

async function serve(h: Handler) {
  server = await startScriptedServer(h);
  return server;
}

describe('proxyctl key', () => {
  it('set reads the key from stdin, checks it with GET /proxy/gateway (Bearer, never api_key), stores it in the keychain; status names the id, never the key', async () => {
    const s = await serve(fakeApi().handler);
    const keychain = new MemoryKeychain();
    const set = await cli(['key', 'set', '--json'], { stdin: `${KEY}\n`, keychain });
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toEqual({ base_url: s.url, key_id: 'k7Qm2x', stored: 'keychain' });
    expect(s.requests[0]!.path).toBe('/openapi/v1/proxy/gateway');
    expect(s.requests[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(s.requests[0]!.apiKey).toBeNull();
    expect([...keychain.entries.entries()]).toEqual([[`proxyctl|api-key:${s.url}`, KEY]]);

    const st = await cli(['key', 'status', '--json'], { keychain });
    expect(st.code).toBe(0);
    expect(JSON.parse(st.stdout)).toEqual({ source: 'keychain', key_id: 'k7Qm2x', base_url: s.url, valid: true });
    const human = await cli(['key', 'status'], { keychain });
    expect(human.stdout).toContain('k7Qm2x');

    const f = await cli(['key', 'forget', '--json'], { keychain });
    expect(JSON.parse(f.stdout)).toEqual({ base_url: s.url, removed: true });
    expect(keychain.entries.size).toBe(0);
    const none = await cli(['key', 'status'], { keychain });
    expect(none.code).toBe(4);
    expect(none.stderr).toContain('proxyctl key set');
  });

  it('keeps the token and the key apart: both stored, login and key set do not overwrite each other', async () => {
    await serve((req) =>
      req.path === '/openapi/v1/proxy/gateway'
        ? fakeApi().handler(req, 0)
        : { data: { items: [], page: 1, page_size: 1, total: 0 } },
    );
    const keychain = new MemoryKeychain();
    expect((await cli(['login'], { stdin: TOKEN, keychain })).code).toBe(0);
    expect((await cli(['key', 'set'], { stdin: KEY, keychain })).code).toBe(0);
    expect(keychain.entries.size).toBe(2);
    expect((await cli(['auth', 'status'], { keychain })).code).toBe(0);
    expect((await cli(['key', 'status'], { keychain })).code).toBe(0);
  });

  it('without a keychain: the 0600 file beside the token, with a warning naming it; forget removes it', async () => {
    const s = await serve(fakeApi().handler);
    const keychain = new MemoryKeychain();
    keychain.available = false;
    const dir = tempConfigDir();
    const set = await cli(['key', 'set'], { stdin: KEY, keychain, dir });
    expect(set.code, set.stderr).toBe(0);
    const file = path.join(dir, 'credentials.json');
    expect(set.stderr).toContain(`the API key is stored in ${file}`);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(file, 'utf8')).keys).toEqual({ [s.url]: KEY });
    const st = await cli(['key', 'status', '--json'], { keychain, dir });
    expect(JSON.parse(st.stdout).source).toBe('file');
    expect(st.stderr).toContain('using the API key stored in');
    // users go with the stored key.
    const l = await cli(['users', 'list', '--json'], { keychain, dir });
    expect(l.code, l.stderr).toBe(0);
    expect((await cli(['key', 'forget'], { keychain, dir })).code).toBe(0);
    expect(existsSync(file)).toBe(false);
  });

  it('refuses a malformed key, an account token and a rejected key: exit 4, nothing stored', async () => {
    await serve(fakeApi().handler);
    const keychain = new MemoryKeychain();
    const bad = await cli(['key', 'set'], { stdin: 'pxk_nope', keychain });
    expect(bad.code).toBe(4);
    expect(bad.stderr).toContain('not an API key');
    const tok = await cli(['key', 'set'], { stdin: TOKEN, keychain });
    expect(tok.code).toBe(4);
    expect(tok.stderr).toContain('proxyctl login');
    const rejected = await cli(['key', 'set'], { stdin: OTHER_KEY, keychain });
    expect(rejected.code).toBe(4);
    expect(rejected.stderr).toContain('rejected the API key other1');
    expect(keychain.entries.size).toBe(0);
  });

  it('PROXYCTL_API_KEY holding a key overrides the stored one; holding a token it is not taken as a key', async () => {
    await serve(fakeApi().handler);
    const keychain = new MemoryKeychain();
    keychain.entries.set(`proxyctl|api-key:${server!.url}`, OTHER_KEY);
    const env = await cli(['key', 'status', '--json'], { keychain, env: { PROXYCTL_API_KEY: KEY } });
    expect(JSON.parse(env.stdout)).toMatchObject({ source: 'env', key_id: 'k7Qm2x', valid: true });
    const stored = await cli(['key', 'status', '--json'], { keychain, env: { PROXYCTL_API_KEY: TOKEN } });
    expect(JSON.parse(stored.stdout)).toMatchObject({ source: 'keychain', key_id: 'other1', valid: false });
    expect(stored.code).toBe(4);
  });
});

describe('proxyctl usage on the API key', () => {
  it('the token alone is exit 4 saying to run proxyctl key set; the key is sent as Bearer', async () => {
    const s = await serve(fakeApi().handler);
    const tokenOnly = await cli(['usage'], { env: { PROXYCTL_API_KEY: TOKEN } });
    expect(tokenOnly.code).toBe(4);
    expect(tokenOnly.stderr).toContain('proxyctl key set');
    expect(tokenOnly.stderr).toContain('opens only the whitelist');
    expect(s.requests).toHaveLength(0);
    const ok = await cli(['usage', '--json'], { env: { PROXYCTL_API_KEY: KEY } });
    expect(ok.code, ok.stderr).toBe(0);
    expect(s.requests[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(s.requests[0]!.query.has('api_key')).toBe(false);
  });

  it('a rejected key is exit 4; a key without usage:read is exit 4 naming the scope', async () => {
    await serve(fakeApi({ scopes: ['users:read'] }).handler);
    const rejected = await cli(['usage'], { env: { PROXYCTL_API_KEY: OTHER_KEY } });
    expect(rejected.code).toBe(4);
    expect(rejected.stderr).toContain('rejected the API key other1');
    const scope = await cli(['usage'], { env: { PROXYCTL_API_KEY: KEY } });
    expect(scope.code).toBe(4);
    expect(scope.stderr).toContain('the key lacks scope usage:read');
  });
});

describe('proxyctl users', () => {
  const env = { PROXYCTL_API_KEY: KEY };

  it('create prints a made password once; --password-stdin sends the given one and does not print it; every write has an Idempotency-Key', async () => {
    const api = fakeApi();
    const s = await serve(api.handler);
    const c = await cli(
      [
        'users',
        'create',
        'alice',
        '--traffic-limit',
        '50GiB',
        '--max-connections',
        '10',
        '--rate-limit',
        '10mbit',
        '--expires',
        '2027-01-01T00:00:00Z',
        '--allow',
        'a.example;b.example',
        '--deny',
        'c.example',
      ],
      { env },
    );
    expect(c.code, c.stderr).toBe(0);
    expect(c.stdout).toContain('made-1-xxxxxxxxxxxxxxxx');
    expect(c.stdout).toContain('shown once');
    const body = s.requests.at(-1)!.body;
    expect(body).toEqual({
      username: 'alice',
      traffic_limit: 50 * 2 ** 30,
      max_connections: 10,
      rate_limit: '10mbit',
      expires_at: '2027-01-01T00:00:00Z',
      allow: ['a.example', 'b.example'],
      deny: ['c.example'],
    });
    expect(s.requests.at(-1)!.headers['idempotency-key']).toMatch(/^proxyctl-[0-9a-f-]{36}$/);

    const given = await cli(['users', 'create', 'bob', '--password-stdin', '--json'], { env, stdin: `${PASSWORD}\n` });
    expect(given.code, given.stderr).toBe(0);
    expect(JSON.parse(given.stdout)).not.toHaveProperty('password');
    expect(s.requests.at(-1)!.body).toEqual({ username: 'bob', password: PASSWORD });
    const human = await cli(['users', 'create', 'carol', '--password-stdin'], { env, stdin: `${PASSWORD}\n` });
    expect(human.code).toBe(0);
    expect(human.stdout).not.toContain(PASSWORD);

    const keys = s.requests.filter((r) => r.method !== 'GET').map((r) => r.headers['idempotency-key']);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('bad values are usage errors naming the flag, before anything is sent', async () => {
    const s = await serve(fakeApi().handler);
    for (const [args, text] of [
      [['users', 'create', 'alice', '--traffic-limit', '5 parsecs'], '--traffic-limit'],
      [['users', 'create', 'alice', '--max-connections', '-1'], '--max-connections'],
      [['users', 'create', 'alice', '--rate-limit', 'fast'], '--rate-limit'],
      [['users', 'create', 'alice', '--expires', '2027-02-30'], '--expires'],
      [['users', 'create', 'alice-session-x'], '-session-'],
      [['users', 'create', 'a'], 'USERNAME'],
      [['users', 'set', 'alice'], 'nothing to change'],
      [['users', 'delete', 'alice'], '--yes'],
      // A key passes the username rule (64 of A-Z a-z 0-9 _): pasted there, it must not become a user's name.
      [['users', 'create', KEY], 'an API key or token was given where a username belongs'],
      [['users', 'show', KEY], 'an API key or token was given where a username belongs'],
      [['proxies', 'export', '--user', KEY], 'an API key or token was given where a username belongs'],
      [
        ['users', 'set', 'alice', '--allow', `a.example,${KEY}`],
        '--allow: an API key or token was given where a value belongs',
      ],
      [['users', 'delete', TOKEN, '--yes'], 'an API key or token was given where a username belongs'],
      [['users', 'list', '--prefix', ''], '--prefix must be 1-64 characters'],
      [['users', 'list', '--prefix', 'a b'], '--prefix must be 1-64 characters'],
      [['users', 'list', '--prefix', KEY], 'an API key or token was given where a username prefix belongs'],
      [['users', 'list', '--prefix', TOKEN], 'an API key or token was given where a username prefix belongs'],
    ] as Array<[string[], string]>) {
      const r = await cli(args, { env });
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toContain(text);
    }
    const short = await cli(['users', 'create', 'alice', '--password-stdin'], { env, stdin: 'short\n' });
    expect(short.code).toBe(2);
    expect(short.stderr).toContain('at least 10 characters');
    expect(s.requests).toHaveLength(0);
  });

  it('list, show, set (none clears), disable, enable, passwd, delete', async () => {
    const api = fakeApi();
    const s = await serve(api.handler);
    for (const n of ['alice', 'bob']) expect((await cli(['users', 'create', n], { env })).code).toBe(0);
    const l = await cli(['users', 'list', '--json'], { env });
    expect(JSON.parse(l.stdout)).toMatchObject({ total: 2, items: [{ username: 'alice' }, { username: 'bob' }] });
    const tsv = await cli(['users', 'list'], { env });
    expect(tsv.stdout.split('\n')[0]).toMatch(/^alice\tactive\t/);
    const table = await cli(['users', 'list'], { env, tty: true });
    expect(table.stdout).toContain('Username');
    expect(table.stdout).toContain('page 1 of 1, 2 users');
    const all = await cli(['users', 'list', '--all', '--json'], { env });
    expect(JSON.parse(all.stdout).items).toHaveLength(2);

    expect((await cli(['users', 'set', 'alice', '--traffic-limit', '1GiB'], { env })).code).toBe(0);
    expect(api.users.get('alice')!.traffic_limit).toBe(2 ** 30);
    expect((await cli(['users', 'set', 'alice', '--traffic-limit', 'none'], { env })).code).toBe(0);
    expect(s.requests.at(-1)!.body).toEqual({ traffic_limit: null });
    expect(s.requests.at(-1)!.method).toBe('PATCH');
    // `none` empties a list too: the API's [] (it refuses ["none"]).
    expect((await cli(['users', 'set', 'alice', '--allow', 'none', '--deny', ''], { env })).code).toBe(0);
    expect(s.requests.at(-1)!.body).toEqual({ allow: [], deny: [] });

    expect((await cli(['users', 'disable', 'alice'], { env })).code).toBe(0);
    expect(s.requests.at(-1)!.body).toEqual({ status: 'disabled' });
    expect(api.users.get('alice')!.status).toBe('disabled');
    expect((await cli(['users', 'enable', 'alice'], { env })).code).toBe(0);
    expect(api.users.get('alice')!.status).toBe('active');

    const show = await cli(['users', 'show', 'alice', '--json'], { env });
    expect(JSON.parse(show.stdout)).toMatchObject({ username: 'alice', status: 'active' });
    const missing = await cli(['users', 'show', 'nobody'], { env });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('10404');

    const pw = await cli(['users', 'passwd', 'alice', '--json'], { env });
    expect(JSON.parse(pw.stdout)).toEqual({ username: 'alice', password: expect.stringMatching(/^made-/) });
    const pw2 = await cli(['users', 'passwd', 'alice', '--password-stdin'], { env, stdin: PASSWORD });
    expect(pw2.code).toBe(0);
    const pw3 = await cli(['users', 'passwd', 'alice', '--password-stdin', '--json'], { env, stdin: PASSWORD });
    expect(JSON.parse(pw3.stdout)).toEqual({ username: 'alice' });
    expect(s.requests.at(-1)!.body).toEqual({ password: PASSWORD });

    const del = await cli(['users', 'delete', 'bob', '--yes', '--json'], { env });
    expect(JSON.parse(del.stdout)).toEqual({ username: 'bob' });
    expect(api.users.has('bob')).toBe(false);
  });

  it('a write that times out or gets a 5xx is resent with the same Idempotency-Key and body: one user, its made password shown', async () => {
    const api = fakeApi();
    let cut = 0;
    // The first POST is done by the server, then its answer is lost (a 500 instead).
    const s = await serve((req, i) => {
      if (req.method === 'POST' && cut++ === 0) {
        api.handler(req, i);
        return systemError;
      }
      return api.handler(req, i);
    });
    const r = await cli(['users', 'create', 'dave'], { env });
    expect(r.code, r.stderr).toBe(0);
    const posts = s.requests.filter((q) => q.method === 'POST');
    expect(posts).toHaveLength(2);
    expect(posts[1]!.headers['idempotency-key']).toBe(posts[0]!.headers['idempotency-key']);
    expect(posts[1]!.body).toEqual(posts[0]!.body);
    expect(r.stdout).toContain('made-1-');
    expect(api.users.size).toBe(1);
  });

  it('a key without users:write is exit 4 naming the scope', async () => {
    await serve(fakeApi({ scopes: ['users:read'] }).handler);
    const r = await cli(['users', 'create', 'erin'], { env });
    expect(r.code).toBe(4);
    expect(r.stderr).toContain('the key lacks scope users:write');
  });
});

describe('proxyctl users create --file', () => {
  const env = { PROXYCTL_API_KEY: KEY };
  const csv = (n: number, from = 0) =>
    [
      'username,password,traffic_limit,max_connections,rate_limit,expires_at,allow,deny',
      ...Array.from({ length: n }, (_, i) => `user${String(i + from).padStart(4, '0')},,1GiB,,,,a.example;b.example,`),
    ].join('\n');

  it('250 users with a lost answer (500) in the middle: the same batch resent with the same key, 250 users, no duplicates, exit 0', async () => {
    const api = fakeApi();
    let batches = 0;
    const s = await serve((req, i) => {
      if (req.path === '/openapi/v1/proxy/users/batch' && ++batches === 2) {
        // The server does the batch; the answer is lost.
        api.handler(req, i);
        return systemError;
      }
      return api.handler(req, i);
    });
    const dir = tempConfigDir();
    const file = path.join(dir, 'users.csv');
    writeFileSync(file, csv(250));
    const r = await cli(['users', 'create', '--file', file, '--json'], { env, dir });
    expect(r.code, r.stderr).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(doc).toMatchObject({ success_count: 250, already_done: 0, failed_count: 0, failed_items: [] });
    expect(doc.created).toHaveLength(250);
    expect(new Set(doc.created.map((c: { username: string }) => c.username)).size).toBe(250);
    expect(api.users.size).toBe(250);
    const posts = s.requests.filter((q) => q.path === '/openapi/v1/proxy/users/batch');
    expect(posts.map((p) => p.body.items.length)).toEqual([100, 100, 100, 50]);
    expect(posts[2]!.headers['idempotency-key']).toBe(posts[1]!.headers['idempotency-key']);
    expect(posts[0]!.headers['idempotency-key']).not.toBe(posts[1]!.headers['idempotency-key']);
    expect(posts[0]!.body.items[0]).toEqual({
      username: 'user0000',
      traffic_limit: 2 ** 30,
      allow: ['a.example', 'b.example'],
    });
  });

  it('a batch that times out, then meets its own first send still running (409 in progress), is sent again under the same key until answered', async () => {
    const api = fakeApi();
    let n = 0;
    const s = await serve((req, i) => {
      if (req.path === '/openapi/v1/proxy/users/batch') {
        n++;
        if (n === 1) return { hang: true };
        if (n === 2)
          return {
            status: 409,
            code: 10409,
            message: 'conflict: a request with this Idempotency-Key is still in progress',
          };
      }
      return api.handler(req, i);
    });
    const dir = tempConfigDir();
    const file = path.join(dir, 'u.csv');
    writeFileSync(file, csv(3));
    const r = await cli(['users', 'create', '--file', file, '--json'], { env, dir });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ success_count: 3, failed_count: 0 });
    const posts = s.requests.filter((q) => q.path === '/openapi/v1/proxy/users/batch');
    expect(posts).toHaveLength(3);
    expect(new Set(posts.map((p) => p.headers['idempotency-key'])).size).toBe(1);
  });

  it('only items that failed retryably (10500) are resent, alone, under a new key; final codes are reported: exit 3', async () => {
    const api = fakeApi();
    let flaky = true;
    const s = await serve((req, i) => {
      if (req.path === '/openapi/v1/proxy/users/batch' && flaky) {
        flaky = false;
        // user0001 fails for now (10500) and is not created; the rest are.
        const items = req.body.items.filter((it: { username: string }) => it.username !== 'user0001');
        const inner = api.handler({ ...req, body: { items } }, i) as Reply;
        const data = inner.data as {
          success_count: number;
          failed_count: number;
          failed_items: unknown[];
          created: unknown[];
        };
        return {
          code: 10431,
          data: {
            ...data,
            failed_count: data.failed_count + 1,
            failed_items: [...data.failed_items, { username: 'user0001', code: 10500, reason: 'database busy' }],
          },
        };
      }
      return api.handler(req, i);
    });
    api.users.set('user0002', user('user0002'));
    const dir = tempConfigDir();
    const file = path.join(dir, 'u.csv');
    writeFileSync(file, csv(5));
    const r = await cli(['users', 'create', '--file', file], { env, dir });
    expect(r.code, r.stderr).toBe(3);
    const posts = s.requests.filter((q) => q.path === '/openapi/v1/proxy/users/batch');
    expect(posts).toHaveLength(2);
    expect(posts[1]!.body.items.map((x: { username: string }) => x.username)).toEqual(['user0001']);
    expect(posts[1]!.headers['idempotency-key']).not.toBe(posts[0]!.headers['idempotency-key']);
    expect(r.stdout).toContain('4 created, 0 already done, 1 failed');
    expect(r.stdout).toMatch(/user0002.*10409/);
    expect(api.users.size).toBe(5);
  });

  it('JSON lines work too; a bad line is a usage error naming the line and field, nothing sent', async () => {
    const api = fakeApi();
    const s = await serve(api.handler);
    const dir = tempConfigDir();
    const jl = path.join(dir, 'u.jsonl');
    writeFileSync(
      jl,
      '{"username":"jay","traffic_limit":1048576,"allow":["x.example"]}\n\n{"username":"kay","rate_limit":"5mbit","password":"long-enough-pw"}\n',
    );
    const ok = await cli(['users', 'create', '--file', jl, '--json'], { env, dir });
    expect(ok.code, ok.stderr).toBe(0);
    // kay's password came from the file: not printed back; jay's was made: shown once.
    expect(JSON.parse(ok.stdout).created).toEqual([
      { username: 'jay', password: expect.stringMatching(/^made-/) },
      { username: 'kay' },
    ]);
    expect(ok.stdout).not.toContain('long-enough-pw');
    expect(s.requests[0]!.body.items).toEqual([
      { username: 'jay', traffic_limit: 1048576, allow: ['x.example'] },
      { username: 'kay', rate_limit: '5mbit', password: 'long-enough-pw' },
    ]);
    const before = s.requests.length;
    for (const [text, want] of [
      ['username,color\nann,red\n', 'unknown column "color"'],
      ['username,traffic_limit\nann,lots\n', 'line 2: traffic_limit: not a size'],
      ['username\nann\nann\n', 'line 3: username "ann" is also on'],
      ['username\nann-country-us\n', '-country-'],
      ['{"username":"ann","colour":1}\n', 'line 1: unknown field "colour"'],
      ['{"username":"ann"\n', 'line 1: not a JSON object'],
      ['{"username":"ann","username":"bob"}\n', 'line 1: field "username" given twice'],
      ['username,allow\nann,a.example,b.example\n', 'quote a list'],
      ['username,password\nann,"not closed\n', 'u.jsonl: line 2: a quoted field is not closed'],
    ] as Array<[string, string]>) {
      writeFileSync(jl, text);
      const r = await cli(['users', 'create', '--file', jl], { env, dir });
      expect(r.code, text).toBe(2);
      expect(r.stderr).toContain(want);
    }
    expect(s.requests.length).toBe(before);
  });
});

describe('proxyctl proxies export', () => {
  const env = { PROXYCTL_API_KEY: KEY };

  it('url lines with a unique crypto-random session per line, targeting, and the password URL-encoded', async () => {
    const api = fakeApi();
    api.users.set('alice', user('alice'));
    await serve(api.handler);
    const r = await cli(
      ['proxies', 'export', '--user', 'alice', '--password-stdin', '--country', 'US', '--city', 'nyc', '--count', '50'],
      { env, stdin: `${PASSWORD}\n`, allow: [PASSWORD] },
    );
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(50);
    const ids = new Set<string>();
    for (const l of lines) {
      const m = /^http:\/\/alice-country-us-city-nyc-session-([A-Za-z0-9]{8,}):([^@]+)@127\.0\.0\.1:3128$/.exec(l);
      expect(m, l).not.toBeNull();
      ids.add(m![1]!);
      expect(decodeURIComponent(m![2]!)).toBe(PASSWORD);
      expect(new URL(l).password).toBe(encodeURIComponent(PASSWORD));
    }
    expect(ids.size).toBe(50);
  });

  it('formats, --sticky minutes, --rotating, socks5h, --out 0600', async () => {
    const api = fakeApi();
    api.users.set('bob', user('bob'));
    await serve(api.handler);
    const pw = 'simple-password';
    const hp = await cli(['proxies', 'export', '--user', 'bob', '--format', 'hostport', '--sticky', '30'], {
      env,
      stdin: pw,
    });
    expect(hp.stdout).toMatch(/^127\.0\.0\.1:3128:bob-session-[A-Za-z0-9]{12}-sesstime-30:simple-password\n$/);
    const at = await cli(
      ['proxies', 'export', '--user', 'bob', '--format', 'hostport-at', '--rotating', '--count', '2'],
      { env, stdin: pw },
    );
    expect(at.stdout).toBe('bob:simple-password@127.0.0.1:3128\nbob:simple-password@127.0.0.1:3128\n');
    const socks = await cli(['proxies', 'export', '--user', 'bob', '--protocol', 'socks5h'], { env, stdin: pw });
    expect(socks.stdout).toMatch(/^socks5h:\/\/bob-session-[A-Za-z0-9]{12}:simple-password@127\.0\.0\.1:1080\n$/);
    const json = await cli(['proxies', 'export', '--user', 'bob', '--json'], { env, stdin: pw });
    expect(JSON.parse(json.stdout)[0]).toMatchObject({
      protocol: 'http',
      host: '127.0.0.1',
      port: 3128,
      password: pw,
      session: expect.stringMatching(/^[A-Za-z0-9]{12}$/),
    });
    const dir = tempConfigDir();
    const out = path.join(dir, 'list.txt');
    const f = await cli(['proxies', 'export', '--user', 'bob', '--count', '3', '--out', out], { env, stdin: pw, dir });
    expect(f.code).toBe(0);
    expect(f.stdout).toBe('');
    expect(readFileSync(out, 'utf8').split('\n').filter(Boolean)).toHaveLength(3);
    expect(statSync(out).mode & 0o777).toBe(0o600);
    // `--out -` is stdout, not a file named "-".
    const dash = await cli(['proxies', 'export', '--user', 'bob', '--count', '2', '--out', '-'], {
      env,
      stdin: pw,
      dir,
    });
    expect(dash.code).toBe(0);
    expect(dash.stdout.split('\n').filter(Boolean)).toHaveLength(2);
    expect(existsSync(path.join(process.cwd(), '-'))).toBe(false);
  });

  it('usage errors before anything is sent; an unknown user is exit 1; a country without exits warns', async () => {
    const api = fakeApi();
    api.users.set('bob', user('bob'));
    const s = await serve(api.handler);
    for (const args of [
      ['--user', 'bob', '--sticky', '5', '--rotating'],
      ['--user', 'bob', '--country', 'usa'],
      ['--user', 'bob', '--sticky', '0'],
      ['--user', 'bob', '--format', 'csv'],
      ['--user', 'bob-session-x'],
    ]) {
      const r = await cli(['proxies', 'export', ...args], { env, stdin: 'simple-password' });
      expect(r.code, args.join(' ')).toBe(2);
    }
    const empty = await cli(['proxies', 'export', '--user', 'bob'], { env, stdin: '' });
    expect(empty.code).toBe(2);
    expect(s.requests).toHaveLength(0);
    const unknown = await cli(['proxies', 'export', '--user', 'nobody'], { env, stdin: 'simple-password' });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no proxy user "nobody"');
    const de = await cli(['proxies', 'export', '--user', 'bob', '--country', 'de'], { env, stdin: 'simple-password' });
    expect(de.code).toBe(0);
    expect(de.stderr).toContain('no exit serves country de');
    const paris = await cli(['proxies', 'export', '--user', 'bob', '--city', 'paris'], {
      env,
      stdin: 'simple-password',
    });
    expect(paris.stderr).toContain('no exit serves city paris');
    const nyc = await cli(['proxies', 'export', '--user', 'bob', '--country', 'us', '--city', 'nyc'], {
      env,
      stdin: 'simple-password',
    });
    expect(nyc.stderr).toBe('');
  });

  it('a key without users:read still exports (the lookup is skipped); no key is exit 4', async () => {
    await serve(fakeApi({ scopes: ['usage:read'] }).handler);
    const r = await cli(['proxies', 'export', '--user', 'bob'], { env, stdin: 'simple-password' });
    expect(r.code, r.stderr).toBe(0);
    const none = await cli(['proxies', 'export', '--user', 'bob'], { stdin: 'simple-password' });
    expect(none.code).toBe(4);
    expect(none.stderr).toContain('proxyctl key set');
  });
});

describe('completion', () => {
  it('bash completes the new commands, their options and choices (a real bash)', async () => {
    const r = await cli(['completion', 'bash']);
    const file = path.join(tempConfigDir(), 'proxyctl.bash');
    writeFileSync(file, r.stdout);
    const probe = `
source ${JSON.stringify(file)}
t() { COMP_WORDS=("$@"); COMP_CWORD=$((\${#COMP_WORDS[@]} - 1)); _proxyctl; echo "$*=>\${COMPREPLY[*]}"; }
t proxyctl ''
t proxyctl key ''
t proxyctl users ''
t proxyctl users create --pa
t proxyctl proxies export --format ''
t proxyctl proxies export --protocol ''
t proxyctl users list --status ''
`;
    const b = spawnSync('bash', ['--norc', '--noprofile', '-c', probe], { encoding: 'utf8' });
    expect(b.status, b.stderr).toBe(0);
    const out = b.stdout.split('\n');
    const got = (prefix: string) =>
      out
        .find((l) => l.startsWith(`${prefix}=>`))!
        .slice(prefix.length + 2)
        .split(' ');
    expect(got('proxyctl ')).toEqual(expect.arrayContaining(['key', 'users', 'proxies', 'usage']));
    expect(got('proxyctl key ')).toEqual(expect.arrayContaining(['set', 'status', 'forget']));
    expect(got('proxyctl users ')).toEqual(
      expect.arrayContaining(['list', 'show', 'create', 'set', 'passwd', 'disable', 'enable', 'delete']),
    );
    expect(got('proxyctl users create --pa')).toEqual(['--password-stdin']);
    expect(got('proxyctl proxies export --format ')).toEqual(['url', 'hostport', 'hostport-at', 'json']);
    expect(got('proxyctl proxies export --protocol ')).toEqual(['http', 'socks5h']);
    expect(got('proxyctl users list --status ')).toEqual(['all', 'active', 'disabled']);
  });
});

describe('PROXYCTL_API_KEY holding a key, for the whitelist commands', () => {
  it('is not taken as the token: the stored token serves the whitelist; without one the error says the key does not open it', async () => {
    const s = await serve((req) =>
      req.apiKey === TOKEN ? { data: { items: [], page: 1, page_size: 20, total: 0 } } : unauthorized,
    );
    const none = await cli(['whitelist', 'list'], { env: { PROXYCTL_API_KEY: KEY } });
    expect(none.code).toBe(4);
    expect(none.stderr).toContain('holds an API key, which does not open the whitelist');
    expect(s.requests).toHaveLength(0);
    const keychain = new MemoryKeychain();
    keychain.entries.set(`proxyctl|${s.url}`, TOKEN);
    const listed = await cli(['whitelist', 'list', '--json'], { env: { PROXYCTL_API_KEY: KEY }, keychain });
    expect(listed.code, listed.stderr).toBe(0);
    expect(s.requests[0]!.apiKey).toBe(TOKEN);
    expect(s.requests[0]!.headers.authorization).toBeUndefined();
    const wrong = await cli(['login'], { stdin: KEY, keychain: new MemoryKeychain() });
    expect(wrong.code).toBe(4);
    expect(wrong.stderr).toContain('proxyctl key set');
    const login = await cli(['login'], { env: { PROXYCTL_API_KEY: KEY }, stdin: TOKEN, keychain });
    expect(login.code).toBe(0);
    expect(login.stderr).not.toContain('takes precedence');
  });
});

describe('the key shape', () => {
  it("proxyctl's prefix test is the contract's prefix; the id is the contract parser's", async () => {
    const { KEY_PREFIX, parseApiKey } = await import('../../../src/contract/scopes.js');
    const { isApiKeyShaped } = await import('../../../src/cli/key-format.js');
    const { apiKeyId } = await import('../../../src/cli/key-id.js');
    expect(isApiKeyShaped(`${KEY_PREFIX}abc_${'x'.repeat(22)}`)).toBe(true);
    expect(isApiKeyShaped(TOKEN)).toBe(false);
    expect(apiKeyId(KEY)).toBe(parseApiKey(KEY)!.id);
  });
});
