// End to end with curl as the client: HTTP absolute-form, CONNECT (-p and https), socks5h,
// against loopback echo targets, with the egress bound to 127.0.0.2.
import { mkdtempSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  RawClient,
  curl,
  startHttpEcho,
  startHttpsEcho,
  startTcpEcho,
  startTestGateway,
  type TestGateway,
} from '../helpers.js';

let t: TestGateway;
let httpEcho: Awaited<ReturnType<typeof startHttpEcho>>;
let httpsEcho: Awaited<ReturnType<typeof startHttpsEcho>>;
const ALICE = 'alice:s3cret%3Apw'; // password "s3cret:pw" (a colon inside the password)

beforeAll(async () => {
  httpEcho = await startHttpEcho();
  httpsEcho = await startHttpsEcho();
  t = await startTestGateway({ egressAddress: '127.0.0.2' });
});
afterAll(async () => {
  await t.gw.close(100);
  httpEcho.server.close();
  httpsEcho.server.close();
});

function json(r: { stdout: string }): {
  remote: string;
  url: string;
  method: string;
  headers: Record<string, string>;
  body: string;
  rawHeaders: string[];
} {
  return JSON.parse(r.stdout) as never;
}

describe('HTTP proxy (absolute-form)', () => {
  it('forwards with credentials; the target sees the egress address and no proxy headers', async () => {
    const r = await curl([
      '-x',
      `http://${ALICE}@${t.http}`,
      '-H',
      'Proxy-Connection: keep-alive',
      '-H',
      'Connection: X-Hop',
      '-H',
      'X-Hop: secret-hop',
      '-H',
      'X-Keep: kept  value',
      `http://127.0.0.1:${httpEcho.port}/path/x?q=1&r=%20`,
    ]);
    expect(r.code, r.stderr).toBe(0);
    const e = json(r);
    expect(e.remote).toBe('127.0.0.2');
    expect(e.url).toBe('/path/x?q=1&r=%20');
    expect(e.headers.host).toBe(`127.0.0.1:${httpEcho.port}`);
    expect(e.headers['proxy-authorization']).toBeUndefined();
    expect(e.headers['proxy-connection']).toBeUndefined();
    expect(e.headers['x-hop']).toBeUndefined();
    expect(e.headers.connection).toBe('close');
    expect(e.headers['x-keep']).toBe('kept  value');
  });

  it('relays request bodies byte for byte (Content-Length and chunked)', async () => {
    const body = Buffer.from(Array.from({ length: 300_000 }, (_, i) => (i * 7) % 256));
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'gw-body-')), 'body.bin');
    writeFileSync(file, body);
    const a = await curl([
      '-x',
      `http://${ALICE}@${t.http}`,
      '--data-binary',
      `@${file}`,
      `http://127.0.0.1:${httpEcho.port}/cl`,
    ]);
    expect(a.code, a.stderr).toBe(0);
    expect(Buffer.from(json(a).body, 'latin1').equals(body)).toBe(true);
    const b = await curl([
      '-x',
      `http://${ALICE}@${t.http}`,
      '-H',
      'Transfer-Encoding: chunked',
      '--data-binary',
      `@${file}`,
      `http://127.0.0.1:${httpEcho.port}/te`,
    ]);
    expect(b.code, b.stderr).toBe(0);
    expect(Buffer.from(json(b).body, 'latin1').equals(body)).toBe(true);
    expect(json(b).method).toBe('POST');
  });

  it('answers 407 with Proxy-Authenticate for wrong or missing credentials', async () => {
    for (const proxy of [`http://alice:wrong@${t.http}`, `http://nobody:x@${t.http}`, `http://${t.http}`]) {
      const r = await curl(['-i', '-x', proxy, `http://127.0.0.1:${httpEcho.port}/`]);
      expect(r.stdout).toMatch(/^HTTP\/1\.1 407 /);
      expect(r.stdout).toContain('Proxy-Authenticate: Basic realm="proxy"\r\n');
    }
    const c = await curl(['-i', '-p', '-x', `http://alice:wrong@${t.http}`, `http://127.0.0.1:${httpEcho.port}/`]);
    expect(c.stdout).toMatch(/^HTTP\/1\.1 407 /);
    expect(c.stdout).toContain('Proxy-Authenticate: Basic realm="proxy"');
    expect(c.stdout + c.stderr).not.toContain('wrong');
  });

  it('502 for a closed port', async () => {
    const port = await closedPort();
    const r = await curl(['-i', '-x', `http://${ALICE}@${t.http}`, `http://127.0.0.1:${port}/`]);
    expect(r.stdout).toMatch(/^HTTP\/1\.1 502 /);
    const c = await curl(['-i', '-p', '-x', `http://${ALICE}@${t.http}`, `http://127.0.0.1:${port}/`]);
    expect(c.stdout).toMatch(/^HTTP\/1\.1 502 /);
  });
});

