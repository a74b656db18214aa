// Egress pools and sticky sessions through a spawned proxyd with two workers, on loopback: every
// 127.x address is local, so the pool 127.0.0.2-127.0.0.9 binds, and an echo target reports the peer.
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, curl } from '../gateway/helpers.js';
import { pool } from '../hostile/net.js';
import {
  admin,
  inspectDb,
  makeAccount,
  PROXYCTL,
  PROXYD,
  run,
  startDaemon,
  tempDir,
  type Daemon,
} from '../helpers/daemon.js';
import { hostPort } from '../hostile/net.js';
import { patient } from '../helpers/patience.js';

const POOL = Array.from({ length: 8 }, (_, i) => `127.0.0.${i + 2}`);

/** Reads a whole response off a socket (the server closes after it). */
function readAll(socket: net.Socket): Promise<string> {
  return new Promise((resolve) => {
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => (data += d));
    socket.on('error', () => resolve(data));
    socket.on('close', () => resolve(data));
    socket.setTimeout(10_000, () => socket.destroy());
  });
}

/** What the echo target saw as our peer address, or the proxy's refusal. */
type Via = { ip: string } | { status: number } | { socksAuth: number };

async function viaHttp(proxy: string, target: number, user: string, pass: string): Promise<Via> {
  const { host, port } = hostPort(proxy);
  const socket = net.connect(port, host);
  socket.write(
    `GET http://127.0.0.1:${target}/ HTTP/1.1\r\nHost: 127.0.0.1:${target}\r\nProxy-Authorization: ${basic(user, pass)}\r\nConnection: close\r\n\r\n`,
  );
  const text = await readAll(socket);
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
  if (status !== 200) return { status };
  return JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { ip: string };
}

