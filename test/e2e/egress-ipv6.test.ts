// An IPv6 egress prefix through a spawned proxyd with two workers (SPEC 13), on loopback only: the test
// routes fd7a:5c1e:ab00:1::/64 locally on lo and turns non-local binds on (both put back afterwards), and a
// TCP target on [::1] reports the address each connection came from. Needs root; skipped otherwise.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { networkInterfaces } from 'node:os';
import ipaddr from 'ipaddr.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RawClient, basic } from '../gateway/helpers.js';
import { hostPort, pool } from '../hostile/net.js';
import {
  admin,
  makeAccount,
  PROXYD,
  run,
  startDaemon,
  tempDir,
  waitForProxyUsers,
  type Daemon,
} from '../helpers/daemon.js';
import { patient } from '../helpers/patience.js';

const PREFIX = 'fd7a:5c1e:ab00:1::/64';
/** Not routed here: the start-up check must refuse it. */
const UNROUTED = 'fd7a:5c1e:ab00:2::/64';
const SYSCTL = '/proc/sys/net/ipv6/ip_nonlocal_bind';
const PASS = 'v6-pool-user-password';

function ip(args: string[]): string {
  return execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Why this file cannot run here, or null. */
function whySkip(): string | null {
  if (process.platform !== 'linux') return 'Linux only';
  if (process.getuid?.() !== 0) return 'needs root (ip -6 route, sysctl)';
  try {
    ip(['-6', 'route', 'show', 'table', 'local']);
  } catch {
    return '`ip -6 route` failed';
  }
  const loopback6 = Object.values(networkInterfaces())
    .flat()
    .some((i) => i?.address === '::1');
  if (!loopback6) return 'no IPv6 loopback (::1)';
  try {
    readFileSync(SYSCTL, 'utf8');
  } catch {
    return `cannot read ${SYSCTL}`;
  }
  if (ip(['-6', 'route', 'show', 'table', 'local']).includes(UNROUTED.replace('/64', '')))
    return `${UNROUTED} is routed on this host`;
  return null;
}

const skip = whySkip();
const [NET, BITS] = ipaddr.IPv6.parseCIDR(PREFIX);
const inPrefix = (a: string): boolean => ipaddr.IPv6.isValid(a) && ipaddr.IPv6.parse(a).match(NET, BITS);

/** Reads what the target wrote (its view of our address) until it closes. */
function readLine(socket: net.Socket): Promise<string> {
  return new Promise((resolve, reject) => {
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => (data += d));
    socket.on('error', reject);
    socket.on('close', () => resolve(data.trim()));
    socket.setTimeout(10_000, () => socket.destroy(new Error('no answer in 10 s')));
  });
}

/** CONNECT [::1]:target with credentials; the address the target saw. */
async function viaConnect(proxy: string, target: number, user: string): Promise<string> {
  const { host, port } = hostPort(proxy);
  const socket = net.connect(port, host);
  socket.write(
    `CONNECT [::1]:${target} HTTP/1.1\r\nHost: [::1]:${target}\r\nProxy-Authorization: ${basic(user, PASS)}\r\n\r\n`,
  );
  const text = await readLine(socket);
  const status = /^HTTP\/1\.1 (\d{3})/.exec(text)?.[1];
  if (status !== '200') throw new Error(`CONNECT answered ${text.split('\r\n')[0]}`);
  return text.slice(text.indexOf('\r\n\r\n') + 4).trim();
}

/** The SOCKS5 reply code of a CONNECT to an address (ATYP 1 or 4); with 0, the address the target saw. */
async function viaSocks(
  proxy: string,
  target: number,
  user: string,
  to = '::1',
): Promise<{ rep: number; from: string }> {
  const { host, port } = hostPort(proxy);
  const c = await RawClient.connect(port, host);
  c.write(Buffer.from([5, 1, 2]));
  expect([...(await c.read(2))]).toEqual([5, 2]);
  const u = Buffer.from(user);
  const p = Buffer.from(PASS);
  c.write(Buffer.concat([Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]));
  expect([...(await c.read(2))]).toEqual([1, 0]);
  const addr = ipaddr.parse(to);
  const atyp = addr.kind() === 'ipv6' ? 4 : 1;
  c.write(
    Buffer.concat([
      Buffer.from([5, 1, 0, atyp]),
      Buffer.from(addr.toByteArray()),
      Buffer.from([target >> 8, target & 255]),
    ]),
  );
  const head = await c.read(4);
  if (head[1] !== 0) {
    c.socket.destroy();
    return { rep: head[1]!, from: '' };
  }
  await c.read((head[3] === 4 ? 16 : 4) + 2); // the bound address and port
  return { rep: 0, from: (await c.readToEnd()).toString('latin1').trim() };
}

