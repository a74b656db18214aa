// The staged check against scripted local peers (real sockets on 127.0.0.1, no mocks of our code).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { performCheck } from '../../../src/cli/check/runner.js';
import { runCheck } from '../../../src/cli/commands/check.js';
import type { CheckOptions as RunOptions } from '../../../src/cli/check/types.js';
import { harness } from '../helpers/fakes.js';
import type { CheckOptions, LookupFn } from '../../../src/cli/check/types.js';
import { makeCerts, type Certs } from '../../helpers/tls.js';
import { closedPort, httpEcho, httpProxyPeer, httpsEcho, silentServer, socksPeer, type Closable } from './peers.js';
import { patient } from '../../helpers/patience.js';

const PASS = 's3cret-Pa55';
let certs: Certs;
const open: Closable[] = [];
const keep = <T extends Closable>(c: T): T => (open.push(c), c);

// Names resolve only through this table: no system resolver in these tests.
const lookup: LookupFn = async (host) => {
  const table: Record<string, string> = { 'proxy.test': '127.0.0.1', localhost: '127.0.0.1' };
  const a = table[host];
  if (!a) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  return [{ address: a, family: 4 }];
};

function opts(o: Partial<CheckOptions> & Pick<CheckOptions, 'proxy' | 'target'>): CheckOptions {
  return { timeoutMs: 2000, direct: true, ca: certs.caPem, ...o };
}
const names = (r: Awaited<ReturnType<typeof performCheck>>) => r.report.stages.map((s) => `${s.name}:${s.status}`);

let https: Closable; // good cert, JSON echo
let http: Closable; // plain JSON echo

beforeAll(async () => {
  certs = makeCerts();
  https = keep(await httpsEcho(certs.good));
  http = keep(await httpEcho());
});
afterAll(async () => {
  await Promise.all(open.map((c) => c.close()));
});

