// Commands run in-process through main(): parsing, exit codes, output on the right stream, no secret printed.
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiClient } from '../../../src/cli/api.js';
import type { Deps } from '../../../src/cli/deps.js';
import { main } from '../../../src/cli/main.js';
import { createOutput } from '../../../src/cli/output.js';
import { TokenStore } from '../../../src/cli/token-store.js';
import {
  FakeClock,
  MemoryKeychain,
  OTHER_TOKEN,
  TOKEN,
  memoryIo,
  publicIps,
  tempConfigDir,
  type TestIo,
} from '../helpers/fakes.js';
import {
  batchReply,
  rateLimited,
  startScriptedServer,
  unauthorized,
  type Handler,
  type ScriptedServer,
} from '../helpers/scripted-server.js';

const SECRET = TOKEN.split('.')[1]!;
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
  onInterrupt?: Deps['onInterrupt'];
}

interface RunOut {
  code: number;
  stdout: string;
  stderr: string;
  io: TestIo;
  keychain: MemoryKeychain;
  dir: string;
  clock: FakeClock;
}

async function cli(argv: string[], opts: RunOpts = {}): Promise<RunOut> {
  const dir = opts.dir ?? tempConfigDir();
  const keychain = opts.keychain ?? new MemoryKeychain();
  const io = memoryIo({
    ...(opts.stdin !== undefined ? { stdin: opts.stdin } : {}),
    ...(opts.tty !== undefined ? { tty: opts.tty } : {}),
  });
  const env: NodeJS.ProcessEnv = {
    PROXYCTL_CONFIG_DIR: dir,
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
        ...(opts.onInterrupt ? { onInterrupt: opts.onInterrupt } : {}),
      };
    },
  });
  process.exitCode = 0;
  const result = { code, stdout: io.out(), stderr: io.err(), io, keychain, dir, clock };
  expect(result.stdout + result.stderr).not.toContain(SECRET);
  return result;
}

const listData = (n: number, page = 1, pageSize = 20, total = n) => ({
  items: Array.from({ length: n }, (_, i) => ({
    whitelist_id: 1000 - i - (page - 1) * pageSize,
    ip: `8.8.${page}.${i + 1}`,
    remark: i === 0 ? 'office' : '',
    status: i === 1 ? 2 : 1,
    created_at: '2026-11-21T10:00:00Z',
  })),
  page,
  page_size: pageSize,
  total,
});

async function withServer(handler: Handler) {
  server = await startScriptedServer(handler);
  return server;
}

