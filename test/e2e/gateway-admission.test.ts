// The gateway inside a spawned proxyd, admitted by the real store: curl as the client, a local echo
// target, and a tiny load balancer that prefixes a PROXY v1 header (to present a public source IPv4).
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, inspectDb, makeAccount, startDaemon, type Daemon } from '../helpers/daemon.js';
import { addrOf, tcpEcho } from '../helpers/net.js';
import { settlesTo, sleep } from '../helpers/wait.js';
import { curl } from '../gateway/helpers.js';

/** HTTP target on 127.0.0.1 that answers with the address it sees. */
function echoTarget(): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ ip: req.socket.remoteAddress?.replace(/^::ffff:/, ''), path: req.url }));
  });
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r(server)));
}

/** A load balancer in front of the gateway: sends `PROXY TCP4 <src> …` then relays bytes. */
function loadBalancer(gateway: string, sourceIp: () => string): Promise<net.Server> {
  const [host, port] = gateway.split(':') as [string, string];
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(port), host, () => {
      upstream.write(`PROXY TCP4 ${sourceIp()} 127.0.0.1 40000 ${port}\r\n`);
      client.pipe(upstream).pipe(client);
    });
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r(server)));
}

describe('gateway admission through a spawned proxyd', () => {
  let d: Daemon;
  let target: http.Server;
  let echo: net.Server;
  let lb: net.Server;
  let token: string;
  let proxyPassword: string;
  const source = { ip: '8.8.4.4' };

  async function api(path: string, body?: unknown) {
    const res = await fetch(
      `${d.api}${path}?api_key=${token}`,
      body ? { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) } : {},
    );
    return (await res.json()) as { code: number };
  }

  beforeAll(async () => {
    target = await echoTarget();
    echo = await tcpEcho();
    d = await startDaemon({
      args: ['--allow-private-targets', '--egress-address', '127.0.0.2', '--proxy-protocol-from', '127.0.0.1/32'],
    });
    ({ token } = await makeAccount(d.dataDir, 'gw@example.com'));
    proxyPassword = (
      await admin(d.dataDir, ['proxy-user', 'create', '--email', 'gw@example.com', '--username', 'alice'])
    ).json.password;
    lb = await loadBalancer(d.httpProxy, () => source.ip);
  });
  afterAll(async () => {
    await d?.stop();
    target?.close();
    echo?.close();
    lb?.close();
  });

  it('forwards with credentials, and the target sees the egress address', async () => {
    await settlesTo(
      async () =>
        (
          await curl([
            '-x',
            `http://alice:${proxyPassword}@${d.httpProxy}`,
            '-o',
            '/dev/null',
            '-w',
            '%{http_code}',
            `http://${addrOf(target)}/`,
          ])
        ).stdout,
      '200',
    );
    const r = await curl(['-x', `http://alice:${proxyPassword}@${d.httpProxy}`, `http://${addrOf(target)}/hello`]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ ip: '127.0.0.2', path: '/hello' });
    const s = await curl(['--proxy', `socks5h://alice:${proxyPassword}@${d.socks}`, `http://${addrOf(target)}/socks`]);
    expect(JSON.parse(s.stdout)).toEqual({ ip: '127.0.0.2', path: '/socks' });
  });

  it('answers 407 with Proxy-Authenticate for no or wrong credentials', async () => {
    for (const proxy of [`http://${d.httpProxy}`, `http://alice:wrong-password@${d.httpProxy}`]) {
      const r = await curl([
        '-x',
        proxy,
        '-o',
        '/dev/null',
        '-D',
        '-',
        '-w',
        '%{http_code}',
        `http://${addrOf(target)}/`,
      ]);
      expect(r.stdout).toMatch(/407$/);
      expect(r.stdout.toLowerCase()).toContain('proxy-authenticate: basic realm="proxy"');
    }
  });

  it('admits a whitelisted source IP (from a trusted PROXY header) and follows every change', async () => {
    const viaLb = () =>
      curl(['-x', `http://${addrOf(lb)}`, '-o', '/dev/null', '-w', '%{http_code}', `http://${addrOf(target)}/`]).then(
        (r) => r.stdout,
      );
    expect(await viaLb()).toBe('407');
    expect((await api('/openapi/v1/proxy/whitelist/add', { items: [{ ip: source.ip }] })).code).toBe(200);
    expect(await settlesTo(viaLb, '200')).toBe('200');

    await admin(d.dataDir, [
      'whitelist',
      'set-status',
      '--email',
      'gw@example.com',
      '--ip',
      source.ip,
      '--status',
      'disabled',
    ]);
    expect(await settlesTo(viaLb, '407')).toBe('407');
    await admin(d.dataDir, [
      'whitelist',
      'set-status',
      '--email',
      'gw@example.com',
      '--ip',
      source.ip,
      '--status',
      'active',
    ]);
    expect(await settlesTo(viaLb, '200')).toBe('200');

    await admin(d.dataDir, ['account', 'set', '--email', 'gw@example.com', '--status', 'suspended']);
    expect(await settlesTo(viaLb, '407')).toBe('407');
    const creds = () =>
      curl([
        '-x',
        `http://alice:${proxyPassword}@${d.httpProxy}`,
        '-o',
        '/dev/null',
        '-w',
        '%{http_code}',
        `http://${addrOf(target)}/`,
      ]).then((r) => r.stdout);
    expect(await settlesTo(creds, '407')).toBe('407');
    await admin(d.dataDir, ['account', 'set', '--email', 'gw@example.com', '--status', 'active']);
    expect(await settlesTo(viaLb, '200')).toBe('200');

    source.ip = '9.9.9.9'; // not listed
    expect(await viaLb()).toBe('407');
    source.ip = '8.8.4.4';
  });

  it('refuses new connections within 1 s of a delete while an open tunnel keeps working', async () => {
    await api('/openapi/v1/proxy/whitelist/add', { items: [{ ip: source.ip }] });
    await settlesTo(
      () =>
        curl(['-x', `http://${addrOf(lb)}`, '-o', '/dev/null', '-w', '%{http_code}', `http://${addrOf(target)}/`]).then(
          (r) => r.stdout,
        ),
      '200',
    );
    const tunnel = net.connect((lb.address() as net.AddressInfo).port, '127.0.0.1');
    await new Promise((r) => tunnel.once('connect', r));
    tunnel.write(`CONNECT ${addrOf(echo)} HTTP/1.1\r\nHost: ${addrOf(echo)}\r\n\r\n`);
    const head = await new Promise<string>((r) => tunnel.once('data', (c) => r(c.toString())));
    expect(head).toMatch(/^HTTP\/1\.1 200/);

    expect((await api('/openapi/v1/proxy/whitelist/delete', { ips: [source.ip] })).code).toBe(200);
    const t0 = Date.now();
    let status = '';
    while (Date.now() - t0 < 1000) {
      status = (
        await curl(['-x', `http://${addrOf(lb)}`, '-o', '/dev/null', '-w', '%{http_code}', `http://${addrOf(target)}/`])
      ).stdout;
      if (status === '407') break;
    }
    expect(status).toBe('407');

    tunnel.write('still here');
    const echoed = await new Promise<string>((r) => tunnel.once('data', (c) => r(c.toString())));
    expect(echoed).toBe('still here');
    tunnel.destroy();
  });

  it('never lets a tunnel reach the daemon itself', async () => {
    const apiHostPort = d.api.replace('http://', '');
    const r = await curl([
      '-x',
      `http://alice:${proxyPassword}@${d.httpProxy}`,
      '-o',
      '/dev/null',
      '-w',
      '%{http_code}',
      `http://${apiHostPort}/ip`,
    ]);
    expect(r.stdout).toBe('403');
    const c = await curl(['-p', '-x', `http://alice:${proxyPassword}@${d.httpProxy}`, `http://${d.socks}/`]);
    expect(c.code).not.toBe(0);
  });

  it('keeps the proxy password out of its logs', () => {
    expect(d.logs.join('\n')).not.toContain(proxyPassword);
  });
});