describe.skipIf(skip !== null)(`IPv6 egress prefix, two workers${skip ? ` (skipped: ${skip})` : ''}`, () => {
  let previousSysctl: string | null = null;
  let routeAdded = false;
  let d: Daemon | undefined;
  let target: net.Server;
  let port = 0;
  /** Every connection's remote address, as the target saw it. */
  const seen: string[] = [];

  beforeAll(async () => {
    // Recorded first: afterAll puts back whatever was changed, even if a later step fails.
    previousSysctl = readFileSync(SYSCTL, 'utf8').trim();
    try {
      ip(['-6', 'route', 'add', 'local', PREFIX, 'dev', 'lo']);
      routeAdded = true;
    } catch (e) {
      // Already there (someone else's): use it, and leave it in place afterwards.
      if (!String((e as { stderr?: string }).stderr).includes('File exists')) throw e;
    }
    writeFileSync(SYSCTL, '1\n'); // sysctl -w net.ipv6.ip_nonlocal_bind=1

    target = net.createServer((s) => {
      s.on('error', () => {});
      const from = s.remoteAddress ?? '';
      seen.push(from);
      s.end(`${from}\n`);
    });
    await new Promise<void>((r) => target.listen(0, '::1', r));
    port = (target.address() as net.AddressInfo).port;

    const dataDir = tempDir();
    await makeAccount(dataDir, 'v6pool@example.com');
    const r = await admin(
      dataDir,
      ['proxy-user', 'create', '--email', 'v6pool@example.com', '--username', 'alice', '--password-stdin'],
      `${PASS}\n`,
    );
    expect(r.code, r.stderr).toBe(0);
    d = await startDaemon({
      dataDir,
      args: ['--egress-pool', PREFIX, '--allow-private-targets', '--workers', '2'],
      timeoutMs: 30_000,
    });
    await waitForProxyUsers(d, 1);
  }, patient(60_000));

  afterAll(async () => {
    await d?.stop();
    await new Promise<void>((r) => (target?.listening ? target.close(() => r()) : r()));
    // Put the host back: the sysctl's previous value, and the route this file added.
    if (previousSysctl !== null) writeFileSync(SYSCTL, `${previousSysctl}\n`);
    if (routeAdded) ip(['-6', 'route', 'del', 'local', PREFIX, 'dev', 'lo']);
  });

  it(
    'N connections (CONNECT and SOCKS5) leave from N distinct addresses, all inside the prefix',
    async () => {
      const N = 40;
      const from = await pool(Array.from({ length: N }), 8, (_, i) =>
        i % 2
          ? viaSocks(d!.socks, port, 'alice').then((x) => (expect(x.rep).toBe(0), x.from))
          : viaConnect(d!.httpProxy, port, 'alice'),
      );
      expect(new Set(from).size).toBe(N);
      for (const a of from) expect(inPrefix(a), a).toBe(true);
      expect(seen.slice(-N).sort()).toEqual([...from].sort()); // what the target saw is what came back
    },
    patient(60_000),
  );

  it(
    'a session leaves from one address over both workers, HTTP and SOCKS5; another session from another',
    async () => {
      const user = 'alice-session-v6one-sesstime-30';
      const from = await pool(Array.from({ length: 30 }), 10, (_, i) =>
        i % 2 ? viaSocks(d!.socks, port, user).then((x) => x.from) : viaConnect(d!.httpProxy, port, user),
      );
      expect(new Set(from).size).toBe(1);
      expect(inPrefix(from[0]!)).toBe(true);
      const other = await viaConnect(d!.httpProxy, port, 'alice-session-v6two');
      expect(inPrefix(other)).toBe(true);
      expect(other).not.toBe(from[0]);
      expect(await viaSocks(d!.socks, port, 'alice-session-v6two').then((x) => x.from)).toBe(other);
    },
    patient(60_000),
  );

  it(
    "an IPv4 target has no address of the pool's family (refused, nothing dialled)",
    async () => {
      const v4 = net.createServer((s) => s.destroy());
      await new Promise<void>((r) => v4.listen(0, '127.0.0.1', r));
      const v4port = (v4.address() as net.AddressInfo).port;
      let reached = 0;
      v4.on('connection', () => reached++);
      try {
        const r = await viaSocks(d!.socks, v4port, 'alice', '127.0.0.1');
        expect(r.rep).toBe(4); // host unreachable: no_usable_address
        expect(reached).toBe(0);
      } finally {
        v4.close();
      }
    },
    patient(30_000),
  );

  it('/metrics counts egress connections under the prefix, not per address', async () => {
    const text = await (await fetch(`${d!.api}/metrics`)).text();
    const lines = text.split('\n').filter((l) => l.startsWith('proxyd_gateway_egress_connections_total{'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^proxyd_gateway_egress_connections_total\{address="fd7a:5c1e:ab00:1::\/64"\} (\d+)$/);
    expect(Number(lines[0]!.split(' ').at(-1))).toBeGreaterThanOrEqual(40);
  });

  it(
    'refuses to start with a prefix not routed here: exit 1 naming it and what to run',
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
          UNROUTED,
          '--workers',
          workers,
        ]);
        expect(r.code, r.stderr).toBe(1);
        expect(r.stderr).toContain(UNROUTED);
        expect(r.stderr).toContain(`ip -6 route add local ${UNROUTED} dev lo`);
        expect(r.stderr).toContain('sysctl -w net.ipv6.ip_nonlocal_bind=1');
        expect(r.stdout).toBe('');
      }
    },
    patient(60_000),
  );

  it(
    'refuses to start when non-local binds are off, naming the prefix (the route alone is not enough)',
    async () => {
      writeFileSync(SYSCTL, '0\n');
      try {
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
          PREFIX,
        ]);
        expect(r.code, r.stderr).toBe(1);
        expect(r.stderr).toContain(PREFIX);
        expect(r.stderr).toContain('EADDRNOTAVAIL');
        expect(r.stderr).toContain('sysctl -w net.ipv6.ip_nonlocal_bind=1');
      } finally {
        writeFileSync(SYSCTL, '1\n');
      }
    },
    patient(30_000),
  );
});
