// End to end: the built `proxyctl` against a spawned `proxyd` on 127.0.0.1. The keychain is made
// unavailable (a session bus that does not exist), so the token goes to the 0600 fallback file.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  PROXYCTL,
  admin,
  makeAccount,
  run,
  startDaemon,
  tempDir,
  type Daemon,
  type RunResult,
  isolatedCliEnv,
} from '../helpers/daemon.js';
import { BACKENDS } from '../helpers/postgres.js';
import { patient } from '../helpers/patience.js';

let daemon: Daemon;
let token: string;
let configHome: string;
let work: string;
const outputs: Array<{ args: string[]; r: RunResult }> = [];
/** Every token handed out in this file, for the final scan. */
const tokens: string[] = [];

/** n public addresses outside mainland China (DB-IP: US), 8.8.x.y / 9.9.x.y. */
function ips(n: number, prefix = '8.8'): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}.${Math.floor(i / 250)}.${(i % 250) + 1}`);
}

function env(extra: Record<string, string> = {}): Record<string, string> {
  return isolatedCliEnv(work, daemon.api, extra);
}

async function ctl(args: string[], opts: { input?: string; env?: Record<string, string> } = {}): Promise<RunResult> {
  const r = await run(PROXYCTL, args, {
    ...(opts.input !== undefined ? { input: opts.input } : {}),
    env: env(opts.env),
    timeoutMs: 60_000,
  });
  outputs.push({ args, r });
  return r;
}

const credentials = () => path.join(configHome, 'proxyctl', 'credentials.json');

describe.each(BACKENDS)('proxyctl on %s', (backend) => {
  beforeAll(async () => {
    work = tempDir('proxyctl-e2e-');
    configHome = path.join(work, 'config');
    daemon = await startDaemon({ backend });
    ({ token } = await makeAccount(daemon.dataDir, 'cli@example.test'));
    tokens.push(token);
  }, patient(60_000));

  afterAll(async () => {
    await daemon?.stop();
  });

  describe('proxyctl against proxyd', () => {
    it('usage errors exit 2', async () => {
      expect((await ctl(['whitelist', 'list', '--page-size', '0'])).code).toBe(2);
      expect((await ctl(['whitelist', 'frobnicate'])).code).toBe(2);
      expect((await ctl(['whitelist', 'add'])).code).toBe(2);
    });

    it('no token: exit 4', async () => {
      const r = await ctl(['whitelist', 'list', '--json']);
      expect(r.code).toBe(4);
      expect(r.stdout).toBe('');
    });

    it('a well-formed token the API rejects: login exits 4 and stores nothing', async () => {
      const fake = `ak${'0'.repeat(20)}.${'A'.repeat(43)}`;
      const r = await ctl(['login', '--with-token'], { input: `${fake}\n` });
      expect(r.code).toBe(4);
      expect(existsSync(credentials())).toBe(false);
    });

    it('login via stdin stores the token in the 0600 fallback file, with a one-line warning naming it', async () => {
      const r = await ctl(['login'], { input: `${token}\n` });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toContain(credentials());
      expect(r.stdout).toContain(token.split('.')[0]);
      expect(statSync(credentials()).mode & 0o777).toBe(0o600);
      expect(readFileSync(credentials(), 'utf8')).toContain(token);
    });

    it('auth status: file, access key, accepted', async () => {
      const r = await ctl(['auth', 'status', '--json']);
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toEqual({
        source: 'file',
        access_key: token.split('.')[0],
        base_url: daemon.api,
        valid: true,
      });
      expect(r.stderr).toContain(credentials());
    });

    it('adds 250 IPs from a file (3 batches), lists them as JSON and as a table', async () => {
      const file = path.join(work, 'ips.txt');
      writeFileSync(
        file,
        `# office and branches\n${ips(250)
          .map((ip, i) => (i % 2 ? ip : `${ip}=site ${i}`))
          .join('\n')}\n\n${ips(3).join('\n')}\n`,
      );
      const add = await ctl(['whitelist', 'add', '--file', file, '--json']);
      expect(add.code, add.stderr).toBe(0);
      expect(JSON.parse(add.stdout)).toEqual({
        success_count: 250,
        already_done: 0,
        failed_count: 0,
        failed_items: [],
      });

      const all = await ctl(['whitelist', 'list', '--all', '--json']);
      expect(all.code).toBe(0);
      const doc = JSON.parse(all.stdout);
      expect(doc.total).toBe(250);
      expect(doc.items).toHaveLength(250);
      expect(doc).toMatchObject({ page: 1, page_size: 250 });
      expect(new Set(doc.items.map((i: { ip: string }) => i.ip))).toEqual(new Set(ips(250)));
      expect(doc.items.find((i: { ip: string }) => i.ip === '8.8.0.1').remark).toBe('site 0');

      const page = await ctl(['whitelist', 'list', '--page', '2', '--page-size', '10', '--status', 'active', '--json']);
      const p = JSON.parse(page.stdout);
      expect(p).toMatchObject({ page: 2, page_size: 10, total: 250 });
      expect(p.items).toHaveLength(10);

      const one = JSON.parse((await ctl(['whitelist', 'list', '--ip', '8.8.0.7', '--json'])).stdout);
      expect(one.items.map((i: { ip: string }) => i.ip)).toEqual(['8.8.0.7']);

      const tsv = await ctl(['whitelist', 'list', '--page-size', '5']);
      expect(tsv.stdout.trim().split('\n')).toHaveLength(5);
      expect(tsv.stdout.split('\n')[0]!.split('\t')).toHaveLength(5);
    });

    it('draws a cli-table3 table on a TTY', async (t) => {
      if (spawnSync('sh', ['-c', 'command -v script']).status !== 0)
        t.skip('script is not installed (apt-get install -y bsdutils)');
      // util-linux `script` gives the command a pseudo-terminal.
      const cmd = `${JSON.stringify(process.execPath)} ${JSON.stringify(PROXYCTL)} whitelist list --page-size 3`;
      const r = spawnSync('script', ['-qefc', cmd, '/dev/null'], {
        env: { ...process.env, ...env() },
        encoding: 'utf8',
        timeout: 30_000,
      });
      outputs.push({ args: ['(tty) whitelist list'], r: { code: r.status, stdout: r.stdout, stderr: r.stderr } });
      expect(r.status).toBe(0);
      expect(r.stdout).toMatch(/┌/);
      expect(r.stdout).toMatch(/IP\s*│\s*Status/);
      expect(r.stdout).toContain('page 1 of 84, 250 entries');
    });

    it('deletes the 250 IPs from a file', async () => {
      const file = path.join(work, 'del.txt');
      writeFileSync(file, `${ips(250).join('\n')}\n`);
      const del = await ctl(['whitelist', 'delete', '--file', file, '--json']);
      expect(del.code, del.stderr).toBe(0);
      expect(JSON.parse(del.stdout)).toEqual({
        success_count: 250,
        already_done: 0,
        failed_count: 0,
        failed_items: [],
      });
      expect(JSON.parse((await ctl(['whitelist', 'list', '--json'])).stdout).total).toBe(0);
    });

    it('partial failures: exit 3, failed items with codes, --failed-out ready for --file', async () => {
      const other = await makeAccount(daemon.dataDir, 'other@example.test');
      tokens.push(other.token);
      const otherAdd = await ctl(['whitelist', 'add', '9.9.9.9'], { env: { PROXYCTL_API_KEY: other.token } });
      expect(otherAdd.code, otherAdd.stderr).toBe(0);
      expect((await ctl(['whitelist', 'add', '9.9.0.1'])).code).toBe(0);

      const file = path.join(work, 'mixed.txt');
      const failedOut = path.join(work, 'failed.txt');
      writeFileSync(
        file,
        [
          '9.9.0.2=new',
          '9.9.0.1', // already ours: 10425 on a first send is a failure
          '9.9.9.9', // another account's: 10427
          '1.0.1.1', // mainland China: 10422
          '10.0.0.1', // private: 10421
          '999.1.1.1', // not IPv4: 10420
          `9.9.0.3=${'x'.repeat(256)}`, // remark too long: 10423
          '9.9.0.2', // folded duplicate
        ].join('\n'),
      );
      const r = await ctl(['whitelist', 'add', '--file', file, '--failed-out', failedOut, '--json']);
      expect(r.code, r.stderr).toBe(3);
      const doc = JSON.parse(r.stdout);
      expect(doc).toMatchObject({ success_count: 1, already_done: 0, failed_count: 6 });
      expect(Object.fromEntries(doc.failed_items.map((f: { ip: string; code: number }) => [f.ip, f.code]))).toEqual({
        '9.9.0.1': 10425,
        '9.9.9.9': 10427,
        '1.0.1.1': 10422,
        '10.0.0.1': 10421,
        '999.1.1.1': 10420,
        '9.9.0.3': 10423,
      });
      expect(readFileSync(failedOut, 'utf8').trim().split('\n').sort()).toEqual(
        ['1.0.1.1', '10.0.0.1', '9.9.0.1', '9.9.0.3', '9.9.9.9', '999.1.1.1'].sort(),
      );

      const human = await ctl(['whitelist', 'delete', '9.9.0.2', '8.8.200.200']);
      expect(human.code).toBe(3);
      expect(human.stdout).toContain('1 deleted, 0 already done, 1 failed');
      expect(human.stdout).toMatch(/8\.8\.200\.200\s*│\s*10426/);

      // The failed-out file goes straight back in with --file.
      const again = await ctl(['whitelist', 'delete', '--file', failedOut, '--json']);
      expect(again.code).toBe(3);
      expect(JSON.parse(again.stdout).success_count).toBe(1); // 9.9.0.1 was ours
    });

    it('an unverified account: add stops with exit 1, nothing processed', async () => {
      const u = await makeAccount(daemon.dataDir, 'unverified@example.test', { verified: false });
      tokens.push(u.token);
      const r = await ctl(['whitelist', 'add', '9.9.1.1', '--json'], { env: { PROXYCTL_API_KEY: u.token } });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/verified/);
    });

    it('a reset token is rejected at once: exit 4', async () => {
      const reset = await admin(daemon.dataDir, ['token', 'reset', '--email', 'cli@example.test']);
      expect(reset.code).toBe(0);
      tokens.push(reset.json.token);
      const r = await ctl(['whitelist', 'list']);
      expect(r.code).toBe(4);
      const st = await ctl(['auth', 'status', '--json']);
      expect(st.code).toBe(4);
      expect(JSON.parse(st.stdout)).toMatchObject({ source: 'file', valid: false });
    });

    it('logout removes the fallback file entry', async () => {
      const r = await ctl(['logout']);
      expect(r.code).toBe(0);
      expect(existsSync(credentials())).toBe(false);
      expect((await ctl(['auth', 'status'])).code).toBe(4);
    });

    it('no output of any run contains a token or a secret', () => {
      const secrets = tokens.flatMap((t) => [t, t.split('.')[1]!]);
      expect(outputs.length).toBeGreaterThan(20);
      for (const { args, r } of outputs) {
        for (const s of secrets) {
          expect(r.stdout.includes(s), `stdout of ${args.join(' ')}`).toBe(false);
          expect(r.stderr.includes(s), `stderr of ${args.join(' ')}`).toBe(false);
        }
      }
      for (const line of daemon.logs) for (const s of secrets) expect(line.includes(s)).toBe(false);
    });
  });
});