describe('SSRF guard by default', () => {
  it('refuses loopback and private targets without --allow-private-targets', async () => {
    const target = await echoTarget();
    const d = await startDaemon();
    try {
      await makeAccount(d.dataDir, 'ssrf@example.com');
      const pw = (await admin(d.dataDir, ['proxy-user', 'create', '--email', 'ssrf@example.com', '--username', 'bob']))
        .json.password;
      const http403 = await settlesTo(
        () =>
          curl([
            '-x',
            `http://bob:${pw}@${d.httpProxy}`,
            '-o',
            '/dev/null',
            '-w',
            '%{http_code}',
            `http://${addrOf(target)}/`,
          ]).then((r) => r.stdout),
        '403',
      );
      expect(http403).toBe('403');
      const connect = await curl([
        '-p',
        '-x',
        `http://bob:${pw}@${d.httpProxy}`,
        '-o',
        '/dev/null',
        '-w',
        '%{http_connect}',
        `http://${addrOf(target)}/`,
      ]);
      expect(connect.stdout).toBe('403');
      const socks = await curl(['--proxy', `socks5h://bob:${pw}@${d.socks}`, `http://${addrOf(target)}/`]);
      expect(socks.code).not.toBe(0);
      expect(socks.stderr.toLowerCase()).toMatch(/not allowed|socks/);
    } finally {
      await d.stop();
      target.close();
    }
  });
});

