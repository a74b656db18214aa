// Issue 11 from outside: the built proxyctl against a spawned proxyd — the invalid-token lock-out,
// --base-url at the proxy port, `check` pointed at the API port, and the gateway's Via marks.
import { createServer, request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  PROXYCTL,
  admin,
  isolatedCliEnv,
  makeAccount,
  run,
  startDaemon,
  tempDir,
  type Daemon,
} from '../helpers/daemon.js';
import { patient } from '../helpers/patience.js';

const PASS = 'e2e-Proxy-Pa55word';
let daemon: Daemon;
let token: string;
let work: string;

const ctl = (args: string[], extra: Record<string, string> = {}, baseUrl = daemon.api) =>
  run(PROXYCTL, args, { env: isolatedCliEnv(work, baseUrl, { PROXYCTL_API_KEY: token, ...extra }) });

beforeAll(async () => {
  work = tempDir('proxyctl-msg-');
  // A low invalid-token limit keeps the lock-out test short; --allow-private-targets lets the check reach the API's /ip.
  daemon = await startDaemon({ args: ['--rate-limits', 'invalid=3', '--allow-private-targets'] });
  ({ token } = await makeAccount(daemon.dataDir, 'msg@example.test'));
  const pu = await admin(
    daemon.dataDir,
    ['proxy-user', 'create', '--email', 'msg@example.test', '--username', 'alice', '--password-stdin'],
    `${PASS}\n`,
  );
  if (pu.code !== 0) throw new Error(pu.stderr);
}, patient(60_000));

afterAll(async () => {
  await daemon?.stop();
});

describe('proxyctl messages against proxyd', () => {
  it('--base-url at the proxy port: "looks like the proxy port, not the API" (exit 1)', async () => {
    const r = await ctl(['whitelist', 'list'], {}, `http://${daemon.httpProxy}`);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^error: HTTP 407 .*looks like the proxy port, not the API/m);
  });

  it('check pointed at the API port says it is not a proxy (no Via), not "auth ok / the target answered 404"', async () => {
    // A documentation address as the target: the API port never connects anywhere, it answers itself.
    const r = await ctl([
      '--json',
      'check',
      '--proxy',
      `http://alice:${PASS}@${daemon.api.replace('http://', '')}`,
      '--target',
      'http://192.0.2.1/no-such-page',
      '--no-direct',
    ]);
    expect(r.code).toBe(6);
    const doc = JSON.parse(r.stdout);
    expect(doc.stages.find((s: { name: string }) => s.name === 'auth').status).toBe('fail');
    expect(doc.diagnosis).toMatch(/is not a proxy: it answered 404 without the Via header/);
    expect(doc.diagnosis).not.toMatch(/target itself answered/);
    expect(r.stdout + r.stderr).not.toContain(PASS);
    // The API's own /ip answers 200: no failure, but a warning that it did not come through a proxy.
    const ip = await ctl([
      '--json',
      'check',
      '--proxy',
      `http://alice:${PASS}@${daemon.api.replace('http://', '')}`,
      '--target',
      `${daemon.api}/ip`,
      '--no-direct',
    ]);
    expect(JSON.parse(ip.stdout).diagnosis).toMatch(
      /^Warning: the answer carries no Via header, so it may not have come through a proxy/,
    );
    // On a terminal the label says it: "warning: the answer …", not "warning: Warning: the answer …".
    const human = await ctl([
      'check',
      '--proxy',
      `http://alice:${PASS}@${daemon.api.replace('http://', '')}`,
      '--target',
      `${daemon.api}/ip`,
      '--no-direct',
    ]);
    expect(human.stdout).toMatch(/^warning: the answer carries no Via header/m);
    expect(human.stdout + human.stderr).not.toMatch(/Warning:/);
  });

  it('the gateway marks forwarded requests and responses with Via; check reports it', async () => {
    // An origin that echoes the caller's IP and the headers it received.
    const echo = createServer((req, res) =>
      res.end(JSON.stringify({ ip: req.socket.remoteAddress, headers: req.headers })),
    );
    await new Promise<void>((ok) => echo.listen(0, '127.0.0.1', ok));
    const port = (echo.address() as { port: number }).port;
    const r = await ctl([
      '--json',
      'check',
      '--proxy',
      `http://alice:${PASS}@${daemon.httpProxy}`,
      '--target',
      `http://127.0.0.1:${port}/`,
      '--no-direct',
    ]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(doc.stages.find((s: { name: string }) => s.name === 'auth').detail).toMatch(/Via 1\.1 proxyd/);
    expect(doc.diagnosis).toMatch(/^All stages passed/);
    const [host, proxyPort] = daemon.httpProxy.split(':') as [string, string];
    const seen = await new Promise<{ headers: Record<string, string>; via: string | undefined }>((resolve, reject) => {
      const req = request(
        {
          host,
          port: Number(proxyPort),
          path: `http://127.0.0.1:${port}/`,
          headers: { 'Proxy-Authorization': `Basic ${Buffer.from(`alice:${PASS}`).toString('base64')}` },
        },
        (res) => {
          let body = '';
          res.on('data', (d) => (body += d));
          res.on('end', () =>
            resolve({
              headers: (JSON.parse(body) as { headers: Record<string, string> }).headers,
              via: res.headers.via,
            }),
          );
        },
      );
      req.on('error', reject);
      req.end();
    });
    echo.close();
    expect(seen.headers.via).toBe('1.1 proxyd');
    expect(seen.via).toBe('1.1 proxyd');
  });

  it('after the invalid-token limit, even the right token gets 429 naming the lock-out, the source IP and when it ends (exit 5)', async () => {
    const fake = `ak${'0'.repeat(20)}.${'A'.repeat(43)}`;
    for (let i = 0; i < 3; i++) expect((await ctl(['whitelist', 'list'], { PROXYCTL_API_KEY: fake })).code).toBe(4);
    const r = await ctl(['whitelist', 'list']);
    expect(r.code).toBe(5);
    expect(r.stderr).toMatch(
      /^error: rate limited: invalid-token lock-out for source IP 127\.0\.0\.1 after 3 invalid API keys; every request from this IP is refused until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ, in \d+ s \(code 10429, request id [^)]+\); retry in \d+ s$/m,
    );
    expect(r.stderr).not.toContain(token.split('.')[1]!);
  });
});
