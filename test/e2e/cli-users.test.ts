// End to end: the built proxyctl against a spawned proxyd on 127.0.0.1, with an API key made by `proxyd admin key
// create`: key set/status/forget (no keychain: the 0600 file), usage on the key (the token alone is exit 4), every
// users command, `users create --file` of 250 users through a reverse proxy that loses one batch's answer (a 500 after
// proxyd did it), and an exported proxy line that works with curl through the gateway. No key, token or password in
// any output but the passwords shown once and the exported lines.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { curl } from '../gateway/helpers.js';
import {
  PROXYCTL,
  admin,
  makeAccount,
  run,
  startDaemon,
  tempDir,
  isolatedCliEnv,
  waitForProxyUsers,
  type Daemon,
  type RunResult,
} from '../helpers/daemon.js';
import { BACKENDS } from '../helpers/postgres.js';
import { patient } from '../helpers/patience.js';

describe.each(BACKENDS)('proxyctl users, keys and proxy lists on %s', (backend) => {
  let d: Daemon;
  let token = '';
  let key = '';
  let usageOnlyKey = '';
  let work = '';
  let echo: http.Server;
  let echoPort = 0;
  /** Secrets that must never be printed, and those shown once (allowed where they are made). */
  const secrets: string[] = [];
  const outputs: Array<{ args: string[]; r: RunResult; allow: string[] }> = [];

  const ctl = async (
    args: string[],
    opts: { input?: string; env?: Record<string, string>; base?: string; allow?: string[] } = {},
  ) => {
    const r = await run(PROXYCTL, args, {
      ...(opts.input !== undefined ? { input: opts.input } : {}),
      env: isolatedCliEnv(work, opts.base ?? d.api, opts.env),
      timeoutMs: patient(90_000),
    });
    outputs.push({ args, r, allow: opts.allow ?? [] });
    return r;
  };
  const credentials = () => path.join(work, 'config', 'proxyctl', 'credentials.json');

  beforeAll(async () => {
    work = tempDir('proxyctl-users-e2e-');
    d = await startDaemon({ backend, args: ['--allow-private-targets'] });
    ({ token } = await makeAccount(d.dataDir, 'users-cli@example.test'));
    const k = await admin(d.dataDir, [
      'key',
      'create',
      '--email',
      'users-cli@example.test',
      '--name',
      'cli',
      '--scopes',
      'users:read,users:write,usage:read',
    ]);
    expect(k.code, k.stderr).toBe(0);
    key = k.json.key;
    const u = await admin(d.dataDir, [
      'key',
      'create',
      '--email',
      'users-cli@example.test',
      '--name',
      'usage',
      '--scopes',
      'usage:read',
    ]);
    expect(u.code, u.stderr).toBe(0);
    usageOnlyKey = u.json.key;
    secrets.push(token, key, usageOnlyKey);
    echo = http.createServer((_q, s) => s.end('hello through the gateway'));
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
    echoPort = (echo.address() as AddressInfo).port;
  }, patient(90_000));

  afterAll(async () => {
    if (echo) await new Promise((r) => echo.close(r));
    await d?.stop();
    // No secret in any output, but a password where it was made or exported.
    for (const { args, r, allow } of outputs) {
      for (const s of secrets) {
        if (allow.includes(s)) continue;
        expect(r.stdout + r.stderr, args.join(' ')).not.toContain(s);
      }
    }
    for (const line of d?.logs ?? []) for (const s of secrets) expect(line).not.toContain(s);
  });

  it(
    'key set stores the key in the 0600 file (no keychain) after the API accepts it; status names its id',
    async () => {
      const r = await ctl(['key', 'set'], { input: `${key}\n` });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toContain(credentials());
      expect(statSync(credentials()).mode & 0o777).toBe(0o600);
      expect(JSON.parse(readFileSync(credentials(), 'utf8')).keys[d.api]).toBe(key);
      const st = await ctl(['key', 'status', '--json']);
      expect(st.code, st.stderr).toBe(0);
      const doc = JSON.parse(st.stdout);
      expect(doc).toMatchObject({ source: 'file', base_url: d.api, valid: true });
      expect(key).toContain(doc.key_id);
      const bad = await ctl(['key', 'set'], { input: `${key.slice(0, -4)}AAAA\n` });
      expect(bad.code).toBe(4);
      expect(JSON.parse(readFileSync(credentials(), 'utf8')).keys[d.api]).toBe(key);
      // A rejected key in the environment: what, why, then the refs, then what to do (docs/cli.md's error shape).
      const rejected = await ctl(['key', 'status'], { env: { PROXYCTL_API_KEY: `${key.slice(0, -4)}AAAA` } });
      expect(rejected.code).not.toBe(0);
      expect(rejected.stderr).toMatch(
        /^error: the API rejects this key: revoked, expired or not allowed from this address \(code 10401, request id [^)]+\); set PROXYCTL_API_KEY to a current key\n$/,
      );
      // users create reads one file (each has its own header): a second --file is refused, not read instead.
      const two = await ctl(['users', 'create', '--file', 'a.csv', '--file', 'b.csv']);
      expect(two.code).toBe(2);
      expect(two.stderr).toContain('one file only (each has its own header)');
    },
    patient(60_000),
  );

  it(
    'usage takes the key: the token alone is exit 4 saying to run proxyctl key set; a key lacking a scope is exit 4 naming it',
    async () => {
      const other = tempDir('proxyctl-users-e2e-nokey-');
      const tokenOnly = await run(PROXYCTL, ['usage'], {
        env: isolatedCliEnv(other, d.api, { PROXYCTL_API_KEY: token }),
      });
      outputs.push({ args: ['usage (token)'], r: tokenOnly, allow: [] });
      expect(tokenOnly.code).toBe(4);
      expect(tokenOnly.stderr).toContain('proxyctl key set');
      const withKey = await ctl(['usage', '--json']);
      expect(withKey.code, withKey.stderr).toBe(0);
      expect(JSON.parse(withKey.stdout)).toHaveProperty('bytes_up');
      const env = await ctl(['usage', '--json'], { env: { PROXYCTL_API_KEY: usageOnlyKey } });
      expect(env.code, env.stderr).toBe(0);
      const noScope = await ctl(['users', 'create', 'nobody1'], { env: { PROXYCTL_API_KEY: usageOnlyKey } });
      expect(noScope.code).toBe(4);
      expect(noScope.stderr).toContain('users:write');
    },
    patient(60_000),
  );

  let alicePassword = '';
  it(
    'users create prints the made password once; list, show, set, disable, enable, passwd, delete',
    async () => {
      const c = await ctl(['users', 'create', 'alice', '--json', '--traffic-limit', '1GiB', '--max-connections', '5']);
      expect(c.code, c.stderr).toBe(0);
      const made = JSON.parse(c.stdout);
      expect(made).toMatchObject({ username: 'alice', status: 'active', traffic_limit: 2 ** 30, max_connections: 5 });
      expect(made.password.length).toBeGreaterThanOrEqual(20);
      alicePassword = made.password;
      secrets.push(alicePassword);
      outputs.at(-1)!.allow.push(alicePassword);

      const taken = await ctl(['users', 'create', 'alice']);
      expect(taken.code).toBe(1);
      expect(taken.stderr).toContain('10409');

      const bobPw = 'bob-has-a-long-password';
      secrets.push(bobPw);
      expect((await ctl(['users', 'create', 'bob', '--password-stdin'], { input: `${bobPw}\n` })).code).toBe(0);

      const l = await ctl(['users', 'list', '--json']);
      expect(l.code, l.stderr).toBe(0);
      expect(JSON.parse(l.stdout).items.map((u: { username: string }) => u.username)).toEqual(['alice', 'bob']);
      const show = await ctl(['users', 'show', 'alice', '--json']);
      expect(JSON.parse(show.stdout)).toMatchObject({ username: 'alice', traffic_limit: 2 ** 30 });
      expect((await ctl(['users', 'show', 'nobody'])).code).toBe(1);

      expect((await ctl(['users', 'set', 'alice', '--traffic-limit', 'none', '--rate-limit', '10mbit'])).code).toBe(0);
      const after = JSON.parse((await ctl(['users', 'show', 'alice', '--json'])).stdout);
      expect(after).toMatchObject({ traffic_limit: null, rate_limit: '10mbit' });

      expect((await ctl(['users', 'disable', 'bob'])).code).toBe(0);
      expect(JSON.parse((await ctl(['users', 'show', 'bob', '--json'])).stdout).status).toBe('disabled');
      expect((await ctl(['users', 'enable', 'bob'])).code).toBe(0);
      expect(JSON.parse((await ctl(['users', 'show', 'bob', '--json'])).stdout).status).toBe('active');

      const pw = await ctl(['users', 'passwd', 'bob', '--json']);
      expect(pw.code, pw.stderr).toBe(0);
      const newPw = JSON.parse(pw.stdout).password as string;
      secrets.push(newPw);
      outputs.at(-1)!.allow.push(newPw);

      expect((await ctl(['users', 'delete', 'bob'])).code).toBe(2);
      expect((await ctl(['users', 'delete', 'bob', '--yes'])).code).toBe(0);
      expect((await ctl(['users', 'show', 'bob'])).code).toBe(1);
    },
    patient(120_000),
  );

  it(
    'an exported line works with curl through the gateway',
    async () => {
      await waitForProxyUsers(d, 1);
      const r = await ctl(['proxies', 'export', '--user', 'alice', '--password-stdin', '--count', '3'], {
        input: `${alicePassword}\n`,
        allow: [alicePassword],
      });
      expect(r.code, r.stderr).toBe(0);
      const lines = r.stdout.trim().split('\n');
      expect(lines).toHaveLength(3);
      for (const l of lines)
        expect(l).toMatch(
          new RegExp(`^http://alice-session-[A-Za-z0-9]{12}:[^@]+@${d.httpProxy.replace(/\./g, '\\.')}$`),
        );
      const viaLine = await curl(['-x', lines[0]!, `http://127.0.0.1:${echoPort}/`]);
      expect(viaLine.stderr).toBe('');
      expect(viaLine.stdout).toBe('hello through the gateway');
      const hostport = await ctl(['proxies', 'export', '--user', 'alice', '--rotating', '--format', 'hostport-at'], {
        input: alicePassword,
        allow: [alicePassword],
      });
      const [cred, hp] = [
        hostport.stdout.trim().slice(0, hostport.stdout.trim().lastIndexOf('@')),
        hostport.stdout.trim().slice(hostport.stdout.trim().lastIndexOf('@') + 1),
      ];
      const viaAt = await curl(['-x', `http://${hp}`, '--proxy-user', cred, `http://127.0.0.1:${echoPort}/`]);
      expect(viaAt.stdout).toBe('hello through the gateway');
      const socks = await ctl(['proxies', 'export', '--user', 'alice', '--protocol', 'socks5h'], {
        input: alicePassword,
        allow: [alicePassword],
      });
      const viaSocks = await curl(['-x', socks.stdout.trim(), `http://127.0.0.1:${echoPort}/`]);
      expect(viaSocks.stdout).toBe('hello through the gateway');
    },
    patient(60_000),
  );

  it(
    'users create --file of 250 with one batch answered 500 after proxyd did it: 250 users, no duplicates, exit 0',
    async () => {
      // A reverse proxy between proxyctl and proxyd: the second batch goes through, its answer is replaced by a 500.
      let batches = 0;
      const seenKeys: string[] = [];
      const bodyOf = new Map<string, string>();
      let bodyMismatch = false;
      const front = http.createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const isBatch = req.url?.startsWith('/openapi/v1/proxy/users/batch') === true;
          const n = isBatch ? ++batches : 0;
          if (isBatch) {
            const k = String(req.headers['idempotency-key']);
            seenKeys.push(k);
            const b = Buffer.concat(chunks).toString();
            // A key always goes with one body: a resend is exact.
            if (bodyOf.has(k) && bodyOf.get(k) !== b) bodyMismatch = true;
            bodyOf.set(k, b);
          }
          const up = http.request(`${d.api}${req.url}`, { method: req.method, headers: req.headers }, (ur) => {
            const body: Buffer[] = [];
            ur.on('data', (c: Buffer) => body.push(c));
            ur.on('end', () => {
              if (n === 2) {
                res.writeHead(500, { 'content-type': 'application/json' });
                res.end(JSON.stringify({ code: 10500, message: 'system error', requestId: 'front-1', data: null }));
                return;
              }
              res.writeHead(ur.statusCode ?? 502, ur.headers);
              res.end(Buffer.concat(body));
            });
          });
          up.end(Buffer.concat(chunks));
        });
      });
      await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
      const base = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
      try {
        const file = path.join(work, 'users.csv');
        const rows = Array.from({ length: 250 }, (_, i) => `bulk${String(i).padStart(3, '0')},,1GiB,,,,,`);
        writeFileSync(
          file,
          ['username,password,traffic_limit,max_connections,rate_limit,expires_at,allow,deny', ...rows].join('\n'),
        );
        const r = await ctl(['users', 'create', '--file', file, '--json'], { base, env: { PROXYCTL_API_KEY: key } });
        expect(r.code, r.stderr).toBe(0);
        const doc = JSON.parse(r.stdout);
        for (const c of doc.created) secrets.push(c.password);
        outputs.at(-1)!.allow.push(...doc.created.map((c: { password: string }) => c.password));
        expect(doc.failed_count).toBe(0);
        // The resend under the same Idempotency-Key got proxyd's first answer again: every password shown once.
        expect(doc).toMatchObject({ success_count: 250, already_done: 0 });
        expect(doc.created).toHaveLength(250);
        expect(new Set(doc.created.map((c: { username: string }) => c.username)).size).toBe(250);
        // Three batches, three keys; the lost one resent under its key with the same body. (A batch may be resent once
        // more the same way: a keep-alive connection the front closed while proxyctl waited is a network error.)
        expect(seenKeys[2], seenKeys.join(' ')).toBe(seenKeys[1]);
        expect(new Set(seenKeys).size, seenKeys.join(' ')).toBe(3);
        expect(bodyMismatch).toBe(false);
        const all = await ctl(['users', 'list', '--all', '--prefix', 'bulk', '--json']);
        expect(all.code, all.stderr).toBe(0);
        const names = JSON.parse(all.stdout).items.map((u: { username: string }) => u.username);
        expect(names).toHaveLength(250);
        expect(new Set(names).size).toBe(250);
      } finally {
        await new Promise((r) => front.close(r));
      }
    },
    patient(180_000),
  );

  it(
    'key forget removes it; then users is exit 4',
    async () => {
      expect((await ctl(['key', 'forget'])).code).toBe(0);
      const r = await ctl(['users', 'list']);
      expect(r.code).toBe(4);
      expect(r.stderr).toContain('proxyctl key set');
    },
    patient(30_000),
  );
});