/** SOCKS5 with RFC 1929, CONNECT 127.0.0.1:target, then one HTTP request through the tunnel. */
async function viaSocks(proxy: string, target: number, user: string, pass: string): Promise<Via> {
  const { host, port } = hostPort(proxy);
  const socket = net.connect(port, host);
  socket.on('error', () => {});
  let buf = Buffer.alloc(0);
  const waiters: Array<() => void> = [];
  socket.on('data', (d: Buffer) => {
    buf = Buffer.concat([buf, d]);
    waiters.splice(0).forEach((w) => w());
  });
  socket.on('close', () => waiters.splice(0).forEach((w) => w()));
  const take = async (n: number): Promise<Buffer | null> => {
    while (buf.length < n) {
      if (socket.destroyed) return null;
      await new Promise<void>((r) => waiters.push(r));
    }
    const out = buf.subarray(0, n);
    buf = buf.subarray(n);
    return out;
  };
  socket.write(Buffer.from([5, 1, 2]));
  if ((await take(2))?.[1] !== 2) throw new Error('no user/pass method');
  const u = Buffer.from(user);
  const p = Buffer.from(pass);
  socket.write(Buffer.concat([Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]));
  const auth = await take(2);
  if (!auth || auth[1] !== 0) {
    socket.destroy();
    return { socksAuth: auth?.[1] ?? -1 };
  }
  socket.write(Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, target >> 8, target & 255]));
  const rep = await take(10);
  if (!rep || rep[1] !== 0) throw new Error(`SOCKS reply ${rep?.[1]}`);
  socket.removeAllListeners('data');
  const rest = readAll(socket);
  socket.write(`GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
  const text = buf.toString('latin1') + (await rest);
  return JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { ip: string };
}

const ipOf = (v: Via): string => {
  if (!('ip' in v)) throw new Error(`refused: ${JSON.stringify(v)}`);
  return v.ip;
};

describe('egress pool with sticky sessions (two workers)', () => {
  let d: Daemon;
  let target: http.Server;
  let port = 0;
  const PASS = 'pool-user-password';

  beforeAll(async () => {
    target = http.createServer((req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ ip: req.socket.remoteAddress?.replace(/^::ffff:/, '') }));
    });
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
    port = (target.address() as net.AddressInfo).port;
    const dataDir = tempDir();
    await makeAccount(dataDir, 'pool@example.com');
    for (const [username, pw] of [
      ['alice', PASS],
      ['my-team', PASS],
      ['alice-literal', 'the-literal-users-password'],
    ]) {
      const r = await admin(
        dataDir,
        ['proxy-user', 'create', '--email', 'pool@example.com', '--username', username!, '--password-stdin'],
        `${pw}\n`,
      );
      expect(r.code, r.stderr).toBe(0);
    }
    // New names may not hold "-session-" (it would shadow a session): this user predates that rule.
    const db = await inspectDb(dataDir, { write: true });
    db.run("UPDATE proxy_users SET username = 'alice-session-literal' WHERE username = 'alice-literal'");
    db.close();
    d = await startDaemon({
      dataDir,
      args: ['--egress-pool', '127.0.0.2-127.0.0.9', '--allow-private-targets', '--workers', '2'],
      timeoutMs: 30_000,
    });
  }, patient(60_000));

  afterAll(async () => {
    await d?.stop();
    await new Promise<void>((r) => target.close(() => r()));
  });

  it(
    'rotation spreads 800 connections over all 8 addresses, none above twice its share',
    async () => {
      const ips = await pool(Array.from({ length: 800 }), 16, () =>
        viaHttp(d.httpProxy, port, 'alice', PASS).then(ipOf),
      );
      const count: Record<string, number> = {};
      for (const ip of ips) count[ip] = (count[ip] ?? 0) + 1;
      expect(Object.keys(count).sort()).toEqual([...POOL].sort());
      for (const n of Object.values(count)) expect(n).toBeLessThanOrEqual(200);
    },
    patient(120_000),
  );

  it(
    'each new session gets an address of its own while free ones remain',
    async () => {
      // Fresh sessions, all started at once so they race across both workers: 8 sessions, 8 addresses.
      const ids = Array.from({ length: 8 }, (_, i) => `own${i}`);
      const ips = await Promise.all(
        ids.map((id, i) =>
          (i % 2 ? viaSocks : viaHttp)(i % 2 ? d.socks : d.httpProxy, port, `alice-session-${id}`, PASS).then(ipOf),
        ),
      );
      expect(new Set(ips).size).toBe(8);
      const again = await Promise.all(
        ids.map((id) => viaHttp(d.httpProxy, port, `alice-session-${id}`, PASS).then(ipOf)),
      );
      expect(again).toEqual(ips);
    },
    patient(60_000),
  );

  it(
    '50 connections of one session, over HTTP and SOCKS5 and both workers, leave from one address',
    async () => {
      // After the sessions above, so a worker deciding alone would not land on the same address by chance.
      const user = 'alice-session-sticky1-sesstime-30';
      const ips = await pool(Array.from({ length: 50 }), 10, (_, i) =>
        (i % 2 ? viaSocks(d.socks, port, user, PASS) : viaHttp(d.httpProxy, port, user, PASS)).then(ipOf),
      );
      expect(new Set(ips).size).toBe(1);
      expect(POOL).toContain(ips[0]);
    },
    patient(60_000),
  );

  it(
    'a base user holding "-" takes session parameters too',
    async () => {
      const a = ipOf(await viaHttp(d.httpProxy, port, 'my-team-session-x1', PASS));
      const b = ipOf(await viaSocks(d.socks, port, 'my-team-session-x1', PASS));
      expect(b).toBe(a);
    },
    patient(30_000),
  );

  it(
    'a username that exists as written wins over parsing',
    async () => {
      // "alice-session-literal" is a user of its own: its password admits (rotation), alice's does not.
      expect(await viaHttp(d.httpProxy, port, 'alice-session-literal', PASS)).toEqual({ status: 407 });
      expect(await viaSocks(d.socks, port, 'alice-session-literal', PASS)).toEqual({ socksAuth: 1 });
      const ips = await pool(Array.from({ length: 8 }), 4, () =>
        viaHttp(d.httpProxy, port, 'alice-session-literal', 'the-literal-users-password').then(ipOf),
      );
      expect(new Set(ips).size).toBeGreaterThan(1); // not a session: it rotates
    },
    patient(30_000),
  );

  it.each([
    'alice-session-bad.id',
    'alice-session-x-sesstime-0',
    'alice-session-x-sesstime-1441',
    'alice-session-',
    `alice-session-${'i'.repeat(33)}`,
  ])(
    'refuses malformed parameters %s (HTTP 407, SOCKS 0x01)',
    async (user) => {
      expect(await viaHttp(d.httpProxy, port, user, PASS)).toEqual({ status: 407 });
      expect(await viaSocks(d.socks, port, user, PASS)).toEqual({ socksAuth: 1 });
    },
    30_000,
  );

  it(
    'a wrong password with session parameters is refused like any other',
    async () => {
      expect(await viaHttp(d.httpProxy, port, 'alice-session-s9', 'wrong-password')).toEqual({ status: 407 });
      expect(await viaSocks(d.socks, port, 'alice-session-s9', 'wrong-password')).toEqual({ socksAuth: 1 });
    },
    patient(30_000),
  );

  it(
    'proxyctl check with a session username shows the same egress twice, a new session another',
    async () => {
      const env = { XDG_CONFIG_HOME: tempDir(), NO_COLOR: '1' };
      const check = async (user: string, scheme: string, proxy: string) => {
        const r = await run(
          PROXYCTL,
          [
            'check',
            '--proxy',
            `${scheme}://${user}:${PASS}@${proxy}`,
            '--target',
            `http://127.0.0.1:${port}/`,
            '--json',
          ],
          { env },
        );
        expect(r.code, r.stderr).toBe(0);
        expect(r.stdout).not.toContain(PASS);
        return (JSON.parse(r.stdout) as { egress_ip: string }).egress_ip;
      };
      const first = await check('alice-session-chk1-sesstime-5', 'http', d.httpProxy);
      expect(POOL).toContain(first);
      expect(await check('alice-session-chk1-sesstime-5', 'socks5h', d.socks)).toBe(first);
      expect(await check('alice-session-chk1-sesstime-5', 'http', d.httpProxy)).toBe(first);
    },
    patient(60_000),
  );

  it(
    'curl as the client: one session over the HTTP proxy and socks5h leaves from one address',
    async () => {
      const user = 'alice-session-curl1-sesstime-15';
      const via = async (proxy: string) => {
        const r = await curl(['-x', proxy, `http://127.0.0.1:${port}/`]);
        return (JSON.parse(r.stdout) as { ip: string }).ip;
      };
      const first = await via(`http://${user}:${PASS}@${d.httpProxy}`);
      expect(POOL).toContain(first);
      expect(await via(`socks5h://${user}:${PASS}@${d.socks}`)).toBe(first);
      expect(await via(`http://${user}:${PASS}@${d.httpProxy}`)).toBe(first);
    },
    patient(30_000),
  );

  it('/metrics counts connections per egress address', async () => {
    const text = await (await fetch(`${d.api}/metrics`)).text();
    for (const ip of POOL)
      expect(text).toMatch(
        new RegExp(`proxyd_gateway_egress_connections_total\\{address="${ip.replace(/\./g, '\\.')}"\\} \\d+`),
      );
  });
});