describe('gateway operations inside a spawned proxyd', () => {
  it('closes a PROXY header from a peer outside --proxy-protocol-from', async () => {
    const target = await echoTarget();
    const d = await startDaemon({ args: ['--allow-private-targets'] });
    try {
      const lb = await loadBalancer(d.httpProxy, () => '8.8.4.4');
      const r = await curl([
        '-x',
        `http://${addrOf(lb)}`,
        '-o',
        '/dev/null',
        '-w',
        '%{http_code}',
        `http://${addrOf(target)}/`,
      ]);
      expect(r.stdout).toBe('000'); // connection closed, no HTTP answer
      lb.close();
    } finally {
      await d.stop();
      target.close();
    }
  });

  it('refuses a closed account, counts traffic, and drains an open tunnel on SIGTERM', async () => {
    const target = await echoTarget();
    const echo = await tcpEcho();
    const d = await startDaemon({ args: ['--allow-private-targets'] });
    try {
      const { accountId } = await makeAccount(d.dataDir, 'ops@example.com');
      const pw = (await admin(d.dataDir, ['proxy-user', 'create', '--email', 'ops@example.com', '--username', 'carol']))
        .json.password;
      await settlesTo(
        () =>
          curl([
            '-x',
            `http://carol:${pw}@${d.httpProxy}`,
            '-o',
            '/dev/null',
            '-w',
            '%{http_code}',
            `http://${addrOf(target)}/`,
          ]).then((r) => r.stdout),
        '200',
      );
      const ok = await curl(['-x', `http://carol:${pw}@${d.httpProxy}`, `http://${addrOf(target)}/count`]);
      expect(JSON.parse(ok.stdout).path).toBe('/count');

      const metrics = await (await fetch(`${d.api}/metrics`)).text();
      expect(metrics).toMatch(/proxyd_gateway_connections_total\{path="http"\} [1-9]/);
      expect(metrics).toMatch(/proxyd_gateway_bytes_total\{direction="down"\} [1-9]/);
      expect(metrics).not.toContain(pw);

      // A tunnel opened before SIGTERM keeps echoing while the daemon drains, then the daemon exits 0.
      const auth = Buffer.from(`carol:${pw}`).toString('base64');
      const tunnel = net.connect(Number(d.httpProxy.split(':')[1]), '127.0.0.1');
      await new Promise((r) => tunnel.once('connect', r));
      tunnel.write(
        `CONNECT ${addrOf(echo)} HTTP/1.1\r\nHost: ${addrOf(echo)}\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`,
      );
      expect(await new Promise<string>((r) => tunnel.once('data', (c) => r(c.toString())))).toMatch(/^HTTP\/1\.1 200/);
      d.proc.kill('SIGTERM');
      await sleep(300);
      tunnel.write('during drain');
      expect(await new Promise<string>((r) => tunnel.once('data', (c) => r(c.toString())))).toBe('during drain');
      tunnel.end();
      expect(await d.exited).toBe(0);

      // Usage of the account was flushed to the store on the way out.
      const db = await inspectDb(d.dataDir);
      const t = db.get<{ bytes_down: number; connections: number }>(
        "SELECT SUM(bytes_down) AS bytes_down, SUM(connections) AS connections FROM usage_buckets WHERE account_id = ? AND period = 'day'",
        accountId,
      );
      db.close();
      expect(t.connections).toBeGreaterThanOrEqual(2);
      expect(t.bytes_down).toBeGreaterThan(0);

      // Closed: credentials no longer open the gateway.
      const again = await startDaemon({ dataDir: d.dataDir, args: ['--allow-private-targets'] });
      try {
        await admin(again.dataDir, ['account', 'set', '--email', 'ops@example.com', '--status', 'closed']);
        const closed = await settlesTo(
          () =>
            curl([
              '-x',
              `http://carol:${pw}@${again.httpProxy}`,
              '-o',
              '/dev/null',
              '-w',
              '%{http_code}',
              `http://${addrOf(target)}/`,
            ]).then((r) => r.stdout),
          '407',
        );
        expect(closed).toBe('407');
      } finally {
        await again.stop();
      }
    } finally {
      await d.stop();
      target.close();
      echo.close();
    }
  });
});