describe('HTTP proxy', () => {
  it('HTTPS target: every stage ok, egress differs from direct', async () => {
    const proxy = keep(await httpProxyPeer({ kind: 'tunnel', user: 'alice', pass: PASS, egress: '127.0.0.2' }));
    const r = await performCheck(
      opts({ proxy: `http://alice:${PASS}@proxy.test:${proxy.port}`, target: `https://127.0.0.1:${https.port}/ip` }),
      { lookup },
    );
    expect(names(r)).toEqual(['dns:ok', 'tcp:ok', 'auth:ok', 'connect:ok', 'tls:ok', 'status:ok']);
    expect(r.report.egress_ip).toBe('127.0.0.2');
    expect(r.report.direct_ip).toBe('127.0.0.1');
    expect(r.report.diagnosis).toMatch(
      /^All stages passed: traffic leaves the proxy as 127\.0\.0\.2 \(direct: 127\.0\.0\.1\)/,
    );
    expect(r.report.stages[0]!.detail).toBe('proxy.test -> 127.0.0.1');
    // The target as the result shows it: a password standing in it is masked (here: none).
    expect(r.target).toBe(`https://127.0.0.1:${https.port}/ip`);
    const named = await performCheck(
      opts({
        proxy: `http://alice:${PASS}@proxy.test:${proxy.port}`,
        target: `http://127.0.0.1:${http.port}/${PASS}?q=${PASS}`,
        direct: false,
      }),
      { lookup },
    );
    expect(named.target).toBe(`http://127.0.0.1:${http.port}/****?q=****`);
    expect(r.report.stages[4]!.detail).toMatch(
      /TLSv1\.[23], no SNI \(IP target\), certificate CN=good by CN=proxyctl test CA/,
    );
    expect(proxy.heads[0]).toMatch(/^CONNECT 127\.0\.0\.1:\d+ HTTP\/1\.1/);
    for (const s of r.report.stages) expect(s.ms).toBeGreaterThanOrEqual(0);
    expect(JSON.stringify(r)).not.toContain(PASS);
  });

  it('HTTPS target by name: SNI sent, host name verified', async () => {
    const proxy = keep(await httpProxyPeer({ kind: 'tunnel', user: 'alice', pass: PASS }));
    const r = await performCheck(
      opts({
        proxy: `http://alice:${PASS}@127.0.0.1:${proxy.port}`,
        target: `https://localhost:${https.port}/`,
        direct: false,
      }),
      { lookup },
    );
    expect(names(r)).toEqual(['dns:ok', 'tcp:ok', 'auth:ok', 'connect:ok', 'tls:ok', 'status:ok']);
    expect(r.report.stages[4]!.detail).toContain('SNI localhost');
    expect(r.report.direct_ip).toBeNull();
    expect(r.report.diagnosis).toContain('direct comparison skipped');
  });

  it('HTTP target: absolute-form request, no tls stage, connect folded', async () => {
    const proxy = keep(await httpProxyPeer({ kind: 'tunnel', user: 'alice', pass: PASS, egress: '127.0.0.2' }));
    const r = await performCheck(
      opts({ proxy: `http://alice:${PASS}@127.0.0.1:${proxy.port}`, target: `http://127.0.0.1:${http.port}/ip` }),
      { lookup },
    );
    expect(names(r)).toEqual(['dns:ok', 'tcp:ok', 'auth:ok', 'connect:ok', 'status:ok']);
    expect(proxy.heads[0]).toMatch(new RegExp(`^GET http://127\\.0\\.0\\.1:${http.port}/ip HTTP/1\\.1`));
    expect(r.report.stages[3]!.detail).toMatch(/absolute-form/);
    expect(r.report.egress_ip).toBe('127.0.0.2');
  });

  it('same egress as direct: a warning, still a pass', async () => {
    const proxy = keep(await httpProxyPeer({ kind: 'tunnel', allowNoCreds: true }));
    const r = await performCheck(
      opts({ proxy: `http://127.0.0.1:${proxy.port}`, target: `https://127.0.0.1:${https.port}/` }),
      { lookup },
    );
    expect(r.ok).toBe(true);
    expect(r.report.egress_ip).toBe('127.0.0.1');
    expect(r.report.diagnosis).toMatch(/^Warning: .*may not be going through the proxy/);
    expect(r.report.stages[2]!.detail).toMatch(/without credentials/);
  });

  it('plain-text echo body is parsed', async () => {
    const text = keep(await httpEcho('text'));
    const proxy = keep(await httpProxyPeer({ kind: 'tunnel', allowNoCreds: true, egress: '127.0.0.2' }));
    const r = await performCheck(
      opts({ proxy: `http://127.0.0.1:${proxy.port}`, target: `http://127.0.0.1:${text.port}/` }),
      { lookup },
    );
    expect(r.report.egress_ip).toBe('127.0.0.2');
  });

  it('dns: unresolvable proxy host fails there, the rest skipped', async () => {
    const r = await performCheck(
      opts({ proxy: `http://alice:${PASS}@gateway.invalid:3128`, target: `https://127.0.0.1:${https.port}/` }),
      { lookup },
    );
    expect(names(r)).toEqual([
      'dns:fail',
      'tcp:skipped',
      'auth:skipped',
      'connect:skipped',
      'tls:skipped',
      'status:skipped',
    ]);
    expect(r.report.stages[0]!.detail).toContain('ENOTFOUND');
    expect(r.report.diagnosis).toMatch(/gateway\.invalid does not resolve/);
    expect(r.report.egress_ip).toBeNull();
  });

  it('tcp: closed port', async () => {
    const port = await closedPort();
    const r = await performCheck(
      opts({ proxy: `http://127.0.0.1:${port}`, target: `https://127.0.0.1:${https.port}/` }),
      { lookup },
    );
    expect(names(r).slice(0, 3)).toEqual(['dns:ok', 'tcp:fail', 'auth:skipped']);
    expect(r.report.stages[1]!.detail).toContain('connection refused');
    expect(r.report.diagnosis).toMatch(/^Nothing accepts connections on 127\.0\.0\.1:\d+/);
  });

  it('auth: wrong password gives 407 with the realm; the password never shows', async () => {
    const proxy = keep(await httpProxyPeer({ kind: 'tunnel', user: 'alice', pass: 'other', realm: 'proxy' }));
    const r = await performCheck(
      opts({ proxy: `http://alice:${PASS}@127.0.0.1:${proxy.port}`, target: `https://127.0.0.1:${https.port}/` }),
      { lookup },
    );
    expect(names(r).slice(2, 4)).toEqual(['auth:fail', 'connect:skipped']);
    expect(r.report.stages[2]!.detail).toBe('407 Proxy Authentication Required (realm "proxy"): credentials rejected');
    expect(r.report.diagnosis).toMatch(/rejected the username or password/);
    expect(JSON.stringify(r)).not.toContain(PASS);
    expect(r.proxy).toBe(`http://alice:****@127.0.0.1:${proxy.port}`);
  });

  it('auth: no credentials and 407 means the source IP is not whitelisted', async () => {
    const proxy = keep(await httpProxyPeer({ kind: 'tunnel', user: 'alice', pass: PASS }));
    const r = await performCheck(
      opts({ proxy: `http://127.0.0.1:${proxy.port}`, target: `https://127.0.0.1:${https.port}/` }),
      { lookup },
    );
    expect(r.failure?.stage).toBe('auth');
    expect(r.report.diagnosis).toMatch(/^Your source IP is not whitelisted/);
    expect(r.report.diagnosis).toContain('proxyctl whitelist add --current');
  });

  it('auth: 407 to an absolute-form request (http:// target)', async () => {
    const proxy = keep(await httpProxyPeer({ kind: 'tunnel', user: 'alice', pass: 'other' }));
    const r = await performCheck(
      opts({ proxy: `http://alice:${PASS}@127.0.0.1:${proxy.port}`, target: `http://127.0.0.1:${http.port}/` }),
      { lookup },
    );
    expect(names(r)).toEqual(['dns:ok', 'tcp:ok', 'auth:fail', 'connect:skipped', 'status:skipped']);
  });

  it('connect: 403 from the proxy, with its reason', async () => {
    const proxy = keep(
      await httpProxyPeer({
        kind: 'answer',
        status: 403,
        reason: 'Forbidden',
        body: 'target not allowed: private address',
      }),
    );
    const r = await performCheck(
      opts({ proxy: `http://127.0.0.1:${proxy.port}`, target: `https://127.0.0.1:${https.port}/` }),
      { lookup },
    );
    expect(names(r).slice(2)).toEqual(['auth:ok', 'connect:fail', 'tls:skipped', 'status:skipped']);
    expect(r.report.stages[3]!.detail).toMatch(/answered 403 Forbidden: target not allowed: private address/);
    expect(r.report.diagnosis).toMatch(/refuses to reach 127\.0\.0\.1 \(403: "target not allowed: private address"\)/);
  });

  it('connect: refused target gives 502', async () => {
    const port = await closedPort();
    const proxy = keep(await httpProxyPeer({ kind: 'tunnel', allowNoCreds: true }));
    const r = await performCheck(
      opts({ proxy: `http://127.0.0.1:${proxy.port}`, target: `https://127.0.0.1:${port}/` }),
      { lookup },
    );
    expect(r.failure?.stage).toBe('connect');
    expect(r.report.diagnosis).toMatch(/could not reach 127\.0\.0\.1:\d+ \(502\)/);
  });

  it('connect: http:// target refused by the gateway (403) fails at connect', async () => {
    const proxy = keep(await httpProxyPeer({ kind: 'answer', status: 403, reason: 'Forbidden' }));
    const r = await performCheck(
      opts({ proxy: `http://127.0.0.1:${proxy.port}`, target: `http://127.0.0.1:${http.port}/` }),
      { lookup },
    );
    expect(names(r)).toEqual(['dns:ok', 'tcp:ok', 'auth:ok', 'connect:fail', 'status:skipped']);
  });

  it('auth: a web server answering CONNECT with 405 and no Via is not a proxy (issue 11)', async () => {
    const server = keep(
      await httpProxyPeer({ kind: 'answer', status: 405, reason: 'Method Not Allowed', body: '{"code":10405}' }),
    );
    const r = await performCheck(
      opts({ proxy: `http://127.0.0.1:${server.port}`, target: `https://127.0.0.1:${https.port}/` }),
      { lookup },
    );
    expect(names(r).slice(2)).toEqual(['auth:fail', 'connect:skipped', 'tls:skipped', 'status:skipped']);
    expect(r.failure?.cause).toEqual({ kind: 'not_a_proxy', status: 405 });
    expect(r.report.diagnosis).toMatch(/is not a proxy: it answered 405 without the Via header/);
    // The same status with a Via came through a proxy: judged at connect as before.
    const proxy = keep(
      await httpProxyPeer({ kind: 'answer', status: 405, reason: 'Method Not Allowed', headers: { Via: '1.1 squid' } }),
    );
    const v = await performCheck(
      opts({ proxy: `http://127.0.0.1:${proxy.port}`, target: `https://127.0.0.1:${https.port}/` }),
      { lookup },
    );
    expect(v.failure?.stage).toBe('connect');
  });

  it("real proxies' own answers (review against tinyproxy and squid): not 'not a proxy', the cause they name", async () => {
    const https_ = `https://127.0.0.1:${https.port}/`;
    const http_ = `http://127.0.0.1:${http.port}/`;
    // tinyproxy's 500 "Unable to connect" carries only its Server name: a proxy, failing at connect.
    const tiny500 = keep(
      await httpProxyPeer({
        kind: 'answer',
        status: 500,
        reason: 'Unable to connect',
        headers: { Server: 'tinyproxy/1.11.1' },
        body: '<html><body>Unable to connect</body></html>',
      }),
    );
    for (const target of [https_, http_]) {
      const r = await performCheck(opts({ proxy: `http://127.0.0.1:${tiny500.port}`, target }), { lookup });
      expect(r.failure?.cause.kind, target).not.toBe('not_a_proxy');
      expect(r.report.diagnosis, target).not.toMatch(/is not a proxy/);
    }
    // tinyproxy refuses credentials with 401 and WWW-Authenticate: the credentials, not "not a proxy".
    const tiny401 = keep(
      await httpProxyPeer({
        kind: 'answer',
        status: 401,
        reason: 'Unauthorized',
        headers: { Server: 'tinyproxy/1.11.1', 'WWW-Authenticate': 'Basic realm="tinyproxy"' },
      }),
    );
    for (const target of [https_, http_]) {
      const r = await performCheck(opts({ proxy: `http://tim:bad@127.0.0.1:${tiny401.port}`, target }), { lookup });
      expect(r.failure?.stage, target).toBe('auth');
      expect(r.failure?.cause, target).toEqual({
        kind: 'proxy_auth_required',
        realm: 'tinyproxy',
        withCredentials: true,
        status: 401,
      });
      expect(r.report.diagnosis, target).toMatch(/rejected the username or password \(401\)/);
    }
    // squid's 503 for a refused target names the cause in X-Squid-Error: the target refused, at connect, over
    // CONNECT and absolute-form alike (it was "busy or limits this account", and "the target itself answered 503").
    const squid = keep(
      await httpProxyPeer({
        kind: 'answer',
        status: 503,
        reason: 'Service Unavailable',
        headers: { Server: 'squid/5.7', 'X-Squid-Error': 'ERR_CONNECT_FAIL 111', 'Mime-Version': '1.0' },
        body: '<!DOCTYPE html><html><head><title>ERROR</title></head><body>The requested URL could not be retrieved</body></html>',
      }),
    );
    for (const target of [https_, http_]) {
      const r = await performCheck(opts({ proxy: `http://127.0.0.1:${squid.port}`, target }), { lookup });
      expect(r.failure?.stage, target).toBe('connect');
      expect(r.report.diagnosis, target).toMatch(
        /^The target 127\.0\.0\.1:\d+ refused the proxy's connection \(503\): nothing listens there/,
      );
      expect(r.report.diagnosis, target).not.toMatch(/html|DOCTYPE/i);
    }
    // Only the proxy nearest to us counts: a target behind its own reverse proxy, forwarded by proxyd, is the target's answer.
    const forwarded = keep(
      await httpProxyPeer({
        kind: 'answer',
        status: 503,
        reason: 'Service Unavailable',
        headers: {
          Via: '1.1 proxyd',
          'Proxy-Status': 'envoy; error=connection_refused, proxyd; received-status=503',
          'X-Squid-Error': 'ERR_CONNECT_FAIL 111',
        },
      }),
    );
    const f = await performCheck(opts({ proxy: `http://127.0.0.1:${forwarded.port}`, target: http_ }), { lookup });
    expect(f.failure?.stage).toBe('status');
    expect(f.report.diagnosis).toMatch(/the target itself answered 503/);
    // A 403/502/504 the proxy says it forwarded (received-status) is the target's too, not a gateway refusal.
    for (const status of [403, 502, 504]) {
      const own = keep(
        await httpProxyPeer({
          kind: 'answer',
          status,
          reason: 'From Target',
          headers: { Via: '1.1 proxyd', 'Proxy-Status': `proxyd; received-status=${status}` },
          body: 'no',
        }),
      );
      const o = await performCheck(opts({ proxy: `http://127.0.0.1:${own.port}`, target: http_ }), { lookup });
      expect(o.failure?.stage, String(status)).toBe('status');
      expect(o.report.stages.find((s) => s.name === 'connect')?.status, String(status)).toBe('ok');
      expect(o.report.diagnosis, String(status)).toMatch(new RegExp(`the target itself answered ${status}`));
    }
    // proxyd's own 429 (the account's connection limit) to an http:// target is the proxy's answer (its Proxy-Status
    // names an error and no received-status), not the target's: it fails connect.
    const limited = keep(
      await httpProxyPeer({
        kind: 'answer',
        status: 429,
        reason: 'Too Many Requests',
        headers: {
          'Proxy-Status': 'proxyd; error=http_request_denied; details="too many concurrent connections"',
          'X-Request-Id': 'gw-00000x',
        },
        body: '429 Too Many Requests: too many concurrent connections\n',
      }),
    );
    const l = await performCheck(opts({ proxy: `http://127.0.0.1:${limited.port}`, target: http_ }), { lookup });
    expect(l.failure?.stage).toBe('connect');
    expect(l.report.diagnosis).toMatch(
      /^The proxy is busy or limits this account \(429: "too many concurrent connections"\)/,
    );
    // proxyd's 504 for a slow resolver is a timeout, not a misspelled name; its 502 with no exit names the targeting.
    const slowDns = keep(
      await httpProxyPeer({
        kind: 'answer',
        status: 504,
        reason: 'Gateway Timeout',
        headers: { 'Proxy-Status': 'proxyd; error=dns_timeout; details="resolving the target name timed out"' },
      }),
    );
    expect(
      (await performCheck(opts({ proxy: `http://127.0.0.1:${slowDns.port}`, target: https_ }), { lookup })).report
        .diagnosis,
    ).toMatch(/^The proxy timed out reaching/);
    const noExit = keep(
      await httpProxyPeer({
        kind: 'answer',
        status: 502,
        reason: 'Bad Gateway',
        headers: { 'Proxy-Status': 'proxyd; error=destination_unavailable; details="no exit for country fr"' },
      }),
    );
    expect(
      (await performCheck(opts({ proxy: `http://127.0.0.1:${noExit.port}`, target: https_ }), { lookup })).report
        .diagnosis,
    ).toMatch(/no exit serves that location/);
    // RFC 9209 Proxy-Status says the same for any proxy.
    const dns = keep(
      await httpProxyPeer({
        kind: 'answer',
        status: 502,
        reason: 'Bad Gateway',
        headers: { 'Proxy-Status': 'edge; error=dns_error; rcode="NXDOMAIN"' },
      }),
    );
    const d = await performCheck(opts({ proxy: `http://127.0.0.1:${dns.port}`, target: https_ }), { lookup });
    expect(d.report.diagnosis).toMatch(/^The target name 127\.0\.0\.1 does not resolve at the proxy \(502\)/);
  });

  it("a target's X-Request-Id forwarded by another proxy is not called the gateway's request id", async () => {
    const squid = keep(
      await httpProxyPeer({
        kind: 'answer',
        status: 200,
        reason: 'OK',
        headers: { Via: '1.1 squid', 'X-Request-Id': 'ORIGIN-ID-123' },
        body: '{"ip":"127.0.0.9"}',
      }),
    );
    const r = await performCheck(
      opts({ proxy: `http://127.0.0.1:${squid.port}`, target: `http://127.0.0.1:${http.port}/`, direct: false }),
      { lookup },
    );
    expect(r.report.request_id).toBeNull();
    // Through proxyd (its Via), the last X-Request-Id is the gateway's own (it adds it after the target's).
    const ours = keep(
      await httpProxyPeer({
        kind: 'answer',
        status: 200,
        reason: 'OK',
        headers: { Via: '1.1 proxyd', 'X-Request-Id': 'gw-000001' },
        body: '{"ip":"127.0.0.9"}',
      }),
    );
    const g = await performCheck(
      opts({ proxy: `http://127.0.0.1:${ours.port}`, target: `http://127.0.0.1:${http.port}/`, direct: false }),
      { lookup },
    );
    expect(g.report.request_id).toBe('gw-000001');
  });

  it('auth: a proxy that closes without answering', async () => {
    const proxy = keep(await httpProxyPeer({ kind: 'close' }));
    const r = await performCheck(
      opts({ proxy: `http://127.0.0.1:${proxy.port}`, target: `https://127.0.0.1:${https.port}/` }),
      { lookup },
    );
    expect(r.failure?.stage).toBe('auth');
    expect(r.report.diagnosis).toMatch(/closed the connection before answering CONNECT/);
  });

  it('auth: an answer whose head never ends within 64 KiB says so in plain words', async () => {
    const proxy = keep(
      await httpProxyPeer({ kind: 'answer', status: 200, reason: 'OK', headers: { 'X-Big': 'a'.repeat(300_000) } }),
    );
    const r = await performCheck(
      opts({ proxy: `http://127.0.0.1:${proxy.port}`, target: `https://127.0.0.1:${https.port}/` }),
      { lookup },
    );
    expect(r.failure?.stage).toBe('auth');
    const detail = r.report.stages.find((s) => s.name === 'auth')!.detail;
    expect(detail).toContain('header not ended within 65536 bytes');
    expect(detail + r.report.diagnosis).not.toContain('""');
  });

  it('auth: an HTTP check against a SOCKS5 port', async () => {
    const socks = keep(await socksPeer({}));
    const r = await performCheck(
      opts({ proxy: `http://127.0.0.1:${socks.port}`, target: `https://127.0.0.1:${https.port}/` }),
      { lookup },
    );
    expect(r.failure?.stage).toBe('auth');
    expect(r.report.diagnosis).toMatch(/HTTP vs SOCKS5|does not answer like an HTTP proxy/);
  });

  const tlsCases: Array<
    [string, keyof Pick<Certs, 'selfSigned' | 'wrongHost' | 'expired' | 'good'>, boolean, RegExp, RegExp]
  > = [
    ['self-signed', 'selfSigned', true, /self-signed certificate/, /self-signed certificate: trust it with --ca/],
    [
      'wrong host',
      'wrongHost',
      true,
      /certificate is for DNS:wrong\.example, not 127\.0\.0\.1 \(wrong host\)/,
      /does not name 127\.0\.0\.1/,
    ],
    ['expired', 'expired', true, /certificate expired/, /has expired/],
    ['untrusted CA (no --ca)', 'good', false, /issuer not trusted/, /untrusted CA: add that CA with --ca/],
  ];
  for (const [label, which, withCa, detail, diag] of tlsCases) {
    it(`tls: ${label}`, async () => {
      const target = keep(await httpsEcho(certs[which]));
      const proxy = keep(await httpProxyPeer({ kind: 'tunnel', allowNoCreds: true }));
      const r = await performCheck(
        opts({
          proxy: `http://127.0.0.1:${proxy.port}`,
          target: `https://127.0.0.1:${target.port}/`,
          ca: withCa ? certs.caPem : undefined,
        }),
        { lookup },
      );
      expect(names(r).slice(3)).toEqual(['connect:ok', 'tls:fail', 'status:skipped']);
      expect(r.report.stages[4]!.detail).toMatch(detail);
      expect(r.report.diagnosis).toMatch(diag);
    });
  }

  it('tls: --ca may hold several certificates; it never leaks into the default trust store', async () => {
    const proxy = keep(await httpProxyPeer({ kind: 'tunnel', allowNoCreds: true }));
    const base = { proxy: `http://127.0.0.1:${proxy.port}`, target: `https://127.0.0.1:${https.port}/`, direct: false };
    const bundle = `${certs.selfSigned.cert}\n${certs.caPem}`;
    expect((await performCheck(opts({ ...base, ca: bundle }), { lookup })).ok).toBe(true);
    expect((await performCheck(opts({ ...base, ca: undefined }), { lookup })).failure?.stage).toBe('tls');
  });

  it('tls: target port that does not speak TLS', async () => {
    const proxy = keep(await httpProxyPeer({ kind: 'tunnel', allowNoCreds: true }));
    const r = await performCheck(
      opts({ proxy: `http://127.0.0.1:${proxy.port}`, target: `https://127.0.0.1:${http.port}/` }),
      { lookup },
    );
    expect(r.failure?.stage).toBe('tls');
    expect(r.report.diagnosis).toMatch(/may not speak TLS/);
  });

  it('status: target answering 500', async () => {
    const t = keep(await httpsEcho(certs.good, 'status500'));
    const proxy = keep(await httpProxyPeer({ kind: 'tunnel', allowNoCreds: true }));
    const r = await performCheck(
      opts({ proxy: `http://127.0.0.1:${proxy.port}`, target: `https://127.0.0.1:${t.port}/` }),
      { lookup },
    );
    expect(names(r).slice(4)).toEqual(['tls:ok', 'status:fail']);
    expect(r.report.stages[5]!.detail).toBe('target answered 500 Internal Server Error');
    expect(r.report.diagnosis).toMatch(/^The proxy works; the target itself answered 500/);
  });

  it('status: a target without an IP in its answer passes but says so', async () => {
    const t = keep(await httpEcho('noip'));
    const proxy = keep(await httpProxyPeer({ kind: 'tunnel', allowNoCreds: true }));
    const r = await performCheck(
      opts({ proxy: `http://127.0.0.1:${proxy.port}`, target: `http://127.0.0.1:${t.port}/` }),
      { lookup },
    );
    expect(r.ok).toBe(true);
    expect(r.report.egress_ip).toBeNull();
    expect(r.report.diagnosis).toMatch(/holds no IP/);
  });
});