describe('login / logout / auth status', () => {
  it('login reads the token from stdin, confirms it with a list call, stores it in the keychain', async () => {
    const s = await withServer(() => ({ code: 200, data: listData(0) }));
    const r = await cli(['login'], { stdin: `${TOKEN}\n` });
    expect(r.code).toBe(0);
    expect(s.requests).toHaveLength(1);
    expect(s.requests[0]!.query.get('page_size')).toBe('1');
    expect(r.keychain.entries.get(`proxyctl|${s.url}`)).toBe(TOKEN);
    expect(r.stdout).toContain('ak0123456789abcdef0123');
  });

  it('login on a TTY uses the hidden prompt', async () => {
    await withServer(() => ({ code: 200, data: listData(0) }));
    const r = await cli(['login'], { tty: true, secret: TOKEN });
    expect(r.code).toBe(0);
    expect([...r.keychain.entries.values()]).toEqual([TOKEN]);
  });

  it('login rejects a malformed token without calling the API (exit 4)', async () => {
    const s = await withServer(() => ({ code: 200, data: listData(0) }));
    const r = await cli(['login', '--with-token'], { stdin: 'not-a-token\n' });
    expect(r.code).toBe(4);
    expect(s.requests).toHaveLength(0);
    expect(r.stderr).toMatch(/not an API token/);
  });

  it('login with a token the API rejects stores nothing (exit 4)', async () => {
    await withServer(() => unauthorized);
    const r = await cli(['login'], { stdin: TOKEN });
    expect(r.code).toBe(4);
    expect(r.keychain.entries.size).toBe(0);
    expect(r.stderr).toContain('ak0123456789abcdef0123');
  });

  it('login falls back to the 0600 file with a warning on stderr when no keychain answers', async () => {
    await withServer(() => ({ code: 200, data: listData(0) }));
    const keychain = new MemoryKeychain();
    keychain.available = false;
    const r = await cli(['login', '--json'], { stdin: TOKEN, keychain });
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(doc).toMatchObject({ access_key: 'ak0123456789abcdef0123', stored: 'file' });
    expect(r.stderr).toContain(path.join(r.dir, 'credentials.json'));
    expect(readFileSync(doc.file, 'utf8')).toContain(TOKEN);
  });

  it('auth status: source, access key, accepted; exit 4 when rejected or missing', async () => {
    const s = await withServer(() => ({ code: 200, data: listData(0) }));
    const keychain = new MemoryKeychain();
    await keychain.set('proxyctl', s.url, TOKEN);
    const ok = await cli(['auth', 'status', '--json'], { keychain });
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toEqual({
      source: 'keychain',
      access_key: 'ak0123456789abcdef0123',
      base_url: s.url,
      valid: true,
    });

    const human = await cli(['auth', 'status'], { keychain });
    expect(human.stdout).toMatch(/OS keychain/);

    s.setHandler(() => unauthorized);
    const bad = await cli(['auth', 'status', '--json'], { env: { PROXYCTL_API_KEY: TOKEN } });
    expect(bad.code).toBe(4);
    expect(JSON.parse(bad.stdout)).toMatchObject({ source: 'env', valid: false });

    const none = await cli(['auth', 'status', '--json']);
    expect(none.code).toBe(4);
    expect(JSON.parse(none.stdout)).toEqual({ source: null, access_key: null, base_url: s.url, valid: false });
  });

  it('auth status --json with the API unreachable: the document (valid null), the error on stderr, exit 1', async () => {
    const keychain = new MemoryKeychain();
    const url = 'http://127.0.0.1:9';
    await keychain.set('proxyctl', url, TOKEN);
    const r = await cli(['auth', 'status', '--json'], { keychain, env: { PROXYCTL_BASE_URL: url } });
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout)).toEqual({
      source: 'keychain',
      access_key: 'ak0123456789abcdef0123',
      base_url: url,
      valid: null,
    });
    expect(r.stderr).toMatch(/^error: cannot reach http:\/\/127\.0\.0\.1:9 \(ECONNREFUSED\)\n$/);
  });

  it('a token pasted where it does not belong: a usage error that shows its access key only, and nothing sent', async () => {
    const s = await withServer((req) => batchReply(req));
    for (const argv of [
      ['login', TOKEN],
      [`--with-token=${TOKEN}`],
      [TOKEN],
      ['auth', 'status', TOKEN],
      ['whitelist', 'list', TOKEN],
      ['login', '--with-token', TOKEN],
    ]) {
      const r = await cli(argv, { stdin: '' });
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.stderr).toContain('ak0123456789abcdef0123.****');
    }
    for (const argv of [
      ['whitelist', 'add', '8.8.8.8', TOKEN],
      ['whitelist', 'delete', TOKEN],
      ['whitelist', 'add', `8.8.8.8=${TOKEN}`],
      ['whitelist', 'add', '8.8.8.8', '--remark', TOKEN],
    ]) {
      const r = await cli(argv, { env: { PROXYCTL_API_KEY: OTHER_TOKEN } });
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/an API token was given where an IP or a remark belongs; it was not sent/);
    }
    expect(s.requests).toHaveLength(0);
  });

  it('logout removes the stored token', async () => {
    const s = await withServer(() => ({ code: 200, data: listData(0) }));
    const keychain = new MemoryKeychain();
    await keychain.set('proxyctl', s.url, TOKEN);
    const r = await cli(['logout'], { keychain });
    expect(r.code).toBe(0);
    expect(keychain.entries.size).toBe(0);
    const again = await cli(['whitelist', 'list'], { keychain });
    expect(again.code).toBe(4);
  });
});

