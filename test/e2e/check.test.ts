// `proxyctl check` against a spawned proxyd (gateway + /ip) and local echo targets, loopback only.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { performCheck } from '../../src/cli/check/runner.js';
import type { CheckOptions, LookupFn } from '../../src/cli/check/types.js';
import { makeCerts, type Certs } from '../helpers/tls.js';
import { closedPort, httpEcho, httpsEcho, silentServer, type Closable } from '../cli/check/peers.js';
import { PROXYCTL, PROXYD, admin, run, startDaemon, type Daemon } from '../helpers/daemon.js';
import { waitFor } from '../helpers/wait.js';
import { patient } from '../helpers/patience.js';

const PASS = 'e2e-Proxy-Pa55word';
let open: Daemon; // --allow-private-targets, egress 127.0.0.2
let strict: Daemon; // default policy: private targets refused
let certs: Certs;
const servers: Closable[] = [];
let https: Closable;
let http: Closable;

// Only loopback names; the system resolver is never asked.
const lookup: LookupFn = async (host) => {
  if (host === 'localhost') return [{ address: '127.0.0.1', family: 4 }];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
};

async function proxyUser(d: Daemon): Promise<void> {
  const email = 'check@example.com';
  const acct = await admin(
    d.dataDir,
    ['account', 'create', '--email', email, '--password-stdin', '--verified'],
    'console password 123\n',
  );
  if (acct.code !== 0) throw new Error(`account create: ${acct.stderr}`);
  const pu = await admin(
    d.dataDir,
    ['proxy-user', 'create', '--email', email, '--username', 'alice', '--password-stdin'],
    `${PASS}\n`,
  );
  if (pu.code !== 0) throw new Error(`proxy-user create: ${pu.stderr}`);
}

const http_ = (d: Daemon, creds = `alice:${PASS}@`) => `http://${creds}${d.httpProxy}`;
const socks_ = (d: Daemon, creds = `alice:${PASS}@`, scheme = 'socks5h') => `${scheme}://${creds}${d.socks}`;
const check = (o: Partial<CheckOptions> & Pick<CheckOptions, 'proxy' | 'target'>) =>
  performCheck({ timeoutMs: 3000, direct: true, ca: certs.caPem, ...o }, { lookup });
const names = (r: Awaited<ReturnType<typeof performCheck>>) => r.report.stages.map((s) => `${s.name}:${s.status}`);
const ALL_OK = ['dns:ok', 'tcp:ok', 'auth:ok', 'connect:ok', 'tls:ok', 'status:ok'];

beforeAll(async () => {
  certs = makeCerts();
  [open, strict] = await Promise.all([
    startDaemon({ args: ['--allow-private-targets', '--egress-address', '127.0.0.2'] }),
    startDaemon(),
  ]);
  await Promise.all([proxyUser(open), proxyUser(strict)]);
  https = await httpsEcho(certs.good);
  http = await httpEcho();
  servers.push(https, http);
}, patient(60_000));

afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
  await Promise.all([open?.stop(), strict?.stop()]);
});

describe('every stage ok', () => {
  it('HTTP proxy -> HTTPS target: egress 127.0.0.2 differs from direct 127.0.0.1', async () => {
    const r = await check({ proxy: http_(open), target: `https://localhost:${https.port}/ip` });
    expect(names(r)).toEqual(ALL_OK);
    expect(r.report.egress_ip).toBe('127.0.0.2');
    expect(r.report.direct_ip).toBe('127.0.0.1');
    expect(r.report.diagnosis).toMatch(/^All stages passed/);
  });

  it('SOCKS5 (socks5h) -> HTTPS target', async () => {
    const r = await check({ proxy: socks_(open), target: `https://localhost:${https.port}/ip` });
    expect(names(r)).toEqual(ALL_OK);
    expect(r.report.egress_ip).toBe('127.0.0.2');
  });

  it('SOCKS5 (socks5, resolved locally) -> HTTPS target', async () => {
    const r = await check({
      proxy: socks_(open, `alice:${PASS}@`, 'socks5'),
      target: `https://localhost:${https.port}/`,
      direct: false,
    });
    expect(names(r)).toEqual(ALL_OK);
  });

  it("HTTP proxy -> HTTP target (another proxyd's GET /ip as the echo)", async () => {
    const r = await check({ proxy: http_(open), target: `${strict.api}/ip` });
    expect(names(r)).toEqual(['dns:ok', 'tcp:ok', 'auth:ok', 'connect:ok', 'status:ok']);
    expect(r.report.egress_ip).toBe('127.0.0.2');
    expect(r.report.direct_ip).toBe('127.0.0.1');
  });

  it('SOCKS5 -> HTTP target', async () => {
    const r = await check({ proxy: socks_(open), target: `http://127.0.0.1:${http.port}/` });
    expect(names(r)).toEqual(['dns:ok', 'tcp:ok', 'auth:ok', 'connect:ok', 'status:ok']);
  });
});