describe('egress pool at start', () => {
  it(
    'refuses to start when a pool address is not ours, naming it (exit 1)',
    async () => {
      for (const workers of ['1', '2']) {
        const r = await run(PROXYD, [
          'serve',
          '--data-dir',
          tempDir(),
          '--api-listen',
          '127.0.0.1:0',
          '--http-proxy-listen',
          '127.0.0.1:0',
          '--socks-listen',
          '127.0.0.1:0',
          '--egress-pool',
          '127.0.0.2-127.0.0.3,192.0.2.1',
          '--workers',
          workers,
        ]);
        expect(r.code).toBe(1);
        expect(r.stderr).toContain('192.0.2.1');
        expect(r.stdout).toBe('');
      }
    },
    patient(60_000),
  );

  it(
    'refuses to start when --egress-address is not ours, naming it (exit 1): it failed every connection as "target unreachable"',
    async () => {
      const r = await run(PROXYD, [
        'serve',
        '--data-dir',
        tempDir(),
        '--api-listen',
        '127.0.0.1:0',
        '--http-proxy-listen',
        '127.0.0.1:0',
        '--socks-listen',
        '127.0.0.1:0',
        '--egress-address',
        '192.0.2.77',
      ]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('--egress-address: cannot bind 192.0.2.77');
      expect(r.stdout).toBe('');
    },
    patient(30_000),
  );

  it(
    'refuses a block larger than /22 and --egress-address next to it (exit 2)',
    async () => {
      const common = [
        'serve',
        '--data-dir',
        tempDir(),
        '--api-listen',
        '127.0.0.1:0',
        '--http-proxy-listen',
        '127.0.0.1:0',
        '--socks-listen',
        '127.0.0.1:0',
      ];
      const big = await run(PROXYD, [...common, '--egress-pool', '127.0.0.0/21']);
      expect(big.code).toBe(2);
      expect(big.stderr).toContain('/22');
      const both = await run(PROXYD, [...common, '--egress-pool', '127.0.0.2', '--egress-address', '127.0.0.2']);
      expect(both.code).toBe(2);
      const env = await run(PROXYD, common, { env: { PROXYD_EGRESS_POOL: '127.0.0.2-nope' } });
      expect(env.code).toBe(2);
      expect(env.stderr).toContain('--egress-pool');
    },
    patient(60_000),
  );
});