describe('stage timeouts', () => {
  it('dns: a resolver that never answers', async () => {
    const never: LookupFn = () => new Promise(() => {});
    const r = await performCheck(
      opts({ proxy: 'http://proxy.test:1', target: 'https://127.0.0.1:1/', timeouts: { dns: 50 } }),
      { lookup: never },
    );
    expect(r.report.stages[0]).toMatchObject({
      name: 'dns',
      status: 'fail',
      detail: 'no answer within 50 ms (stage timeout)',
    });
    expect(r.report.stages[0]!.ms).toBeGreaterThanOrEqual(45);
    expect(r.report.diagnosis).toMatch(/^The dns stage timed out after 50 ms/);
  });

  it('auth: a proxy that accepts and never answers', async () => {
    const s = keep(await silentServer());
    const t0 = performance.now();
    const r = await performCheck(
      opts({ proxy: `http://127.0.0.1:${s.port}`, target: `https://127.0.0.1:${https.port}/`, timeouts: { auth: 80 } }),
      { lookup },
    );
    expect(performance.now() - t0).toBeLessThan(patient(1500));
    expect(names(r).slice(1, 4)).toEqual(['tcp:ok', 'auth:fail', 'connect:skipped']);
    expect(r.report.stages[2]!.detail).toBe('no answer within 80 ms (stage timeout)');
    // An HTTP proxy stuck reaching the target looks the same from here: the diagnosis names both.
    expect(r.report.diagnosis).toMatch(/stuck reaching the target/);
  });

  it('tls: a target that accepts the tunnel and never handshakes', async () => {
    const s = keep(await silentServer());
    const proxy = keep(await httpProxyPeer({ kind: 'tunnel', allowNoCreds: true }));
    const r = await performCheck(
      opts({ proxy: `http://127.0.0.1:${proxy.port}`, target: `https://127.0.0.1:${s.port}/`, timeouts: { tls: 80 } }),
      { lookup },
    );
    expect(r.failure).toEqual({ stage: 'tls', cause: { kind: 'timeout', ms: 80 } });
  });

  it('status: a target that never answers the request', async () => {
    const t = keep(await httpsEcho(certs.good, 'hang'));
    const proxy = keep(await httpProxyPeer({ kind: 'tunnel', allowNoCreds: true }));
    const r = await performCheck(
      opts({
        proxy: `http://127.0.0.1:${proxy.port}`,
        target: `https://127.0.0.1:${t.port}/`,
        timeouts: { status: 80 },
      }),
      { lookup },
    );
    expect(r.failure?.stage).toBe('status');
    expect(r.report.stages[5]!.detail).toContain('stage timeout');
  });

  it('connect (SOCKS5): a proxy that never answers the CONNECT', async () => {
    const socks = keep(await socksPeer({ hangAt: 'connect' }));
    const r = await performCheck(
      opts({
        proxy: `socks5h://127.0.0.1:${socks.port}`,
        target: `https://localhost:${https.port}/`,
        timeouts: { connect: 80 },
      }),
      { lookup },
    );
    expect(names(r).slice(2)).toEqual(['auth:ok', 'connect:fail', 'tls:skipped', 'status:skipped']);
    expect(r.report.diagnosis).toMatch(/^The connect stage timed out after 80 ms/);
  });
});