describe('whitelist list', () => {
  it('prints one JSON document with --json', async () => {
    const s = await withServer((req) => ({
      code: 200,
      data: listData(3, Number(req.query.get('page') ?? 1), Number(req.query.get('page_size') ?? 20), 3),
    }));
    const r = await cli(['whitelist', 'list', '--json', '--status', 'active', '--ip', '8.8.1.1', '--page-size', '50'], {
      env: { PROXYCTL_API_KEY: TOKEN },
    });
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(doc.total).toBe(3);
    expect(Object.keys(doc)).toEqual(['items', 'page', 'page_size', 'total']);
    expect(Object.fromEntries(s.requests[0]!.query)).toMatchObject({
      status: 'active',
      ip: '8.8.1.1',
      page_size: '50',
      page: '1',
    });
  });

  it('draws a table on a TTY, tab-separated lines on a pipe', async () => {
    await withServer(() => ({ code: 200, data: listData(2, 1, 20, 41) }));
    const tty = await cli(['whitelist', 'list', '--no-color'], { env: { PROXYCTL_API_KEY: TOKEN }, tty: true });
    expect(tty.stdout).toMatch(/┌/);
    expect(tty.stdout).toContain('office');
    expect(tty.stdout).toContain('page 1 of 3, 41 entries');
    expect(tty.stdout).not.toMatch(/\u001b\[/);
    const pipe = await cli(['whitelist', 'list'], { env: { PROXYCTL_API_KEY: TOKEN } });
    expect(pipe.stdout.trim().split('\n')).toEqual([
      '1000\t8.8.1.1\tactive\toffice\t2026-11-21T10:00:00Z',
      '999\t8.8.1.2\tdisabled\t\t2026-11-21T10:00:00Z',
    ]);
  });

  it('colours on a TTY unless NO_COLOR or --no-color', async () => {
    await withServer(() => ({ code: 200, data: listData(2) }));
    const coloured = await cli(['whitelist', 'list'], { env: { PROXYCTL_API_KEY: TOKEN }, tty: true });
    expect(coloured.stdout).toMatch(/\u001b\[32mactive/);
    const noColor = await cli(['whitelist', 'list'], { env: { PROXYCTL_API_KEY: TOKEN, NO_COLOR: '1' }, tty: true });
    expect(noColor.stdout).not.toMatch(/\u001b\[/);
  });

  it('--all walks every page and prints page 1, page_size = total', async () => {
    const s = await withServer((req) => {
      const page = Number(req.query.get('page'));
      return { code: 200, data: listData(page < 3 ? 100 : 37, page, 100, 237) };
    });
    const r = await cli(['whitelist', 'list', '--all', '--json'], { env: { PROXYCTL_API_KEY: TOKEN } });
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(s.requests.map((q) => q.query.get('page'))).toEqual(['1', '2', '3']);
    expect(doc.items).toHaveLength(237);
    expect(doc).toMatchObject({ page: 1, page_size: 237, total: 237 });
  });

  it('--all waits out a 429 on a page', async () => {
    const s = await withServer((req, i) =>
      i === 1
        ? rateLimited(4)
        : { code: 200, data: listData(i === 0 ? 100 : 5, Number(req.query.get('page')), 100, 105) },
    );
    const r = await cli(['whitelist', 'list', '--all', '--json'], { env: { PROXYCTL_API_KEY: TOKEN } });
    expect(r.code).toBe(0);
    expect(s.requests.map((q) => q.query.get('page'))).toEqual(['1', '2', '2']);
    expect(r.clock.sleeps).toEqual([4000]);
  });

  it('a rejected token exits 4, a 429 exits 5, a server error exits 1; message on stderr only', async () => {
    const s = await withServer(() => unauthorized);
    const r = await cli(['whitelist', 'list', '--json'], { env: { PROXYCTL_API_KEY: TOKEN } });
    expect(r.code).toBe(4);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/rejected the token.*request id req-/);
    s.setHandler(() => rateLimited(9));
    expect((await cli(['whitelist', 'list'], { env: { PROXYCTL_API_KEY: TOKEN } })).code).toBe(5);
    s.setHandler(() => ({ status: 500, code: 10500, message: 'system error' }));
    expect((await cli(['whitelist', 'list'], { env: { PROXYCTL_API_KEY: TOKEN } })).code).toBe(1);
  });
});

describe('whitelist add / delete', () => {
  it('adds IPs and IP=REMARK from arguments, with --remark as the default', async () => {
    const s = await withServer((req) => batchReply(req));
    const r = await cli(['whitelist', 'add', '8.8.8.8=office', '9.9.9.9', '--remark', 'bulk'], {
      env: { PROXYCTL_API_KEY: TOKEN },
    });
    expect(r.code).toBe(0);
    expect(s.requests[0]!.body).toEqual({
      items: [
        { ip: '8.8.8.8', remark: 'office' },
        { ip: '9.9.9.9', remark: 'bulk' },
      ],
    });
    expect(r.stdout).toContain('2 added, 0 already done, 0 failed');
  });

  it('partial failure: exit 3, failed table, JSON summary alone on stdout, --failed-out ready for --file', async () => {
    const s = await withServer((req) => batchReply(req, { '8.8.0.3': 10422, '8.8.0.7': 10427 }));
    const dir = tempConfigDir();
    const file = path.join(dir, 'ips.txt');
    const failed = path.join(dir, 'failed.txt');
    writeFileSync(file, `# office\n${publicIps(250).join('\n')}\n\n8.8.0.3\n`);
    const r = await cli(['whitelist', 'add', '--file', file, '--failed-out', failed, '--json'], {
      env: { PROXYCTL_API_KEY: TOKEN },
    });
    expect(r.code).toBe(3);
    expect(s.requests.map((q) => (q.body.items as unknown[]).length)).toEqual([100, 100, 50]);
    expect(JSON.parse(r.stdout)).toEqual({
      success_count: 248,
      already_done: 0,
      failed_count: 2,
      failed_items: [
        { ip: '8.8.0.3', code: 10422, reason: 'reason 10422' },
        { ip: '8.8.0.7', code: 10427, reason: 'reason 10427' },
      ],
    });
    expect(readFileSync(failed, 'utf8')).toBe('8.8.0.3\n8.8.0.7\n');
    expect(r.stderr).toContain('1 repeated IP folded');

    // The failed-out file feeds straight back in.
    s.setHandler((req) => batchReply(req));
    const again = await cli(['whitelist', 'add', '--file', failed], { env: { PROXYCTL_API_KEY: TOKEN } });
    expect(again.code).toBe(0);
    expect(s.requests.at(-1)!.body).toEqual({ items: [{ ip: '8.8.0.3' }, { ip: '8.8.0.7' }] });

    const human = await cli(['whitelist', 'delete', '8.8.0.3'], { env: { PROXYCTL_API_KEY: TOKEN } });
    expect(human.code).toBe(0);
  });

  it('human summary shows a table of failed items', async () => {
    await withServer((req) => batchReply(req, { '8.8.8.8': 10426 }));
    const r = await cli(['whitelist', 'delete', '8.8.8.8', '9.9.9.9'], { env: { PROXYCTL_API_KEY: TOKEN } });
    expect(r.code).toBe(3);
    expect(r.stdout).toContain('1 deleted, 0 already done, 1 failed');
    expect(r.stdout).toMatch(/8\.8\.8\.8\s*│\s*10426\s*│\s*reason 10426/);
  });

  it('reads IPs from stdin with -', async () => {
    const s = await withServer((req) => batchReply(req));
    const r = await cli(['whitelist', 'delete', '--file', '-'], {
      env: { PROXYCTL_API_KEY: TOKEN },
      stdin: '8.8.8.8\n9.9.9.9 # old\n',
    });
    expect(r.code).toBe(0);
    expect(s.requests[0]!.body).toEqual({ ips: ['8.8.8.8', '9.9.9.9'] });
  });

  it('401 mid-run: exit 4 and the unsent IPs land in --failed-out', async () => {
    await withServer((req, i) => (i === 0 ? batchReply(req) : unauthorized));
    const failed = path.join(tempConfigDir(), 'f.txt');
    const ips = publicIps(150);
    const r = await cli(['whitelist', 'add', ...ips, '--failed-out', failed], { env: { PROXYCTL_API_KEY: TOKEN } });
    expect(r.code).toBe(4);
    expect(readFileSync(failed, 'utf8').trim().split('\n')).toEqual(ips.slice(100));
  });

  it('Ctrl-C mid-run: no new request, the summary printed, the rest in --failed-out, exit 130', async () => {
    let fire: (() => void) | undefined;
    let listening = false;
    const onInterrupt = (h: () => void) => {
      fire = h;
      listening = true;
      return () => void (listening = false);
    };
    // Ctrl-C while the first batch is at the server: that batch is answered and counted, the next never goes.
    const s = await withServer((req, i) => {
      if (i === 0) fire!();
      return batchReply(req);
    });
    const failed = path.join(tempConfigDir(), 'f.txt');
    const ips = publicIps(250);
    const r = await cli(['whitelist', 'add', ...ips, '--failed-out', failed, '--json'], {
      env: { PROXYCTL_API_KEY: TOKEN },
      onInterrupt,
    });
    expect(r.code).toBe(130);
    expect(s.requests).toHaveLength(1);
    const doc = JSON.parse(r.stdout);
    expect(doc).toMatchObject({ success_count: 100, already_done: 0, failed_count: 150 });
    expect(doc.failed_items[0]).toEqual({ ip: ips[100], code: 0, reason: 'not processed: interrupted (Ctrl-C)' });
    expect(readFileSync(failed, 'utf8').trim().split('\n')).toEqual(ips.slice(100));
    expect(r.stderr).toContain('warning: interrupted');
    expect(listening).toBe(false);
  });

  it('--failed-out that cannot be written: a usage error before anything is sent', async () => {
    const s = await withServer((req) => batchReply(req));
    for (const where of ['/nonexistent/dir/f.txt', tempConfigDir()]) {
      const r = await cli(['whitelist', 'add', '8.8.8.8', '--failed-out', where, '--json'], {
        env: { PROXYCTL_API_KEY: TOKEN },
      });
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(
        /^error: --failed-out: cannot write .* \((ENOENT|EISDIR)\)|^error: --failed-out: cannot write .*: (ENOENT|EISDIR)/,
      );
      expect(r.stdout).toBe('');
    }
    expect(s.requests).toHaveLength(0);
  });

  it('no token at all: exit 4 before any request', async () => {
    const s = await withServer((req) => batchReply(req));
    const r = await cli(['whitelist', 'add', '8.8.8.8']);
    expect(r.code).toBe(4);
    expect(s.requests).toHaveLength(0);
  });
});

describe('usage and config', () => {
  it('usage errors exit 2', async () => {
    for (const argv of [
      ['whitelist', 'list', '--page', '0'],
      ['whitelist', 'list', '--page', '1000000000'], // the API's nine digits
      ['whitelist', 'list', '--page-size', '101'],
      ['whitelist', 'list', '--status', 'gone'],
      ['whitelist', 'list', '--ip', '08.8.8.8'],
      ['whitelist', 'add'],
      ['whitelist', 'add', '8.8.8.8', '--retry', '-1'],
      ['whitelist', 'frobnicate'],
      ['nope'],
      ['--base-url', 'ftp://x', 'whitelist', 'list'],
      ['config', 'set', 'colour', 'x'],
    ]) {
      const r = await cli(argv, { env: { PROXYCTL_API_KEY: TOKEN } });
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.stdout, argv.join(' ')).toBe('');
    }
  });

  it('--help and --version exit 0 on stdout', async () => {
    const h = await cli(['--help']);
    expect(h.code).toBe(0);
    expect(h.stdout).toContain('whitelist');
    expect((await cli(['--version'])).stdout.trim()).toBe('0.1.0');
  });

  it('keeps the exit status that `proxyctl check` (another module) sets itself', async () => {
    const r = await cli(['check', '--proxy', 'ftp://x']);
    expect(r.code).toBe(2);
  });

  it('config accepts check.target (read by proxyctl check) and validates it', async () => {
    const dir = tempConfigDir();
    expect((await cli(['config', 'set', 'check.target', 'http://127.0.0.1:8080/ip'], { dir })).code).toBe(0);
    expect(JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8'))).toEqual({
      'check.target': 'http://127.0.0.1:8080/ip',
    });
    expect((await cli(['config', 'set', 'check.target', 'nope'], { dir })).code).toBe(2);
  });

  it('config set/get round-trips through conf and feeds the base URL', async () => {
    const dir = tempConfigDir();
    const set = await cli(['config', 'set', 'base-url', 'http://127.0.0.1:9/'], {
      dir,
      env: { PROXYCTL_BASE_URL: '' },
    });
    expect(set.code).toBe(0);
    expect(JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8'))).toEqual({ base_url: 'http://127.0.0.1:9' });
    expect((await cli(['config', 'get', 'base_url'], { dir })).stdout).toBe('http://127.0.0.1:9\n');
    const st = await cli(['auth', 'status', '--json'], { dir, env: { PROXYCTL_BASE_URL: '' } });
    expect(JSON.parse(st.stdout).base_url).toBe('http://127.0.0.1:9');
    expect((await cli(['config', 'set', 'output', 'yaml'], { dir })).code).toBe(2);
    await cli(['config', 'set', 'output', 'json'], { dir });
    await withServer(() => ({ code: 200, data: listData(1) }));
    const listed = await cli(['whitelist', 'list'], { dir, env: { PROXYCTL_API_KEY: TOKEN } });
    expect(JSON.parse(listed.stdout).total).toBe(1);
    expect(existsSync(path.join(dir, 'config.json'))).toBe(true);
  });
});

it('a config file that is not valid JSON is named in a warning, not silently replaced by the defaults', async () => {
  const dir = tempConfigDir();
  const file = path.join(dir, 'config.json');
  // A hand edit with a trailing comma: its base URL and output format would otherwise vanish without a word.
  writeFileSync(file, '{"base_url": "http://127.0.0.1:9", "output": "json",}\n');
  await withServer(() => ({ code: 200, data: listData(1) }));
  const r = await cli(['whitelist', 'list'], { dir, env: { PROXYCTL_API_KEY: TOKEN } });
  expect(r.code).toBe(0);
  expect(r.stderr).toContain(`warning: ${file} is not valid JSON; its settings are ignored`);
  const quiet = await cli(['whitelist', 'list', '--quiet'], { dir, env: { PROXYCTL_API_KEY: TOKEN } });
  expect(quiet.stderr).toContain(`warning: ${file} is not valid JSON`);
  // A missing file is no problem at all.
  const fresh = await cli(['whitelist', 'list'], { dir: tempConfigDir(), env: { PROXYCTL_API_KEY: TOKEN } });
  expect(fresh.stderr).toBe('');
});

describe('messages (issue 11): what to do next, one format', () => {
  /** Every error line: `error: …`, at most one parenthesis, never nested. */
  const expectOneFormat = (stderr: string) => {
    const lines = stderr.split('\n').filter((l) => l.startsWith('error:'));
    expect(lines.length, stderr).toBeGreaterThan(0);
    for (const l of lines) expect(l, 'nested parentheses').not.toMatch(/\([^)]*\(/);
  };

  it('a rejected token says what to do next: a stored token → web console + proxyctl login; env → PROXYCTL_API_KEY', async () => {
    const s = await withServer(() => unauthorized);
    const keychain = new MemoryKeychain();
    await keychain.set('proxyctl', s.url, TOKEN);
    const stored = await cli(['whitelist', 'list'], { keychain });
    expect(stored.code).toBe(4);
    expect(stored.stderr).toMatch(
      /^error: the API rejected the token: .*\(code 10401, request id req-\d+\); .*web console \(Account page\), then run `proxyctl login`/m,
    );
    expectOneFormat(stored.stderr);
    const env = await cli(['whitelist', 'add', '8.8.8.8'], { env: { PROXYCTL_API_KEY: TOKEN } });
    expect(env.code).toBe(4);
    expect(env.stderr).toMatch(
      /^error: the API rejected the token: .*; PROXYCTL_API_KEY holds a token the API does not accept/m,
    );
    expectOneFormat(env.stderr);
    const status = await cli(['auth', 'status'], { keychain });
    expect(status.code).toBe(4);
    expect(status.stderr).toMatch(/proxyctl login/);
  });

  it('HTTP 407 from --base-url: this looks like the proxy port, not the API', async () => {
    await withServer(() => ({ status: 407, raw: '', headers: { 'proxy-authenticate': 'Basic realm="proxy"' } }));
    const r = await cli(['whitelist', 'list'], { env: { PROXYCTL_API_KEY: TOKEN } });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^error: HTTP 407 .*this looks like the proxy port, not the API/m);
    expectOneFormat(r.stderr);
  });

  it("a server that is not proxyd (an HTML page, a JSON of its own) says it does not look like proxyd's API and which setting to fix", async () => {
    for (const answer of [
      { status: 200, raw: '<!doctype html><title>It works</title>' },
      { status: 200, raw: '{"ok":true}' },
      { status: 404, raw: 'Not Found' },
    ]) {
      const s = await withServer(() => answer);
      const r = await cli(['whitelist', 'list'], { env: { PROXYCTL_API_KEY: TOKEN } });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(
        new RegExp(
          `^error: HTTP ${answer.status} from ${s.url.replace(/[.]/g, '\\.')} does not look like proxyd's API \\(no JSON envelope .*\\): --base-url \\(or PROXYCTL_BASE_URL\\) must be the address proxyd serves its API on`,
          'm',
        ),
      );
      expect(r.stderr).not.toContain(TOKEN);
      expectOneFormat(r.stderr);
    }
  });

  it('a redirect (http:// to https://, a moved API) names the base URL to use; the token in its query never shows', async () => {
    // The usual http -> https redirect echoes the request's path and query, api_key included.
    await withServer((req) => ({
      status: 301,
      raw: '',
      headers: { location: `https://api.example.test/proxy${req.path}?api_key=${TOKEN}` },
    }));
    const r = await cli(['whitelist', 'list'], { env: { PROXYCTL_API_KEY: TOKEN } });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^error: HTTP 301 redirect to https:\/\/api\.example\.test\/proxy: proxyctl does not follow redirects \(the token is in the URL\); use --base-url https:\/\/api\.example\.test\/proxy( \(request id [^)]+\))?$/m,
    );
    expect(r.stderr).not.toContain(TOKEN.split('.')[0]!);
    expectOneFormat(r.stderr);
    // A Location that is not the same endpoint elsewhere (a login page) is named without its query.
    server!.setHandler(() => ({ status: 302, raw: '', headers: { location: '/login?next=%2Fopenapi&api_key=x' } }));
    const other = await cli(['whitelist', 'add', '8.8.8.8'], { env: { PROXYCTL_API_KEY: TOKEN } });
    expect(other.stderr).toMatch(
      /HTTP 302 redirect to http:\/\/127\.0\.0\.1:\d+\/login: proxyctl does not follow redirects/,
    );
    expect(other.stderr).not.toContain('next=');
  });

  it('a 429 shows the server message (the invalid-token lock-out, and when it ends) in the one format', async () => {
    const msg =
      'rate limited: invalid-token lock-out for source IP 127.0.0.1 after 20 invalid API keys; every request from this IP is refused until 2026-11-22T10:01:00Z, in 60 s';
    await withServer(() => ({ ...rateLimited(60), message: msg }));
    const r = await cli(['whitelist', 'list'], { env: { PROXYCTL_API_KEY: TOKEN } });
    expect(r.code).toBe(5);
    expect(r.stderr).toContain(`error: ${msg} (code 10429, request id req-`);
    expectOneFormat(r.stderr);
  });

  it('login and auth status with a rejected token end the reason with the code and request id, like every answered error', async () => {
    const s = await withServer(() => unauthorized);
    const login = await cli(['login'], { stdin: TOKEN });
    expect(login.code).toBe(4);
    expect(login.stderr).toMatch(
      /^error: the API at .* rejected the token for access key ak0123456789abcdef0123, nothing stored \(code 10401, request id req-\d+\); check /m,
    );
    expectOneFormat(login.stderr);
    const keychain = new MemoryKeychain();
    await keychain.set('proxyctl', s.url, TOKEN);
    const status = await cli(['auth', 'status'], { keychain });
    expect(status.code).toBe(4);
    expect(status.stderr).toMatch(
      /^error: the API rejects this token \(code 10401, request id req-\d+\); .*proxyctl login/m,
    );
  });

  it("an unknown command is one error line, commander's suggestion on it", async () => {
    const r = await cli(['logot']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("error: unknown command 'logot' (Did you mean logout?)\n");
  });

  it("a server's text never drives the terminal: control characters in remarks and reasons are shown escaped", async () => {
    const remark = '\u001b[31mRED\u001b[0m \u001b]0;pwned\u0007\u001b[2J\u202etxt.exe a\u0000b\u009b1m';
    let remarkNow = remark;
    await withServer((req) =>
      req.path.endsWith('/add')
        ? {
            code: 10431,
            message: '0 succeeded, 1 failed',
            data: {
              success_count: 0,
              failed_count: 1,
              failed_items: [{ ip: '8.8.8.8', code: 10420, reason: `bad\u001b[2J ${TOKEN}` }],
            },
          }
        : {
            code: 200,
            data: {
              items: [
                { whitelist_id: 7, ip: '8.8.8.8', remark: remarkNow, status: 1, created_at: '2026-11-21T10:00:00Z' },
              ],
              page: 1,
              page_size: 20,
              total: 1,
            },
          },
    );
    const shown = '\\u{1b}[31mRED\\u{1b}[0m \\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\u{202e}txt.exe a\\u{0}b\\u{9b}1m';
    const env = { PROXYCTL_API_KEY: TOKEN };
    // No escape at all without colour (NO_COLOR, a pipe); with colour only ours (the status in green).
    for (const run of [{ env: { ...env, NO_COLOR: '1' }, tty: true }, { env }]) {
      const r = await cli(['whitelist', 'list'], run);
      expect(r.stdout).toContain(shown);
      expect(r.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202e]/);
    }
    const coloured = await cli(['whitelist', 'list'], { env, tty: true });
    expect(coloured.stdout).toContain(shown);
    expect(coloured.stdout.replace(/\u001b\[(1|2|22|32|39)m/g, '')).not.toMatch(
      /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/,
    );
    // A remark shaped like one of our painted cells, with a bidi override inside: shown escaped with colour on too.
    const painted = '\u001b[32m\u202eexe.txt\u001b[32m';
    remarkNow = painted;
    const shaped = await cli(['whitelist', 'list'], { env, tty: true });
    expect(shaped.stdout).toContain('\\u{1b}[32m\\u{202e}exe.txt\\u{1b}[32m');
    expect(shaped.stdout).not.toContain('\u202e');
    expect(shaped.stdout).not.toContain(painted);
    remarkNow = remark;
    // --json keeps the remark exactly as stored (JSON escapes it).
    expect(JSON.parse((await cli(['whitelist', 'list', '--json'], { env })).stdout).items[0].remark).toBe(remark);
    // A failed item's reason: escaped, and scrubbed of the token (the server is not trusted with it either).
    const add = await cli(['whitelist', 'add', '8.8.8.8'], { env, tty: true });
    expect(add.code).toBe(3);
    expect(add.stdout).toContain('bad\\u{1b}[2J ****');
    expect(add.stdout + add.stderr).not.toContain(TOKEN);
    const json = await cli(['whitelist', 'add', '8.8.8.8', '--json'], { env });
    expect(JSON.parse(json.stdout).failed_items[0].reason).toBe('bad\u001b[2J ****');
  });

  it('usage errors and business errors share the `error:` prefix', async () => {
    const usage = await cli(['whitelist', 'list', '--page-size', '0']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/^error: /m);
    const business = await cli(['whitelist', 'list'], { env: { PROXYCTL_API_KEY: 'not-a-token' } });
    expect(business.code).toBe(4);
    expect(business.stderr).toMatch(/^error: /m);
    expect(business.stderr).not.toMatch(/^proxyctl: /m);
  });

  it('the keychain-fallback notice: once per stored token, never under --quiet', async () => {
    await withServer(() => ({ code: 200, data: listData(0) }));
    const keychain = new MemoryKeychain();
    keychain.available = false;
    const dir = tempConfigDir();
    const login = await cli(['login'], { stdin: TOKEN, keychain, dir });
    expect(login.code).toBe(0);
    const quiet = await cli(['--quiet', 'whitelist', 'list'], { keychain, dir });
    expect(quiet.code).toBe(0);
    expect(quiet.stderr).toBe('');
    const first = await cli(['whitelist', 'list'], { keychain, dir });
    expect(first.stderr.match(/using the API token stored in/g)).toHaveLength(1);
    const second = await cli(['whitelist', 'list'], { keychain, dir });
    expect(second.stderr).toBe('');
    // A new token is announced again, once.
    await cli(['login'], { stdin: OTHER_TOKEN, keychain, dir });
    expect((await cli(['auth', 'status'], { keychain, dir })).stderr).toMatch(/using the API token stored in/);
    expect((await cli(['auth', 'status'], { keychain, dir })).stderr).toBe('');
  });
});