describe('CONNECT tunnels', () => {
  it('tunnels plain HTTP with -p; the target sees the egress address', async () => {
    const r = await curl(['-p', '-x', `http://${ALICE}@${t.http}`, `http://127.0.0.1:${httpEcho.port}/tunnelled`]);
    expect(r.code, r.stderr).toBe(0);
    expect(json(r).remote).toBe('127.0.0.2');
    expect(json(r).url).toBe('/tunnelled');
    // Through a tunnel the proxy header stays on the CONNECT, never reaching the target.
    expect(json(r).headers['proxy-authorization']).toBeUndefined();
  });

  it('tunnels HTTPS to a name the gateway resolves (certificate checked)', async () => {
    const r = await curl([
      '--cacert',
      httpsEcho.certFile,
      '-x',
      `http://${ALICE}@${t.http}`,
      `https://localhost:${httpsEcho.port}/secure`,
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(json(r).remote).toBe('127.0.0.2');
    expect(json(r).url).toBe('/secure');
  });
});

describe('SOCKS5', () => {
  it('socks5h with RFC 1929 credentials to HTTPS by name', async () => {
    const r = await curl([
      '--cacert',
      httpsEcho.certFile,
      '-x',
      `socks5h://${ALICE}@${t.socks}`,
      `https://localhost:${httpsEcho.port}/s`,
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(json(r).remote).toBe('127.0.0.2');
  });

  it('socks5 with an IPv4 address type', async () => {
    const r = await curl(['-x', `socks5://${ALICE}@${t.socks}`, `http://127.0.0.1:${httpEcho.port}/v4`]);
    expect(r.code, r.stderr).toBe(0);
    expect(json(r).url).toBe('/v4');
    expect(json(r).remote).toBe('127.0.0.2');
  });

  it('wrong credentials fail at the RFC 1929 stage; no credentials and no whitelist get method 0xFF', async () => {
    const a = await curl(['-x', `socks5h://alice:nope@${t.socks}`, `http://127.0.0.1:${httpEcho.port}/`]);
    expect(a.code).not.toBe(0);
    expect(a.stderr).toMatch(/authentication failed|User was rejected/i);
    const b = await curl(['-x', `socks5h://${t.socks}`, `http://127.0.0.1:${httpEcho.port}/`]);
    expect(b.code).not.toBe(0);
    expect(b.stderr).toMatch(/No authentication method was acceptable/i);
  });

  it('502-equivalent 0x05 for a closed port', async () => {
    const port = await closedPort();
    const r = await curl(['-x', `socks5h://${ALICE}@${t.socks}`, `http://127.0.0.1:${port}/`]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/Connection refused|\(5\)/i);
  });
});

describe('admission by source IP', () => {
  it('admits a whitelisted source without credentials; changes apply to new connections only', async () => {
    const echo = await startTcpEcho();
    t.admission.whitelist.set('127.0.0.1', 7);
    const ok = await curl(['-x', `http://${t.http}`, `http://127.0.0.1:${httpEcho.port}/wl`]);
    expect(ok.code, ok.stderr).toBe(0);
    const s = await curl(['-x', `socks5h://${t.socks}`, `http://127.0.0.1:${httpEcho.port}/wl`]);
    expect(s.code, s.stderr).toBe(0);

    // An open tunnel, then the entry goes away.
    const c = await RawClient.connect(t.httpPort);
    c.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nHost: x\r\n\r\n`);
    expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    t.admission.whitelist.delete('127.0.0.1');

    const refused = await curl(['-i', '-x', `http://${t.http}`, `http://127.0.0.1:${httpEcho.port}/wl`]);
    expect(refused.stdout).toMatch(/^HTTP\/1\.1 407 /);
    const refusedSocks = await curl(['-x', `socks5h://${t.socks}`, `http://127.0.0.1:${httpEcho.port}/`]);
    expect(refusedSocks.stderr).toMatch(/No authentication method was acceptable/i);

    c.write('still here');
    expect((await c.read(10)).toString()).toBe('still here');
    c.socket.end();
    await c.readToEnd();
    echo.server.close();
  });
});

describe('SSRF guard (default policy)', () => {
  let g: TestGateway;
  beforeAll(async () => {
    g = await startTestGateway({ allowPrivateTargets: false, egressAddress: '127.0.0.2' });
  });
  afterAll(() => g.gw.close(100));

  it('refuses loopback targets by address and by name: 403 / SOCKS 0x02', async () => {
    for (const url of [`http://127.0.0.1:${httpEcho.port}/`, `http://localhost:${httpEcho.port}/`]) {
      const a = await curl(['-i', '-x', `http://${ALICE}@${g.http}`, url]);
      expect(a.stdout).toMatch(/^HTTP\/1\.1 403 /);
      const b = await curl(['-i', '-p', '-x', `http://${ALICE}@${g.http}`, url]);
      expect(b.stdout).toMatch(/^HTTP\/1\.1 403 /);
      const c = await curl(['-x', `socks5h://${ALICE}@${g.socks}`, url]);
      expect(c.code).not.toBe(0);
      expect(c.stderr).toMatch(/not allowed|ruleset|\(2\)/i);
    }
    expect(g.gw.stats().targetRefusals.private_target).toBeGreaterThanOrEqual(6);
  });
});

describe('behind a load balancer (PROXY protocol)', () => {
  let g: TestGateway;
  beforeAll(async () => {
    g = await startTestGateway({ proxyProtocolFrom: ['127.0.0.0/8'], egressAddress: '127.0.0.2' });
    g.admission.whitelist.set('198.51.100.9', 42);
  });
  afterAll(() => g.gw.close(100));

  it('admits by the source in a v2 header from a trusted peer, refuses an unlisted source', async () => {
    const lbOk = await startLoadBalancer(g.httpPort, '198.51.100.9');
    const lbBad = await startLoadBalancer(g.httpPort, '198.51.100.10');
    const lbSocks = await startLoadBalancer(g.socksPort, '198.51.100.9');
    const ok = await curl(['-x', `http://127.0.0.1:${lbOk.port}`, `http://127.0.0.1:${httpEcho.port}/lb`]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout).remote).toBe('127.0.0.2');
    const s = await curl(['-x', `socks5h://127.0.0.1:${lbSocks.port}`, `http://127.0.0.1:${httpEcho.port}/lb`]);
    expect(s.code, s.stderr).toBe(0);
    const bad = await curl(['-i', '-x', `http://127.0.0.1:${lbBad.port}`, `http://127.0.0.1:${httpEcho.port}/lb`]);
    expect(bad.stdout).toMatch(/^HTTP\/1\.1 407 /);
    expect(g.usage.of(42).connections).toBeGreaterThan(0);
    for (const lb of [lbOk, lbBad, lbSocks]) lb.server.close();
  });

  it('closes the connection when an untrusted peer sends a PROXY header', async () => {
    // t trusts nobody; curl --haproxy-protocol sends a v1 header first.
    const r = await curl([
      '--haproxy-protocol',
      '-x',
      `http://${ALICE}@${t.http}`,
      `http://127.0.0.1:${httpEcho.port}/`,
    ]);
    expect(r.code).not.toBe(0);
    expect(r.stdout).toBe('');
    // From a trusted peer the same curl command works (the header's source is 127.0.0.1).
    const ok = await curl([
      '--haproxy-protocol',
      '-x',
      `http://${ALICE}@${g.http}`,
      `http://127.0.0.1:${httpEcho.port}/`,
    ]);
    expect(ok.code, ok.stderr).toBe(0);
  });
});

/** A TCP relay that prepends a PROXY v2 header claiming `source`, like a load balancer. */
async function startLoadBalancer(gatewayPort: number, source: string): Promise<{ server: net.Server; port: number }> {
  const server = net.createServer({ allowHalfOpen: true }, (client) => {
    const up = net.connect({ port: gatewayPort, host: '127.0.0.1', allowHalfOpen: true });
    const hdr = Buffer.alloc(28);
    Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]).copy(hdr);
    hdr[12] = 0x21;
    hdr[13] = 0x11;
    hdr.writeUInt16BE(12, 14);
    Buffer.from(source.split('.').map(Number)).copy(hdr, 16);
    Buffer.from([127, 0, 0, 1]).copy(hdr, 20);
    hdr.writeUInt16BE(40000, 24);
    hdr.writeUInt16BE(gatewayPort, 26);
    up.write(hdr);
    client.pipe(up);
    up.pipe(client);
    client.on('error', () => up.destroy());
    up.on('error', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as net.AddressInfo).port };
}

async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}
