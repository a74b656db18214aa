// proxyd serve + proxyd admin as real processes over HTTP, on each store backend.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  admin,
  databaseArgs,
  dataDirFor,
  inspectData,
  makeAccount,
  PROXYD,
  ROOT,
  run,
  startDaemon,
  type Daemon,
} from '../helpers/daemon.js';
import { BACKENDS } from '../helpers/postgres.js';
import { sleep } from '../helpers/wait.js';
import { api as apiAt, pub } from '../ops/helpers.js';

/** A whitelist API call on a daemon (test/ops/helpers.ts's `api`). */
const api = (d: Daemon, p: string, token: string, body?: unknown) => apiAt(d.api, p, token, body);

describe.each(BACKENDS)('on %s', (backend) => {
  describe('proxyd serve', () => {
    let d: Daemon;
    const secrets: string[] = [];
    beforeAll(async () => {
      d = await startDaemon({ backend });
    });
    afterAll(async () => {
      await d?.stop();
    });

    it('prints one JSON ready line with every listener', () => {
      expect(d.api).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(d.httpProxy).toMatch(/^127\.0\.0\.1:\d+$/);
      expect(d.socks).toMatch(/^127\.0\.0\.1:\d+$/);
    });

    it.runIf(backend === 'sqlite')('refuses a second daemon on the same data dir with a clear message', async () => {
      const r = await run(PROXYD, [
        'serve',
        '--data-dir',
        d.dataDir,
        '--api-listen',
        '127.0.0.1:0',
        '--http-proxy-listen',
        '127.0.0.1:0',
        '--socks-listen',
        '127.0.0.1:0',
      ]);
      expect(r.code).not.toBe(0);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/another proxyd \(pid \d+\) is serving this data dir/);
    });

    it('serves health, the IP echo and the whitelist API', async () => {
      expect(await (await fetch(`${d.api}/healthz`)).json()).toEqual({ status: 'ok' });
      expect(await (await fetch(`${d.api}/ip`)).json()).toEqual({ ip: '127.0.0.1' });
      const { token } = await makeAccount(d.dataDir, 'serve@example.com');
      secrets.push(token);
      const added = await api(d, '/openapi/v1/proxy/whitelist/add', token, {
        items: [{ ip: '8.8.8.8', remark: 'office' }],
      });
      expect(added.json.code).toBe(200);
      expect(added.headers.get('x-request-id')).toBe(added.json.requestId);
      const listed = await api(d, '/openapi/v1/proxy/whitelist/list', token);
      expect(listed.json.data.items[0]).toMatchObject({ ip: '8.8.8.8', remark: 'office', status: 1 });
    });

    it('sees admin changes at once: token reset, disable, suspension, entry status, verification', async () => {
      const { token } = await makeAccount(d.dataDir, 'admin@example.com');
      secrets.push(token);
      expect((await api(d, '/openapi/v1/proxy/whitelist/list', token)).status).toBe(200);
      const reset = await admin(d.dataDir, ['token', 'reset', '--email', 'admin@example.com']);
      secrets.push(reset.json.token);
      expect((await api(d, '/openapi/v1/proxy/whitelist/list', token)).status).toBe(401);
      expect((await api(d, '/openapi/v1/proxy/whitelist/list', reset.json.token)).status).toBe(200);

      await api(d, '/openapi/v1/proxy/whitelist/add', reset.json.token, { items: [{ ip: '9.9.9.9' }] });
      const entry = await admin(d.dataDir, [
        'whitelist',
        'set-status',
        '--email',
        'admin@example.com',
        '--ip',
        '9.9.9.9',
        '--status',
        'disabled',
      ]);
      expect(entry.json).toMatchObject({ ip: '9.9.9.9', status: 2 });
      const disabled = await api(d, '/openapi/v1/proxy/whitelist/list?status=disabled', reset.json.token);
      expect(disabled.json.data.total).toBe(1);

      const unverified = await admin(d.dataDir, [
        'account',
        'set',
        '--email',
        'admin@example.com',
        '--verified',
        'false',
      ]);
      expect(unverified.json).toMatchObject({ email: 'admin@example.com', verified: false, status: 'active' });
      expect(
        (await api(d, '/openapi/v1/proxy/whitelist/add', reset.json.token, { items: [{ ip: '9.9.9.8' }] })).json.code,
      ).toBe(10403);

      const suspended = await admin(d.dataDir, [
        'account',
        'set',
        '--email',
        'admin@example.com',
        '--status',
        'suspended',
      ]);
      expect(suspended.json.status).toBe('suspended');
      expect((await api(d, '/openapi/v1/proxy/whitelist/list', reset.json.token)).status).toBe(401);
      await admin(d.dataDir, ['account', 'set', '--email', 'admin@example.com', '--status', 'active']);
      const dis = await admin(d.dataDir, ['token', 'disable', '--email', 'admin@example.com']);
      expect(dis.json).toEqual({ access_key: reset.json.token.split('.')[0], status: 'disabled' });
      expect((await api(d, '/openapi/v1/proxy/whitelist/list', reset.json.token)).status).toBe(401);
    });

    it('admin commands fail clearly, on stderr, non-zero', async () => {
      const cases: Array<[string[], RegExp, string?]> = [
        [['account', 'create', '--email', 'not-an-email', '--password-stdin'], /not an email address/, 'longenough\n'],
        [['account', 'create', '--email', 'x@example.com', '--password-stdin'], /at least 10 characters/, 'short\n'],
        [['account', 'set', '--email', 'nobody@example.com', '--status', 'closed'], /no account/],
        [['token', 'reset', '--email', 'nobody@example.com'], /no account/],
        [
          ['whitelist', 'set-status', '--email', 'serve@example.com', '--ip', '1.2.3.4', '--status', 'active'],
          /no whitelist entry/,
        ],
        [['account', 'set', '--email', 'serve@example.com', '--status', 'bogus'], /Allowed choices|invalid/i],
      ];
      for (const [args, re, input] of cases) {
        const r = await admin(d.dataDir, args, input);
        expect(r.code, args.join(' ')).not.toBe(0);
        expect(r.stdout).toBe('');
        expect(r.stderr).toMatch(re);
      }
      const dup = await admin(
        d.dataDir,
        ['account', 'create', '--email', 'serve@example.com', '--password-stdin'],
        'longenough\n',
      );
      expect(dup.stderr).toMatch(/already exists/);
    });

    it('creates proxy users with a generated password shown once', async () => {
      const r = await admin(d.dataDir, ['proxy-user', 'create', '--email', 'serve@example.com', '--username', 'alice']);
      expect(r.code).toBe(0);
      expect(r.json.username).toBe('alice');
      expect(r.json.password).toMatch(/^[A-Za-z0-9_-]{24}$/);
      secrets.push(r.json.password);
      const given = await admin(
        d.dataDir,
        ['proxy-user', 'create', '--email', 'serve@example.com', '--username', 'bob', '--password-stdin'],
        'a-chosen-password\n',
      );
      expect(given.json).toEqual({ username: 'bob', password: 'a-chosen-password' });
    });

    it('never writes a token, secret or api_key value to its logs', async () => {
      const { token } = await makeAccount(d.dataDir, 'logs@example.com');
      secrets.push(token);
      // Paths that historically leak URLs: 404s, 405s, bad bodies, 401s with the key in the query.
      await fetch(`${d.api}/nope?api_key=${token}`);
      await fetch(`${d.api}/openapi/v1/proxy/whitelist/add?api_key=${token}`);
      await fetch(`${d.api}/openapi/v1/proxy/whitelist/add?api_key=${token}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{bad',
      });
      await fetch(`${d.api}/openapi/v1/proxy/whitelist/list?api_key=${token}x`);
      await fetch(`${d.api}/openapi/v1/proxy/whitelist/list?api_key=${token}&page=zzz`);
      await sleep(200);
      const logs = d.logs.join('\n');
      expect(logs).toContain('"route":"/openapi/v1/proxy/whitelist/list"');
      for (const s of secrets) {
        const [ak, secret] = s.split('.');
        expect(logs).not.toContain(s);
        if (secret) expect(logs).not.toContain(secret);
        expect(logs).not.toContain(ak === s ? s : `api_key=${ak}`);
      }
      expect(logs).not.toContain('api_key=');
      for (const line of d.logs) expect(() => JSON.parse(line), line).not.toThrow();
    });

    it('exits 0 on SIGTERM, leaving a sound database and no lock', async () => {
      const code = await d.stop('SIGTERM');
      expect(code).toBe(0);
      const db = await inspectData(d.dataDir);
      expect(await db.integrity()).toBe('ok');
      await db.close();
      expect(() => readFileSync(path.join(d.dataDir, 'proxyd.lock'))).toThrow();
      // On PostgreSQL nothing is written to the data dir: no SQLite file, no lock, no console key.
      if (backend === 'postgres') expect(readdirSync(d.dataDir)).toEqual([]);
    });
  });

  describe('global IP claims across processes', () => {
    it('gives exactly one winner each time two processes race 200 times for the same IP', async () => {
      const dir = await dataDirFor(backend);
      const a = await makeAccount(dir, 'race-a@example.com');
      const b = await makeAccount(dir, 'race-b@example.com');
      expect(a.accountId).not.toBe(b.accountId);
      // Each racer claims the same 200 IPs in the same order, through the store's own transaction.
      const script = path.join(dir, 'racer.mjs');
      writeFileSync(
        script,
        `import { openStore } from ${JSON.stringify(path.join(ROOT, 'dist/daemon/store/index.js'))};
         const [dir, account, go, databaseUrl] = process.argv.slice(2);
         const s = await openStore({ dataDir: dir, databaseUrl });
         while (Date.now() < Number(go)) {}
         let won = 0;
         for (let i = 0; i < 200; i++) {
           let r;
           do r = await s.whitelist.claimIp(Number(account), '8.8.' + (i >> 8) + '.' + (i & 255), ''); while (r === 'busy');
           if (r === 'added') won++;
         }
         await s.close();
         process.stdout.write(String(won));`,
      );
      const go = Date.now() + 1500;
      const racer = (account: number) =>
        new Promise<number>((resolve, reject) => {
          const p = spawn(process.execPath, [script, dir, String(account), String(go), ...databaseArgs(dir).slice(1)]);
          let out = '';
          p.stdout.on('data', (c) => (out += c));
          p.on('exit', (code) => (code === 0 ? resolve(Number(out)) : reject(new Error(`racer exited ${code}`))));
        });
      const [wa, wb] = await Promise.all([racer(a.accountId), racer(b.accountId)]);
      expect(wa + wb).toBe(200);
      const db = await inspectData(dir);
      const perIp = await db.all<{ n: number }>(
        'SELECT ip, COUNT(*) AS n FROM whitelist_entries WHERE deleted_at IS NULL GROUP BY ip',
      );
      expect(perIp).toHaveLength(200);
      expect(perIp.every((r) => r.n === 1)).toBe(true);
      const claims = await db.get<{ n: number }>(
        'SELECT COUNT(*) AS n FROM ip_claims c JOIN whitelist_entries e ON e.ip = c.ip AND e.account_id = c.account_id AND e.deleted_at IS NULL',
      );
      expect(claims.n).toBe(200);
      await db.close();
    });

    it('gives exactly one winner per IP when two accounts race through the API', async () => {
      const d = await startDaemon({ backend, args: ['--rate-limits', 'add=1000'] });
      try {
        const a = await makeAccount(d.dataDir, 'api-a@example.com');
        const b = await makeAccount(d.dataDir, 'api-b@example.com');
        let wins = 0;
        for (let i = 0; i < 200; i++) {
          const [ra, rb] = await Promise.all([
            api(d, '/openapi/v1/proxy/whitelist/add', a.token, { items: [{ ip: pub(i) }] }),
            api(d, '/openapi/v1/proxy/whitelist/add', b.token, { items: [{ ip: pub(i) }] }),
          ]);
          const won = [ra, rb].filter((r) => r.json.code === 200).length;
          const lost = [ra, rb].filter((r) => r.json.data?.failed_items?.[0]?.code === 10427).length;
          expect(won).toBe(1);
          expect(lost).toBe(1);
          wins += won;
        }
        expect(wins).toBe(200);
      } finally {
        await d.stop();
      }
    });
  });
});

describe('a data dir whose database SQLite cannot read', () => {
  it('serve and admin say which file, exit non-zero, and never print a stack', async () => {
    const dir = await dataDirFor('sqlite');
    writeFileSync(path.join(dir, 'proxyd.db'), 'not a database, just text\n'.repeat(100));
    const serve = await run(PROXYD, [
      'serve',
      '--data-dir',
      dir,
      '--api-listen',
      '127.0.0.1:0',
      '--http-proxy-listen',
      '127.0.0.1:0',
      '--socks-listen',
      '127.0.0.1:0',
      '--hop-listen',
      '127.0.0.1:0',
    ]);
    const adm = await admin(dir, ['account', 'create', '--email', 'x@example.com', '--password-stdin'], 'longenough\n');
    for (const r of [serve, adm]) {
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(`${path.join(dir, 'proxyd.db')}: file is not a database`);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    }
  });
});

describe('a listen address that cannot be had', () => {
  it('says which address and why, exit non-zero, no stack', async () => {
    const dir = await dataDirFor('sqlite');
    // 192.0.2.1 is TEST-NET-1 (RFC 5737): on no interface of a test machine; binding sends nothing.
    const r = await run(PROXYD, [
      'serve',
      '--data-dir',
      dir,
      '--api-listen',
      '192.0.2.1:0',
      '--http-proxy-listen',
      '127.0.0.1:0',
      '--socks-listen',
      '127.0.0.1:0',
      '--hop-listen',
      '127.0.0.1:0',
    ]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/proxyd: address not on this machine: 192\.0\.2\.1\b/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('proxyd admin: --data-dir against PROXYD_DATA_DIR', () => {
  it('the flag wins wherever it stands (after the command, or right after `admin`)', async () => {
    const fromEnv = await dataDirFor('sqlite');
    const fromFlag = await dataDirFor('sqlite');
    for (const args of [
      ['admin', 'account', 'create', '--data-dir', fromFlag, '--email', 'flag1@example.com', '--password-stdin'],
      ['admin', '--data-dir', fromFlag, 'account', 'create', '--email', 'flag2@example.com', '--password-stdin'],
    ]) {
      const r = await run(PROXYD, args, { input: 'longenough1\n', env: { PROXYD_DATA_DIR: fromEnv } });
      expect(r.code, r.stderr).toBe(0);
    }
    expect(readdirSync(fromEnv)).not.toContain('proxyd.db');
    const shown = await run(PROXYD, ['admin', 'plan', 'show', '--email', 'flag1@example.com', '--data-dir', fromFlag], {
      env: { PROXYD_DATA_DIR: fromEnv },
    });
    expect(shown.code, shown.stderr).toBe(0);
  });
});