describe('SOCKS5 proxy', () => {
  it('socks5h -> HTTPS target: every stage ok, name resolved by the proxy', async () => {
    const socks = keep(await socksPeer({ user: 'alice', pass: PASS, egress: '127.0.0.2' }));
    const r = await performCheck(
      opts({ proxy: `socks5h://alice:${PASS}@127.0.0.1:${socks.port}`, target: `https://localhost:${https.port}/ip` }),
      { lookup },
    );
    expect(names(r)).toEqual(['dns:ok', 'tcp:ok', 'auth:ok', 'connect:ok', 'tls:ok', 'status:ok']);
    expect(socks.requests[0]).toEqual({ atyp: 3, host: 'localhost', port: https.port });
    expect(r.report.stages[2]!.detail).toMatch(/method 0x02, RFC 1929 status 0x00/);
    expect(r.report.egress_ip).toBe('127.0.0.2');
    expect(r.report.direct_ip).toBe('127.0.0.1');
    expect(JSON.stringify(r)).not.toContain(PASS);
  });

  // The bound address an IPv6 reply names was shown as eight groups (`[0:0:0:0:0:0:0:1]`); now RFC 5952 text, as the
  // gateway writes it (docs/decisions.md#d-082).
  it.each([
    ['127.0.0.1', '127.0.0.1'],
    ['::1', '[::1]'],
    ['2001:db8:0:0:1:0:0:1', '[2001:db8::1:0:0:1]'],
    ['::ffff:192.0.2.7', '[::ffff:192.0.2.7]'],
    ['bücher.example', 'bücher.example'],
  ])('connect shows the bound address %s as %s', async (bound, shown) => {
    const socks = keep(await socksPeer({ bound }));
    const r = await performCheck(
      opts({ proxy: `socks5h://127.0.0.1:${socks.port}`, target: `https://localhost:${https.port}/`, direct: false }),
      { lookup },
    );
    expect(r.ok).toBe(true);
    expect(r.report.stages[3]!.detail).toMatch(/, bound \S+:\d+$/);
    expect(r.report.stages[3]!.detail).toContain(`, bound ${shown}:`);
  });

  it('socks5 resolves the target locally and sends an IPv4 address', async () => {
    const socks = keep(await socksPeer({}));
    const r = await performCheck(
      opts({ proxy: `socks5://127.0.0.1:${socks.port}`, target: `https://localhost:${https.port}/`, direct: false }),
      { lookup },
    );
    expect(r.ok).toBe(true);
    expect(socks.requests[0]).toEqual({ atyp: 1, host: '127.0.0.1', port: https.port });
    expect(r.report.stages[3]!.detail).toContain('resolved locally to 127.0.0.1');
  });

  it('socks5 with a target name that does not resolve locally fails at connect', async () => {
    const socks = keep(await socksPeer({}));
    const r = await performCheck(
      opts({ proxy: `socks5://127.0.0.1:${socks.port}`, target: 'https://nowhere.invalid/' }),
      { lookup },
    );
    expect(r.failure?.stage).toBe('connect');
    expect(r.report.diagnosis).toMatch(/socks5h:\/\//);
  });

  it('socks5h -> HTTP target: no tls stage', async () => {
    const socks = keep(await socksPeer({ egress: '127.0.0.2' }));
    const r = await performCheck(
      opts({ proxy: `socks5h://127.0.0.1:${socks.port}`, target: `http://127.0.0.1:${http.port}/` }),
      { lookup },
    );
    expect(names(r)).toEqual(['dns:ok', 'tcp:ok', 'auth:ok', 'connect:ok', 'status:ok']);
    expect(r.report.egress_ip).toBe('127.0.0.2');
  });

  it('auth: wrong password gives RFC 1929 status 0x01', async () => {
    const socks = keep(await socksPeer({ user: 'alice', pass: 'other' }));
    const r = await performCheck(
      opts({ proxy: `socks5h://alice:${PASS}@127.0.0.1:${socks.port}`, target: `https://localhost:${https.port}/` }),
      { lookup },
    );
    expect(names(r).slice(2, 4)).toEqual(['auth:fail', 'connect:skipped']);
    expect(r.report.stages[2]!.detail).toBe('username/password rejected (RFC 1929 status 0x01)');
    expect(r.report.diagnosis).toMatch(/rejected the username or password/);
    expect(JSON.stringify(r)).not.toContain(PASS);
  });

  it('auth: no credentials and method 0xFF means the source IP is not whitelisted', async () => {
    const socks = keep(await socksPeer({ method: 0xff }));
    const r = await performCheck(
      opts({ proxy: `socks5h://127.0.0.1:${socks.port}`, target: `https://localhost:${https.port}/` }),
      { lookup },
    );
    expect(r.report.stages[2]!.detail).toMatch(/0xFF/);
    expect(r.report.diagnosis).toMatch(/^Your source IP is not whitelisted \(SOCKS5 method 0xFF/);
    expect(r.report.diagnosis).toContain('proxyctl whitelist add --current'); // the one command that needs no lookup of the public IP
  });

  it('auth: a SOCKS5 check against an HTTP proxy port', async () => {
    const proxy = keep(await httpProxyPeer({ kind: 'answer', status: 400, reason: 'Bad Request' }));
    const r = await performCheck(
      opts({ proxy: `socks5h://127.0.0.1:${proxy.port}`, target: `https://localhost:${https.port}/` }),
      { lookup },
    );
    expect(r.failure?.stage).toBe('auth');
  });

  for (const [code, name, diag] of [
    [0x02, 'connection not allowed by ruleset', /does not allow this connection to localhost \(SOCKS5 reply 0x02/],
    [0x04, 'host unreachable', /could not reach localhost:\d+ \(SOCKS5 reply 0x04/],
    [0x05, 'connection refused', /refused the proxy's connection \(SOCKS5 reply 0x05\)/],
    [0x06, 'TTL expired', /timed out reaching/],
  ] as const) {
    it(`connect: reply ${code} is named`, async () => {
      const socks = keep(await socksPeer({ reply: code }));
      const r = await performCheck(
        opts({ proxy: `socks5h://127.0.0.1:${socks.port}`, target: `https://localhost:${https.port}/` }),
        { lookup },
      );
      expect(names(r).slice(3)).toEqual(['connect:fail', 'tls:skipped', 'status:skipped']);
      expect(r.report.stages[3]!.detail).toContain(`reply 0x0${code} ${name}`);
      expect(r.report.diagnosis).toMatch(diag);
    });
  }

  it('connect: a real refused target through the SOCKS5 peer', async () => {
    const port = await closedPort();
    const socks = keep(await socksPeer({}));
    const r = await performCheck(
      opts({ proxy: `socks5h://127.0.0.1:${socks.port}`, target: `https://localhost:${port}/` }),
      { lookup },
    );
    expect(r.failure).toEqual({ stage: 'connect', cause: { kind: 'socks_reply', code: 5 } });
  });
});

describe('runCheck output (the command)', () => {
  // The command through its deps, as main runs it: output on the harness streams.
  const command = (o: RunOptions, globals: { json?: boolean } = {}) => {
    const h = harness('http://127.0.0.1:1', { globals: { color: false, ...globals } });
    h.deps.check = { lookup };
    const code = runCheck(
      {
        ctx: h.ctx,
        proxy: o.proxy,
        target: o.target,
        timeoutMs: o.timeoutMs,
        direct: o.direct,
        ...(o.ca ? { caFile: caFile() } : {}),
      },
      h.deps,
    );
    return { code, out: () => h.io.out(), err: () => h.io.err() };
  };
  const caFile = () => {
    const f = path.join(mkdtempSync(path.join(tmpdir(), 'proxyctl-ca-')), 'ca.pem');
    writeFileSync(f, certs.caPem);
    return f;
  };

  it('--json: the document of docs/support.md, exit 6 on failure, no password anywhere', async () => {
    const proxy = keep(await httpProxyPeer({ kind: 'tunnel', user: 'alice', pass: 'other' }));
    const r = command(
      opts({ proxy: `http://alice:${PASS}@127.0.0.1:${proxy.port}`, target: `https://127.0.0.1:${https.port}/` }),
      { json: true },
    );
    expect(await r.code).toBe(6);
    const doc = JSON.parse(r.out());
    expect(Object.keys(doc)).toEqual(['stages', 'egress_ip', 'direct_ip', 'diagnosis', 'request_id']);
    expect(doc.request_id).toBeNull(); // this peer sends no X-Request-Id
    expect(doc.stages.map((s: { name: string }) => s.name)).toEqual(['dns', 'tcp', 'auth', 'connect', 'tls', 'status']);
    for (const s of doc.stages) expect(Object.keys(s)).toEqual(['name', 'status', 'ms', 'detail']);
    expect(r.out() + r.err()).not.toContain(PASS);
  });

  it('table: stage rows, diagnosis line, no colour codes when colour is off, exit 0', async () => {
    const proxy = keep(await httpProxyPeer({ kind: 'tunnel', user: 'alice', pass: PASS, egress: '127.0.0.2' }));
    const r = command(
      opts({ proxy: `http://alice:${PASS}@127.0.0.1:${proxy.port}`, target: `https://127.0.0.1:${https.port}/` }),
    );
    expect(await r.code).toBe(0);
    const text = r.out();
    expect(text).not.toContain('\x1b[');
    expect(text).not.toContain(PASS);
    expect(text).toContain(`check http://alice:****@127.0.0.1:${proxy.port} -> https://127.0.0.1:${https.port}/`);
    for (const n of ['dns', 'tcp', 'auth', 'connect', 'tls', 'status'])
      expect(text).toMatch(new RegExp(`│ ${n}\\s+│ ok`));
    expect(text).toContain('egress IP via proxy: 127.0.0.2   direct: 127.0.0.1');
    expect(text).toMatch(/\nresult: All stages passed/);
  });

  it('a proxy URL that does not parse is echoed without its password, whatever the password holds; a bad %-escape is a usage error', async () => {
    for (const [proxy, secret] of [
      ['http://demo:sec/ret@127.0.0.1:3128', 'sec/ret'],
      ['http://special:p@ss:w/rd%#x@127.0.0.1:3128', 'ss:w/rd%#x'],
    ] as const) {
      const err = await command({ proxy, target: 'https://127.0.0.1:1/', timeoutMs: 100, direct: false }).code.catch(
        (e: Error & { exitCode: number }) => e,
      );
      expect(err).toMatchObject({ exitCode: 2 });
      expect((err as Error).message).not.toContain(secret);
      expect((err as Error).message).not.toMatch(/ret|rd%/);
    }
    const bad = await command({
      proxy: 'http://demo:sec%zzret@127.0.0.1:3128',
      target: 'https://127.0.0.1:1/',
      timeoutMs: 100,
      direct: false,
    }).code.catch((e: Error & { exitCode: number }) => e);
    expect(bad).toMatchObject({ exitCode: 2 });
    expect((bad as Error).message).toMatch(/malformed %-escape/);
    expect((bad as Error).message).not.toContain('zzret');
  });

  it('a bad proxy URL is a usage error (2) and is echoed redacted', async () => {
    const r = command({
      proxy: `ftp://bob:${PASS}@127.0.0.1:21`,
      target: 'https://127.0.0.1:1/',
      timeoutMs: 100,
      direct: false,
    });
    const err = await r.code.catch((e: Error & { exitCode: number }) => e);
    expect(err).toMatchObject({ exitCode: 2 });
    expect((err as Error).message).toMatch(/unsupported proxy scheme "ftp:"/);
    expect((err as Error).message).not.toContain(PASS);
  });
});
