// Secrets audit: every command and endpoint runs with known token, console password and proxy
// password values; every log line, error, metric, console page, gateway answer and CLI output is
// collected, and none may contain any of them. Only the documented one-time reveals are exempt
// (`proxyd admin token reset` / `proxy-user create` / `key create` stdout, the console's token reveal page).
import { existsSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  admin,
  makeAccount,
  PROXYCTL,
  ROOT,
  run,
  startDaemon,
  tempDir,
  type Daemon,
  type RunResult,
  isolatedCliEnv,
} from '../helpers/daemon.js';
import { tcpEcho } from '../helpers/net.js';
import { sleep } from '../helpers/wait.js';
import { connectTunnel, exchange, hostPort, httpRequest } from './net.js';
import { patient } from '../helpers/patience.js';

const EMAIL = 'audit@example.com';
const CONSOLE_PASSWORD = 'Console-Pw-7f3a9c2e1b5d';
const PROXY_USER = 'audit-user';
const PROXY_PASSWORD = 'ProxyPwKnown9d8e7f6a5b4c';

let d: Daemon;
let token: string;
/** Tokens made later (console reset): secrets from then on. */
const laterTokens: string[] = [];
/** API keys made by `proxyd admin key create` (its stdout is the one-time reveal): secrets everywhere else. */
const apiKeys: string[] = [];
/** Proxy passwords given or generated through the customer API (shown once: secrets everywhere else). */
const apiPasswords: string[] = [];
let echoHttp: http.Server;
let echoTcp: net.Server;
let work: string;
/** Everything the audit reads: where it came from, and the text. */
const collected: Array<{ where: string; text: string }> = [];
/** Request heads the target behind the gateway received (must not carry proxy credentials). */
const targetSaw: string[] = [];

const collect = (where: string, ...texts: Array<string | Buffer | undefined>) => {
  for (const t of texts)
    if (t !== undefined) collected.push({ where, text: Buffer.isBuffer(t) ? t.toString('latin1') : t });
};
const collectRun = (where: string, r: RunResult) => collect(where, r.stdout, r.stderr);
const collectHttp = (where: string, r: { status: number; headers: http.IncomingHttpHeaders; body: string }) =>
  collect(where, `${r.status} ${JSON.stringify(r.headers)}\n${r.body}`);

const basic = (u: string, p: string) => Buffer.from(`${u}:${p}`).toString('base64');
const secretPart = (t: string) => t.split('.')[1]!;

function needles(): Array<[string, string]> {
  const out: Array<[string, string]> = [
    ['console password', CONSOLE_PASSWORD],
    ['proxy password', PROXY_PASSWORD],
    ['proxy Basic credentials', basic(PROXY_USER, PROXY_PASSWORD)],
    ['wrong proxy Basic credentials', basic(PROXY_USER, `${PROXY_PASSWORD}x`)],
  ];
  for (const t of [token, ...laterTokens]) {
    out.push(['API token', t], ['API token secret', secretPart(t)]);
  }
  for (const k of apiKeys) out.push(['API key', k], ['API key secret', k.split('_').slice(2).join('_')]);
  for (const p of apiPasswords) out.push(['proxy password set through the API', p]);
  return out;
}

function ctlEnv(extra: Record<string, string> = {}): Record<string, string> {
  return isolatedCliEnv(work, d.api, extra);
}

async function ctl(args: string[], opts: { input?: string; env?: Record<string, string> } = {}): Promise<RunResult> {
  const r = await run(PROXYCTL, args, { input: opts.input ?? '', env: ctlEnv(opts.env), timeoutMs: 60_000 });
  collectRun(`proxyctl ${args.join(' ')}`, r);
  if (process.env.AUDIT_DEBUG) console.log(`proxyctl ${args.join(' ')} -> ${r.code}\n${r.stdout}${r.stderr}`);
  return r;
}