describe('a failure at each stage stops there', () => {
  it('dns: unresolvable gateway name', async () => {
    const port = open.httpProxy.split(':')[1];
    const r = await check({
      proxy: `http://alice:${PASS}@gateway.invalid:${port}`,
      target: `https://localhost:${https.port}/`,
    });
    expect(names(r)).toEqual([
      'dns:fail',
      'tcp:skipped',
      'auth:skipped',
      'connect:skipped',
      'tls:skipped',
      'status:skipped',
    ]);
    expect(r.report.diagnosis).toMatch(/does not resolve/);
  });

  it('tcp: closed port', async () => {
    const r = await check({
      proxy: `http://alice:${PASS}@127.0.0.1:${await closedPort()}`,
      target: `https://localhost:${https.port}/`,
    });
    expect(r.failure?.stage).toBe('tcp');
    expect(r.report.diagnosis).toMatch(/^Nothing accepts connections/);
  });

  for (const proto of ['http', 'socks5h'] as const) {
    const url = (d: Daemon, creds?: string) => (proto === 'http' ? http_(d, creds) : socks_(d, creds));

    it(`${proto} auth: wrong password`, async () => {
      const r = await check({
        proxy: url(open, 'alice:not-the-password@'),
        target: `https://localhost:${https.port}/`,
      });
      expect(names(r).slice(2)).toEqual(['auth:fail', 'connect:skipped', 'tls:skipped', 'status:skipped']);
      expect(r.report.stages[2]!.detail).toMatch(proto === 'http' ? /^407 .*realm "proxy"/ : /RFC 1929 status 0x01/);
      expect(r.report.diagnosis).toMatch(/rejected the username or password/);
    });

    it(`${proto} auth: no credentials from an unlisted source IP`, async () => {
      const r = await check({ proxy: url(open, ''), target: `https://localhost:${https.port}/` });
      expect(r.failure?.stage).toBe('auth');
      expect(r.report.diagnosis).toMatch(/^Your source IP is not whitelisted/);
    });

    it(`${proto} connect: private target refused by policy`, async () => {
      const r = await check({ proxy: url(strict), target: `https://localhost:${https.port}/` });
      expect(names(r).slice(2)).toEqual(['auth:ok', 'connect:fail', 'tls:skipped', 'status:skipped']);
      expect(r.report.diagnosis).toMatch(
        proto === 'http'
          ? /refuses to reach localhost \(403/
          : /does not allow this connection to localhost \(SOCKS5 reply 0x02/,
      );
    });

    it(`${proto} connect: target refuses the connection`, async () => {
      const r = await check({ proxy: url(open), target: `https://127.0.0.1:${await closedPort()}/` });
      expect(r.failure?.stage).toBe('connect');
      expect(r.report.stages[3]!.detail).toMatch(proto === 'http' ? /502 Bad Gateway/ : /reply 0x0[45]/);
    });

    it(`${proto} tls: untrusted certificate`, async () => {
      const r = await check({ proxy: url(open), target: `https://localhost:${https.port}/`, ca: undefined });
      expect(names(r).slice(3)).toEqual(['connect:ok', 'tls:fail', 'status:skipped']);
      expect(r.report.diagnosis).toMatch(/untrusted CA/);
    });
  }

  it('tls: wrong-host certificate', async () => {
    const t = await httpsEcho(certs.wrongHost);
    servers.push(t);
    const r = await check({ proxy: http_(open), target: `https://localhost:${t.port}/` });
    expect(r.failure?.stage).toBe('tls');
    expect(r.report.stages[4]!.detail).toMatch(/certificate is for DNS:wrong\.example, not localhost/);
  });

  it('tls: self-signed certificate', async () => {
    const t = await httpsEcho(certs.selfSigned);
    servers.push(t);
    const r = await check({ proxy: socks_(open), target: `https://localhost:${t.port}/` });
    expect(r.failure?.stage).toBe('tls');
    expect(r.report.diagnosis).toMatch(/self-signed/);
  });

  it('status: target answering 500', async () => {
    const t = await httpsEcho(certs.good, 'status500');
    servers.push(t);
    const r = await check({ proxy: http_(open), target: `https://localhost:${t.port}/` });
    expect(names(r)).toEqual(['dns:ok', 'tcp:ok', 'auth:ok', 'connect:ok', 'tls:ok', 'status:fail']);
    expect(r.report.diagnosis).toMatch(/target itself answered 500/);
  });

  it('a hanging stage hits its own timeout (target never handshakes TLS)', async () => {
    const s = await silentServer();
    servers.push(s);
    const r = await check({ proxy: http_(open), target: `https://127.0.0.1:${s.port}/`, timeouts: { tls: 150 } });
    expect(r.failure).toEqual({ stage: 'tls', cause: { kind: 'timeout', ms: 150 } });
    expect(r.report.stages[4]!.ms).toBeLessThan(1000);
  });
});

describe('the proxyctl binary', () => {
  it('--json: the document of docs/support.md and exit 0', async () => {
    const r = await run(PROXYCTL, ['--json', 'check', '--proxy', http_(open), '--target', `${strict.api}/ip`]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(Object.keys(doc)).toEqual(['stages', 'egress_ip', 'direct_ip', 'diagnosis', 'request_id']);
    expect(doc.egress_ip).toBe('127.0.0.2');
    expect(doc.direct_ip).toBe('127.0.0.1');
    expect(doc.request_id).toMatch(/^[0-9a-f]{12}-[0-9a-z]{6,}$/);
  });

  it("the check shows the gateway's request id, --report carries it, and support finds the record by it", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'proxyctl-report-'));
    const report = path.join(dir, 'report.md');
    const r = await run(PROXYCTL, [
      '--no-color',
      'check',
      '--proxy',
      `http://alice:wrong-${PASS}@${open.httpProxy}`,
      '--target',
      `https://localhost:${https.port}/`,
      '--ca',
      certs.caFile,
      '--report',
      report,
    ]);
    expect(r.code).toBe(6);
    const id = /gateway request id: (\S+)/.exec(r.stdout)?.[1];
    expect(id).toMatch(/^[0-9a-f]{12}-[0-9a-z]{6,}$/);
    expect(readFileSync(report, 'utf8')).toContain(`| gateway request id | ${id} |`);
    // Support's side: the record of that very attempt, with its precise reason.
    const rec = await waitFor(
      'record',
      async () => {
        const found = await run(PROXYD, ['admin', 'connections', '--data-dir', open.dataDir, '--id', id!]);
        return found.stdout.trim() ? JSON.parse(found.stdout.trim()) : null;
      },
      5_000,
    );
    expect(rec).toMatchObject({ request_id: id, reason: 'wrong_password', username: 'alice', decision: 'refused' });
  });

  it('a failed check exits 6 and never shows the password (table and JSON)', async () => {
    const bad = 'Wr0ng-Secret-Value';
    for (const json of [false, true]) {
      const r = await run(PROXYCTL, [
        ...(json ? ['--json'] : []),
        '--no-color',
        'check',
        '--proxy',
        `http://alice:${bad}@${open.httpProxy}`,
        '--target',
        `https://localhost:${https.port}/`,
        '--ca',
        certs.caFile,
      ]);
      expect(r.code).toBe(6);
      expect(r.stdout + r.stderr).not.toContain(bad);
      expect(r.stdout).toContain(json ? '"diagnosis"' : `alice:****@${open.httpProxy}`);
    }
  });

  it('the target comes from config key check.target when --target is absent', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'proxyctl-cfg-'));
    writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ 'check.target': `${strict.api}/ip` }));
    const r = await run(PROXYCTL, ['--json', 'check', '--proxy', socks_(open), '--no-direct'], {
      env: { PROXYCTL_CONFIG_DIR: dir },
    });
    const doc = JSON.parse(r.stdout);
    expect(doc.egress_ip).toBe('127.0.0.2');
    expect(doc.direct_ip).toBeNull();
  });

  it('a usage error (bad --timeout, unsupported scheme) exits 2', async () => {
    const a = await run(PROXYCTL, ['check', '--proxy', http_(open), '--timeout', 'soon']);
    expect(a.code).toBe(2);
    const b = await run(PROXYCTL, ['check', '--proxy', `https://alice:${PASS}@${open.httpProxy}`]);
    expect(b.code).toBe(2);
    expect(b.stderr).not.toContain(PASS);
  });
});