beforeAll(async () => {
  work = tempDir('proxyd-audit-');
  echoHttp = http.createServer((req, res) => {
    targetSaw.push(`${req.method} ${req.url}\n${JSON.stringify(req.headers)}`);
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ ip: req.socket.remoteAddress?.replace(/^::ffff:/, '') }));
  });
  await new Promise<void>((r) => echoHttp.listen(0, '127.0.0.1', () => r()));
  echoTcp = await tcpEcho();
  d = await startDaemon({
    args: [
      '--allow-private-targets',
      '--log-level',
      'debug',
      '--rate-limits',
      'list=10000,add=10000,delete=10000,invalid=10000',
    ],
  });
  ({ token } = await makeAccount(d.dataDir, EMAIL, { password: CONSOLE_PASSWORD }));
}, patient(60_000));

afterAll(async () => {
  await d?.stop();
  await new Promise((r) => echoHttp?.close(r));
  await new Promise((r) => echoTcp?.close(r));
});

const echoAddr = () => `127.0.0.1:${(echoHttp.address() as net.AddressInfo).port}`;
const tcpAddr = () => `127.0.0.1:${(echoTcp.address() as net.AddressInfo).port}`;

describe('secrets audit', () => {
  it(
    'proxyd admin: every command (errors included) keeps passwords and tokens out of its output',
    async () => {
      const steps: Array<[string[], string | undefined]> = [
        // The account exists: the error must not echo the password given on the command line.
        [['account', 'create', '--email', EMAIL, '--password', CONSOLE_PASSWORD], undefined],
        [['account', 'create', '--email', EMAIL, '--password-stdin'], `${CONSOLE_PASSWORD}\n`],
        [
          ['account', 'create', '--email', 'second@example.com', '--password-stdin', '--verified'],
          `${CONSOLE_PASSWORD}\n`,
        ],
        [['account', 'set', '--email', EMAIL, '--verified', 'true'], undefined],
        [['whitelist', 'set-status', '--email', EMAIL, '--ip', '8.8.8.8', '--status', 'disabled'], undefined],
        [['token', 'disable', '--email', 'second@example.com'], undefined],
        [['proxy-user', 'create', '--email', EMAIL, '--username', 'x', '--password-stdin'], `${PROXY_PASSWORD}\n`], // bad username
      ];
      for (const [args, input] of steps)
        collectRun(`proxyd admin ${args.join(' ')}`, await admin(d.dataDir, args, input));
      // The documented one-time reveal: its stdout is exempt, its stderr is not.
      const pu = await admin(
        d.dataDir,
        ['proxy-user', 'create', '--email', EMAIL, '--username', PROXY_USER, '--password-stdin'],
        `${PROXY_PASSWORD}\n`,
      );
      expect(pu.code, pu.stderr).toBe(0);
      collect('proxyd admin proxy-user create (stderr)', pu.stderr);
      const again = await admin(
        d.dataDir,
        ['proxy-user', 'create', '--email', EMAIL, '--username', PROXY_USER, '--password-stdin'],
        `${PROXY_PASSWORD}\n`,
      );
      collectRun('proxyd admin proxy-user create (duplicate)', again);
    },
    patient(60_000),
  );

  it(
    'the API: success, every 401 cause, token in headers, paths, bodies and parameter names',
    async () => {
      const secret = secretPart(token);
      const wrong = `${token.split('.')[0]}.${secret.slice(0, -1)}${secret.endsWith('A') ? 'B' : 'A'}`;
      const L = '/openapi/v1/proxy/whitelist/list';
      const A = '/openapi/v1/proxy/whitelist/add';
      const D = '/openapi/v1/proxy/whitelist/delete';
      const json = { 'content-type': 'application/json' };
      const reqs: Array<{ method: string; url: string; headers?: Record<string, string>; body?: Buffer }> = [
        { method: 'GET', url: `${L}?api_key=${token}` },
        {
          method: 'POST',
          url: `${A}?api_key=${token}`,
          headers: json,
          body: Buffer.from('{"items":[{"ip":"8.8.8.8","remark":"audit"},{"ip":"10.0.0.1"}]}'),
        },
        {
          method: 'POST',
          url: `${D}?api_key=${token}`,
          headers: json,
          body: Buffer.from('{"ips":["8.8.8.8","9.9.9.9"]}'),
        },
        { method: 'GET', url: `${L}?api_key=${wrong}` },
        { method: 'GET', url: `${L}?api_key=${token}&api_key=${token}` },
        { method: 'GET', url: `${L}?api_key=${token}x` },
        { method: 'GET', url: `${L}?api_key=${secret}` },
        { method: 'GET', url: L, headers: { authorization: `Bearer ${token}` } },
        { method: 'GET', url: L, headers: { 'x-api-key': token } },
        { method: 'GET', url: `${L}/${token}` },
        { method: 'GET', url: `/${token}?api_key=${token}` },
        { method: 'DELETE', url: `${L}?api_key=${token}` },
        { method: 'GET', url: `${L}?api_key=${token}&${secret}=1` },
        { method: 'GET', url: `${L}?api_key=${token}&page=${secret}` },
        { method: 'GET', url: `${L}?api_key=${token}&ip=${token}` },
        {
          method: 'POST',
          url: `${A}?api_key=${token}&${secret}=1`,
          headers: json,
          body: Buffer.from('{"items":[{"ip":"8.8.4.4"}]}'),
        },
        {
          method: 'POST',
          url: `${A}?api_key=${token}`,
          headers: json,
          body: Buffer.from(`{"items":[{"ip":"8.8.4.4","${secret}":1}]}`),
        },
        {
          method: 'POST',
          url: `${A}?api_key=${token}`,
          headers: json,
          body: Buffer.from(`{"${secret}":[],"${secret}":[]}`),
        },
        // (Not audited: a secret sent as an item's `ip` comes back in failed_items[].ip, "the IP string as sent" by contract.)
        {
          method: 'POST',
          url: `${D}?api_key=${token}`,
          headers: { 'content-type': `application/json; x=${secret}` },
          body: Buffer.from(`not json ${token}`),
        },
        {
          method: 'POST',
          url: `${D}?api_key=${token}`,
          headers: json,
          body: Buffer.from(`{"ips":["1.1.1.1"],"pad":"${'x'.repeat(300 * 1024)}${token}"}`),
        },
      ];
      for (const r of reqs) collectHttp(`API ${r.method} ${r.url.slice(0, 50)}`, await httpRequest(d.api, r));
      // Protocol-level errors answered by the HTTP server itself.
      const api = new URL(d.api).host;
      collect(
        'API malformed request line',
        (await exchange(api, Buffer.from(`GET /?api_key=${token} HTTP/1.1 junk\r\n\r\n`), { waitMs: 2000 })).data,
      );
      collect(
        'API oversized header',
        (
          await exchange(api, Buffer.from(`GET /?api_key=${token} HTTP/1.1\r\nX: ${'a'.repeat(20_000)}\r\n\r\n`), {
            waitMs: 2000,
          })
        ).data,
      );
    },
    patient(60_000),
  );

  it(
    'the customer API: proxy users made, changed, rotated, refused; only the create and rotation answers show a password',
    async () => {
      const { openStore } = await import('../../src/daemon/store/index.js');
      const { ApiKeyService } = await import('../../src/daemon/services/api-keys.js');
      let key = '';
      const store = await openStore({ dataDir: d.dataDir });
      try {
        const account = await store.accounts.findByEmail(EMAIL);
        const made = await new ApiKeyService(store).create(
          account!.id,
          {
            name: 'audit',
            scopes: ['users:read', 'users:write', 'rules:read', 'rules:write'],
            expiresAtMs: null,
            allowedIps: [],
          },
          { actor: { type: 'operator', id: 'audit' }, sourceIp: null, requestId: null },
        );
        apiKeys.push(made.key);
        key = made.key;
      } finally {
        await store.close();
      }
      const chosen = 'ApiUserPwKnown3c4d5e6f7a';
      const rotated = 'ApiUserPwRotated8b9c0d1e';
      apiPasswords.push(chosen, rotated);
      const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      const U = '/openapi/v1/proxy/users';
      const send = (method: string, url: string, body?: unknown, headers: Record<string, string> = auth) =>
        httpRequest(d.api, {
          method,
          url,
          headers,
          ...(body !== undefined ? { body: Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)) } : {}),
        });
      // The one-time reveals: the create's and the rotation's answers (exempt), their passwords secrets from then on.
      const created = await send(
        'POST',
        U,
        { username: 'api-audit-user', password: chosen },
        { ...auth, 'idempotency-key': 'audit-create' },
      );
      expect(created.status).toBe(200);
      const generated = JSON.parse((await send('POST', `${U}/batch`, { items: [{ username: 'api-audit-gen' }] })).body)
        .data.created[0].password as string;
      apiPasswords.push(generated);
      expect((await send('POST', `${U}/api-audit-user/password`, { password: rotated })).status).toBe(200);
      // Everything else is audited: reads, changes, refusals that carry a password in the request, the replay's conflict.
      const audited: Array<[string, string, unknown?, Record<string, string>?]> = [
        ['GET', U],
        ['GET', `${U}/api-audit-user`],
        ['PATCH', `${U}/api-audit-user`, { password: chosen }],
        ['PATCH', `${U}/api-audit-user`, { status: 'disabled', deny: ['example.com'] }],
        ['POST', U, { username: 'api-audit-user', password: chosen }],
        ['POST', U, { username: 'api-audit-2', password: `${chosen}\n` }],
        ['POST', U, { username: 'api-audit-3', password: chosen, [chosen]: 1 }],
        ['POST', U, { username: 'api-audit-user', password: rotated }, { ...auth, 'idempotency-key': 'audit-create' }],
        [
          'POST',
          `${U}/batch`,
          {
            items: [
              { username: 'api-audit-user', password: chosen },
              { username: 'x-session-y', password: rotated },
            ],
          },
        ],
        ['POST', `${U}/nobody/password`, { password: chosen }],
        ['POST', `${U}/api-audit-user/password`, { password: 'short' }],
        ['POST', U, `{"username":"api-audit-4","password":"${chosen}"`],
        ['GET', U, undefined, { authorization: `Bearer ${key}x` }],
        ['GET', `${U}?q=${key}`],
        ['GET', `/openapi/v1/proxy/rules?api_key=${key}`],
        ['DELETE', `${U}/api-audit-user`],
      ];
      for (const [method, url, body, headers] of audited)
        collectHttp(`customer API ${method} ${url.slice(0, 50)}`, await send(method, url, body, headers));
    },
    patient(60_000),
  );

  it(
    'API keys: made by the operator, used right and wrong on every kind of endpoint, in headers, queries and paths',
    async () => {
      const made = await admin(d.dataDir, [
        'key',
        'create',
        '--email',
        EMAIL,
        '--name',
        'audit',
        '--scopes',
        'usage:read,audit:read',
      ]);
      expect(made.code, made.stderr).toBe(0);
      collect('proxyd admin key create (stderr)', made.stderr);
      const key: string = made.json.key;
      apiKeys.push(key);
      const secret = key.split('_').slice(2).join('_');
      const wrong = `${key.slice(0, -1)}${key.endsWith('A') ? 'B' : 'A'}`;
      collectRun('proxyd admin key list', await admin(d.dataDir, ['key', 'list', '--email', EMAIL]));
      collectRun(
        'proxyd admin key create (bad scope)',
        await admin(d.dataDir, ['key', 'create', '--email', EMAIL, '--name', secret, '--scopes', secret]),
      );
      const U = '/openapi/v1/usage/summary';
      const reqs: Array<{ method: string; url: string; headers?: Record<string, string>; body?: Buffer }> = [
        { method: 'GET', url: U, headers: { authorization: `Bearer ${key}` } },
        { method: 'GET', url: '/openapi/v1/audit', headers: { authorization: `Bearer ${key}` } },
        { method: 'GET', url: `/openapi/v1/audit?action=${secret}`, headers: { authorization: `Bearer ${key}` } },
        { method: 'GET', url: `${U}?${secret}=1`, headers: { authorization: `Bearer ${key}` } },
        { method: 'GET', url: `${U}?api_key=${key}`, headers: { authorization: `Bearer ${key}` } },
        { method: 'GET', url: U, headers: { authorization: `Bearer ${wrong}` } },
        { method: 'GET', url: `${U}?api_key=${key}` },
        { method: 'GET', url: U, headers: { 'x-api-key': key } },
        { method: 'GET', url: `${U}/${key}`, headers: { authorization: `Bearer ${key}` } },
        { method: 'GET', url: `/openapi/v1/proxy/whitelist/list?api_key=${key}` },
        { method: 'GET', url: '/openapi/v1/proxy/whitelist/list', headers: { authorization: `Bearer ${key}` } },
        {
          method: 'POST',
          url: U,
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: Buffer.from(`{"k":"${key}"}`),
        },
      ];
      for (const r of reqs) collectHttp(`API (key) ${r.method} ${r.url.slice(0, 40)}`, await httpRequest(d.api, r));
      const revoked = await admin(d.dataDir, ['key', 'revoke', '--email', EMAIL, '--id', made.json.id]);
      collectRun('proxyd admin key revoke', revoked);
      collectHttp(
        'API revoked key',
        await httpRequest(d.api, { method: 'GET', url: U, headers: { authorization: `Bearer ${key}` } }),
      );
    },
    patient(60_000),
  );

  it(
    'the gateway: right and wrong proxy passwords over HTTP forward, CONNECT and SOCKS5; the target never sees them',
    async () => {
      const good = basic(PROXY_USER, PROXY_PASSWORD);
      const bad = basic(PROXY_USER, `${PROXY_PASSWORD}x`);
      for (const [name, auth] of [
        ['good', good],
        ['bad', bad],
      ] as const) {
        const fwd = await exchange(
          d.httpProxy,
          Buffer.from(
            `GET http://${echoAddr()}/p?api_key=${token} HTTP/1.1\r\nHost: ${echoAddr()}\r\nProxy-Authorization: Basic ${auth}\r\nAuthorization: Bearer ${token}\r\nConnection: close\r\n\r\n`,
          ),
          { waitMs: 3000 },
        );
        collect(`gateway forward (${name} password)`, fwd.data);
        if (name === 'good') expect(fwd.data.toString()).toMatch(/^HTTP\/1\.1 200/);
        const cn = await exchange(
          d.httpProxy,
          Buffer.from(`CONNECT ${tcpAddr()} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic ${auth}\r\n\r\nhello`),
          { waitMs: 1500 },
        );
        collect(`gateway CONNECT (${name} password)`, cn.data);
        const u = Buffer.from(PROXY_USER);
        const p = Buffer.from(name === 'good' ? PROXY_PASSWORD : `${PROXY_PASSWORD}x`);
        const { port } = hostPort(tcpAddr());
        const socks = await exchange(
          d.socks,
          [
            Buffer.from([5, 1, 2]),
            Buffer.concat([Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]),
            Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, port >> 8, port & 0xff]),
            Buffer.from('hello'),
          ],
          { waitMs: 1500, pauseMs: 100 },
        );
        collect(`gateway SOCKS5 (${name} password)`, socks.data);
      }
      // Credentials to a refused target, a malformed Proxy-Authorization, and a SOCKS password with odd bytes.
      collect(
        'gateway refused target',
        (
          await exchange(
            d.httpProxy,
            Buffer.from(
              `CONNECT ${d.api.replace('http://', '')} HTTP/1.1\r\nProxy-Authorization: Basic ${good}\r\n\r\n`,
            ),
            { waitMs: 1500 },
          )
        ).data,
      );
      collect(
        'gateway malformed auth',
        (
          await exchange(
            d.httpProxy,
            Buffer.from(
              `CONNECT ${tcpAddr()} HTTP/1.1\r\nProxy-Authorization: Basic ${good}!!\r\nProxy-Authorization: Basic ${good}\r\n\r\n`,
            ),
            { waitMs: 1500 },
          )
        ).data,
      );
      const t = await connectTunnel(d.httpProxy, tcpAddr(), { username: PROXY_USER, password: PROXY_PASSWORD });
      expect(t.status).toBe(200);
      t.socket.destroy();
      await sleep(200);
      expect(targetSaw.length).toBeGreaterThan(0);
      for (const h of targetSaw)
        collect('request head seen by the target', h.replace(`api_key=${token}`, '').replace(`Bearer ${token}`, ''));
    },
    patient(60_000),
  );

  it('the operational endpoints: /metrics, /healthz, /ip, /openapi.json', async () => {
    for (const p of ['/metrics', '/healthz', '/ip', '/openapi.json'])
      collectHttp(p, await httpRequest(d.api, { method: 'GET', url: p }));
  });

  it(
    'proxyctl: login, auth status, whitelist list/add/delete, check (outputs and errors)',
    async (ctx) => {
      if (!existsSync(path.join(ROOT, 'dist/cli/main.js')))
        ctx.skip('proxyctl is not built (dist/cli/main.js missing)');
      const login = await ctl(['login', '--with-token'], { input: `${token}\n` });
      expect(login.code, login.stderr).toBe(0);
      await ctl(['auth', 'status']);
      await ctl(['auth', 'status', '--json']);
      await ctl(['auth', 'status'], { env: { PROXYCTL_API_KEY: token } });
      await ctl(['whitelist', 'add', '8.8.8.8=audit', '10.0.0.1', '1.2.3', '--json']);
      await ctl(['whitelist', 'add', '8.8.4.4', '192.168.0.1']);
      await ctl(['whitelist', 'list']);
      await ctl(['whitelist', 'list', '--json', '--all']);
      await ctl(['whitelist', 'delete', '8.8.8.8', '9.9.9.9']);
      await ctl(['whitelist', 'delete', '8.8.4.4', '--json']);
      // A rejected token from the environment, a wrong base URL, a malformed token at login.
      const wrong = `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`;
      await ctl(['whitelist', 'list'], { env: { PROXYCTL_API_KEY: wrong } });
      await ctl(['auth', 'status', '--json'], { env: { PROXYCTL_API_KEY: wrong } });
      await ctl(['whitelist', 'list', '--base-url', 'http://127.0.0.1:1', '--retry', '0'], {
        env: { PROXYCTL_API_KEY: token },
      });
      await ctl(['whitelist', 'add', '8.8.8.8', '--base-url', 'http://127.0.0.1:1', '--retry', '0'], {
        env: { PROXYCTL_API_KEY: token },
      });
      await ctl(['login', '--with-token'], { input: `${token}junk\n` });
      await ctl(['login', '--with-token'], { input: `${wrong}\n` });
      await ctl(['config', 'get', 'base_url']);
      await ctl(['logout']);
      await ctl(['auth', 'status']);
      // Re-store the good token for anything after.
      await ctl(['login', '--with-token'], { input: `${token}\n` });

      const help = await run(PROXYCTL, ['--help'], { env: ctlEnv() });
      if (!/\bcheck\b/.test(help.stdout)) ctx.skip('proxyctl check is not registered yet');
      const target = `http://${echoAddr()}/ip`;
      const proxyUrl = (pw: string, scheme = 'http') =>
        `${scheme}://${PROXY_USER}:${encodeURIComponent(pw)}@${d.httpProxy.replace(/:\d+$/, '')}:${hostPort(scheme === 'http' ? d.httpProxy : d.socks).port}`;
      await ctl(['check', '--proxy', proxyUrl(PROXY_PASSWORD), '--target', target, '--timeout', '3000']);
      await ctl(['check', '--proxy', proxyUrl(PROXY_PASSWORD), '--target', target, '--timeout', '3000', '--json']);
      await ctl(['check', '--proxy', proxyUrl(`${PROXY_PASSWORD}x`), '--target', target, '--timeout', '3000']);
      await ctl([
        'check',
        '--proxy',
        proxyUrl(PROXY_PASSWORD, 'socks5h'),
        '--target',
        target,
        '--timeout',
        '3000',
        '--json',
      ]);
      await ctl([
        'check',
        '--proxy',
        proxyUrl(`${PROXY_PASSWORD}x`, 'socks5h'),
        '--target',
        target,
        '--timeout',
        '3000',
      ]);
      await ctl([
        'check',
        '--proxy',
        `http://${PROXY_USER}:${PROXY_PASSWORD}@127.0.0.1:1`,
        '--target',
        target,
        '--timeout',
        '1000',
      ]);
    },
    patient(180_000),
  );

  it(
    'proxyctl: key set/status/forget, usage on the key, users, proxies export (outputs and errors)',
    async (ctx) => {
      if (!existsSync(path.join(ROOT, 'dist/cli/main.js')))
        ctx.skip('proxyctl is not built (dist/cli/main.js missing)');
      const made = await admin(d.dataDir, [
        'key',
        'create',
        '--email',
        EMAIL,
        '--name',
        'cli audit',
        '--scopes',
        'usage:read,users:read,users:write',
      ]);
      expect(made.code, made.stderr).toBe(0);
      collect('proxyd admin key create (stderr)', made.stderr);
      const key: string = made.json.key;
      apiKeys.push(key);
      const wrong = `${key.slice(0, -1)}${key.endsWith('A') ? 'B' : 'A'}`;
      expect((await ctl(['key', 'set'], { input: `${key}\n` })).code).toBe(0);
      await ctl(['key', 'status']);
      await ctl(['key', 'status', '--json']);
      await ctl(['key', 'set'], { input: `${wrong}\n` });
      await ctl(['key', 'set'], { input: `${token}\n` });
      await ctl(['login', '--with-token'], { input: `${key}\n` });
      await ctl(['usage']);
      await ctl(['usage', '--json']);
      await ctl(['usage'], { env: { PROXYCTL_API_KEY: wrong } });
      await ctl(['usage'], { env: { PROXYCTL_API_KEY: token } });
      await ctl(['users', 'list']);
      await ctl(['users', 'list', '--json']);
      await ctl(['users', 'show', PROXY_USER, '--json']);
      // A password given is never printed back, in a table or in --json.
      expect(
        (await ctl(['users', 'create', 'audit-cli-1', '--password-stdin', '--json'], { input: `${PROXY_PASSWORD}\n` }))
          .code,
      ).toBe(0);
      expect(
        (await ctl(['users', 'create', 'audit-cli-2', '--password-stdin'], { input: `${PROXY_PASSWORD}\n` })).code,
      ).toBe(0);
      await ctl(['users', 'create', 'audit-cli-1', '--password-stdin'], { input: `${PROXY_PASSWORD}\n` });
      await ctl(['users', 'passwd', 'audit-cli-2', '--password-stdin', '--json'], { input: `${PROXY_PASSWORD}\n` });
      await ctl(['users', 'passwd', 'audit-cli-2', '--password-stdin'], { input: `${PROXY_PASSWORD}\n` });
      const file = path.join(work, 'audit-users.csv');
      writeFileSync(file, `username,password\naudit-cli-3,${PROXY_PASSWORD}\naudit-cli-1,${PROXY_PASSWORD}\n`);
      await ctl(['users', 'create', '--file', file]);
      await ctl(['users', 'create', '--file', file, '--json']);
      // A secret pasted where a name belongs: refused, and shown redacted.
      await ctl(['users', 'show', key]);
      await ctl(['users', 'create', key]);
      await ctl(['proxies', 'export', '--user', key], { input: `${PROXY_PASSWORD}\n` });
      await ctl(['proxies', 'export', '--user', PROXY_USER], { input: `${key}\n` });
      await ctl(['users', 'set', 'audit-cli-1', '--allow', key]);
      // The exported lines are what was asked for (they hold the password): their stdout is exempt, stderr is not.
      const lines = await run(PROXYCTL, ['proxies', 'export', '--user', PROXY_USER, '--count', '2'], {
        input: `${PROXY_PASSWORD}\n`,
        env: ctlEnv(),
      });
      expect(lines.code, lines.stderr).toBe(0);
      collect('proxyctl proxies export (stderr)', lines.stderr);
      await ctl(['users', 'delete', 'audit-cli-2', '--yes']);
      await ctl(['key', 'forget']);
      await ctl(['users', 'list']);
    },
    patient(120_000),
  );

  it(
    'the console: log in (wrong, then right), the pages, a token reset; only the reveal shows the token',
    async (ctx) => {
      const probe = await httpRequest(d.api, { method: 'GET', url: '/console/login' });
      if (probe.status !== 200) ctx.skip(`the console does not answer (/console/login -> ${probe.status})`);
      const jar = new Map<string, string>();
      const cookieHeader = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
      const go = async (method: string, url: string, form?: Record<string, string>) => {
        const body = form ? Buffer.from(new URLSearchParams(form).toString()) : undefined;
        const r = await httpRequest(d.api, {
          method,
          url,
          headers: { cookie: cookieHeader(), ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
          body,
        });
        for (const c of [r.headers['set-cookie'] ?? []].flat()) {
          const [kv] = c.split(';');
          const i = kv!.indexOf('=');
          jar.set(kv!.slice(0, i), kv!.slice(i + 1));
        }
        return r;
      };
      const csrfOf = (html: string) => /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? '';
      const page = async (url: string) => {
        const r = await go('GET', url);
        collectHttp(`console GET ${url}`, r);
        return r;
      };

      let login = await page('/console/login');
      const wrongPw = await go('POST', '/console/login', {
        _csrf: csrfOf(login.body),
        email: EMAIL,
        password: `${CONSOLE_PASSWORD}x`,
      });
      collectHttp('console POST /console/login (wrong password)', wrongPw);
      expect(wrongPw.body).not.toContain(`${CONSOLE_PASSWORD}x`);
      login = await page('/console/login');
      const ok = await go('POST', '/console/login', {
        _csrf: csrfOf(login.body),
        email: EMAIL,
        password: CONSOLE_PASSWORD,
      });
      collectHttp('console POST /console/login', ok);
      expect(ok.status).toBe(303);
      const account = await page('/console/account');
      expect(account.body).toContain(token.split('.')[0]);
      await page('/console/whitelist');
      await page('/console/proxy-users');
      const confirm = await page('/console/token/confirm');
      const reset = await go('POST', '/console/token', { _csrf: csrfOf(confirm.body) });
      collectHttp('console POST /console/token', reset);
      expect(reset.status).toBe(303);
      // The reveal: exempt from the audit, but its token is a secret everywhere else from now on.
      const reveal = await go('GET', '/console/account');
      const shown = /data-testid="api-token"[^>]*>([^<]+)</.exec(reveal.body)?.[1]?.trim();
      expect(shown).toMatch(/^ak[0-9a-f]{20}\.[A-Za-z0-9_-]{43}$/);
      expect(reveal.headers['cache-control']).toBe('no-store');
      expect(reveal.headers['referrer-policy']).toBe('no-referrer');
      expect(reveal.headers['content-security-policy']).toMatch(/default-src 'self'/);
      laterTokens.push(shown!);
      collect('console reveal page headers', JSON.stringify(reveal.headers));
      await page('/console/account');
      await page('/console/whitelist');
      const csrf = csrfOf((await page('/console/proxy-users')).body);
      collectHttp('console POST /console/logout', await go('POST', '/console/logout', { _csrf: csrf }));
      await page('/console/account');
      // The new token works on the API, and that request is audited too.
      collectHttp(
        'API with the console token',
        await httpRequest(d.api, { method: 'GET', url: `/openapi/v1/proxy/whitelist/list?api_key=${shown}` }),
      );
    },
    patient(60_000),
  );

  it(
    'finds no secret in any output, error, page, metric or log line',
    async () => {
      // Metrics once more (after everything), then stop the daemon so every log line is flushed.
      collectHttp('/metrics (final)', await httpRequest(d.api, { method: 'GET', url: '/metrics' }));
      expect(await d.stop()).toBe(0);
      for (const [i, line] of d.logs.entries()) collect(`proxyd log line ${i}`, line);
      expect(d.logs.length).toBeGreaterThan(20);
      const hits: string[] = [];
      for (const { where, text } of collected) {
        for (const [what, value] of needles())
          if (text.includes(value))
            hits.push(
              `${what} in ${where}: …${text.slice(Math.max(0, text.indexOf(value) - 60), text.indexOf(value) + 20)}…`,
            );
      }
      console.info(
        `secrets audit: ${collected.length} outputs scanned (${d.logs.length} log lines), ${needles().length} secret values`,
      );
      expect(hits).toEqual([]);
    },
    patient(60_000),
  );
});
