// --workers 2 with SO_REUSEPORT: every worker listens on a socket of its own, accepted client connections belong
// to worker processes (never the primary: `ss -tnp` names the pid holding each), and one sticky session leaves
// from one egress address while its connections land on both workers. On SQLite the primary writes usage and
// the connection log for both workers: every record arrives, none waits on the file's lock.
import { execFileSync } from 'node:child_process';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic } from '../gateway/helpers.js';
import { hostPort } from '../hostile/net.js';
import { admin, inspectDb, makeAccount, PROXYD, run, startDaemon, tempDir, type Daemon } from '../helpers/daemon.js';
import { waitFor } from '../helpers/wait.js';
import { childPids } from './helpers.js';
import { patient } from '../helpers/patience.js';

const PASS = 'reuseport-user-password';

/** Sockets on this port (local side) as `ss -tnp` sees them: the pid holding each, keyed by the peer's port. */
function socketOwners(port: number, state: 'listening' | 'established'): Map<number, number[]> {
  const out = execFileSync('ss', ['-tnpH', 'state', state, `( sport = :${port} )`], { encoding: 'utf8' });
  const owners = new Map<number, number[]>();
  for (const line of out.split('\n').filter(Boolean)) {
    const cols = line.trim().split(/\s+/);
    const peer = cols.find((c, i) => i > 0 && /:\d+$/.test(c) && cols[i - 1]!.endsWith(`:${port}`));
    const pids = [...line.matchAll(/pid=(\d+)/g)].map((m) => Number(m[1]));
    const peerPort = peer ? Number(peer.slice(peer.lastIndexOf(':') + 1)) : NaN;
    owners.set(Number.isNaN(peerPort) ? owners.size : peerPort, pids);
  }
  return owners;
}

/** A CONNECT tunnel held open; resolves with the egress address the target saw and the client's own port. */
async function tunnel(
  proxy: string,
  target: number,
  user: string,
): Promise<{ ip: string; localPort: number; socket: net.Socket }> {
  const { host, port } = hostPort(proxy);
  const socket = net.connect(port, host);
  socket.on('error', () => {});
  socket.write(
    `CONNECT 127.0.0.1:${target} HTTP/1.1\r\nHost: 127.0.0.1:${target}\r\nProxy-Authorization: ${basic(user, PASS)}\r\n\r\n`,
  );
  let text = '';
  await new Promise<void>((resolve, reject) => {
    socket.setTimeout(10_000, () => reject(new Error('tunnel timed out')));
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      const head = text.indexOf('\r\n\r\n');
      if (head >= 0 && text.indexOf('\n', head + 4) >= 0) resolve();
    });
    socket.on('close', () => reject(new Error(`closed: ${text}`)));
  });
  expect(text.startsWith('HTTP/1.1 200')).toBe(true);
  const ip = text.slice(text.indexOf('\r\n\r\n') + 4).trim();
  return { ip, localPort: socket.localPort!, socket };
}

describe('proxyd serve --workers 2: a socket per worker', () => {
  let d: Daemon;
  let target: net.Server;
  let targetPort = 0;

  beforeAll(async () => {
    // The target names the address each connection came from, then holds it open.
    target = net.createServer((s) => s.write(`${s.remoteAddress?.replace(/^::ffff:/, '')}\n`));
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
    targetPort = (target.address() as net.AddressInfo).port;
    const dataDir = tempDir();
    await makeAccount(dataDir, 'reuseport@example.com');
    const r = await admin(
      dataDir,
      ['proxy-user', 'create', '--email', 'reuseport@example.com', '--username', 'carol', '--password-stdin'],
      `${PASS}\n`,
    );
    expect(r.code, r.stderr).toBe(0);
    d = await startDaemon({
      dataDir,
      args: ['--egress-pool', '127.0.0.2-127.0.0.9', '--allow-private-targets', '--workers', '2'],
      timeoutMs: 30_000,
    });
  }, patient(60_000));

  afterAll(async () => {
    await d?.stop();
    target?.close();
  });

  it('each worker listens on its own socket of every listener; the primary listens on none', () => {
    const workers = childPids(d.proc.pid!);
    expect(workers).toHaveLength(2);
    for (const listener of [d.httpProxy, d.socks, d.api.replace('http://', '')]) {
      const owners = [...socketOwners(hostPort(listener).port, 'listening').values()].flat();
      expect(owners.sort()).toEqual([...workers].sort());
    }
  });

  it(
    'accepted connections belong to the workers, and one session keeps one address across 20 of them on both',
    async () => {
      const workers = childPids(d.proc.pid!);
      const held = [];
      for (let i = 0; i < 20; i++)
        held.push(await tunnel(d.httpProxy, targetPort, 'carol-session-spread1-sesstime-30'));
      try {
        const owners = socketOwners(hostPort(d.httpProxy).port, 'established');
        const ownerOf = held.map((t) => owners.get(t.localPort));
        for (const pids of ownerOf) {
          expect(pids).toHaveLength(1);
          expect(workers).toContain(pids![0]);
          expect(pids![0]).not.toBe(d.proc.pid);
        }
        // The kernel spreads by the connection's ports: 20 landing on one worker would be a 1 in 2^19 chance.
        expect(new Set(ownerOf.map((p) => p![0])).size).toBe(2);
        expect(new Set(held.map((t) => t.ip)).size).toBe(1);
        expect(held[0]!.ip).toMatch(/^127\.0\.0\.[2-9]$/);
      } finally {
        for (const t of held) t.socket.destroy();
      }
    },
    patient(60_000),
  );

  it(
    "the primary writes both workers' connection-log records and usage, with no write retried",
    async () => {
      const workers = childPids(d.proc.pid!);
      const held = [];
      for (let i = 0; i < 20; i++) held.push(await tunnel(d.httpProxy, targetPort, 'carol'));
      const owners = socketOwners(hostPort(d.httpProxy).port, 'established');
      expect(new Set(held.map((t) => owners.get(t.localPort)?.[0])).size).toBe(2);
      for (const t of held) t.socket.destroy();
      const db = await inspectDb(d.dataDir);
      try {
        await waitFor(
          '20 records of user carol',
          () =>
            db.get<{ n: number }>(
              "SELECT COUNT(*) AS n FROM connection_log WHERE username = 'carol' AND reason IS NULL",
            ).n === 20,
        );
        await waitFor(
          'usage of 20 connections',
          () =>
            (db.get<{ n: number }>(
              "SELECT SUM(connections) AS n FROM usage_buckets WHERE period = 'minute' AND subject = 'user:carol'",
            ).n ?? 0) >= 20,
        );
      } finally {
        db.close();
      }
      // Only the primary holds a connection that writes; the workers never wrote, so none of them retried.
      const text = await (await fetch(`${d.api}/metrics`)).text();
      expect(text).toMatch(/^proxyd_connection_log_write_retries_total 0$/m);
      expect(text).toMatch(/^proxyd_usage_flush_failures_total 0$/m);
      expect(workers).toHaveLength(2);
    },
    patient(60_000),
  );

  it(
    "SIGHUP to the whole group (logrotate's `systemctl kill -s HUP`): no worker dies, open tunnels go on",
    async () => {
      const workers = childPids(d.proc.pid!);
      const held = [];
      for (let i = 0; i < 6; i++) held.push(await tunnel(d.httpProxy, targetPort, 'carol'));
      const reloads = async () => {
        const text = await (await fetch(`${d.api}/metrics`)).text();
        return Number(/^proxyd_admission_reloads_total (\d+)$/m.exec(text)?.[1] ?? NaN);
      };
      const before = await reloads();
      // A worker dies on SIGHUP unless it handles it: every tunnel it carried was cut.
      for (const pid of [d.proc.pid!, ...workers]) process.kill(pid, 'SIGHUP');
      // The primary tells each worker once: both reload (not twice each, for the signal each got directly).
      await waitFor('both workers reloaded', async () => (await reloads()) >= before + 2);
      await new Promise((r) => setTimeout(r, 500));
      expect(await reloads()).toBe(before + 2);
      expect(childPids(d.proc.pid!).sort()).toEqual([...workers].sort());
      expect(d.logs.some((l) => l.includes('"event":"worker_exit"'))).toBe(false);
      for (const t of held) {
        expect(t.socket.destroyed).toBe(false);
        t.socket.destroy();
      }
      expect((await tunnel(d.httpProxy, targetPort, 'carol')).socket.destroy()).toBeTruthy();
    },
    patient(60_000),
  );
});

describe('proxyd serve --workers 2 on a port another program holds', () => {
  // SO_REUSEPORT would let our workers share a port with any program of the same user that set it too.
  it(
    'refuses to start, naming the address, as one process does',
    async () => {
      const other = net.createServer();
      await new Promise<void>((r) => other.listen({ host: '127.0.0.1', port: 0, reusePort: true }, r));
      const port = (other.address() as net.AddressInfo).port;
      try {
        const r = await run(
          PROXYD,
          [
            'serve',
            '--data-dir',
            tempDir(),
            '--api-listen',
            '127.0.0.1:0',
            '--http-proxy-listen',
            `127.0.0.1:${port}`,
            '--socks-listen',
            '127.0.0.1:0',
            '--workers',
            '2',
          ],
          { timeoutMs: 30_000 },
        );
        expect(r.code).not.toBe(0);
        expect(r.stderr).toContain(`address in use: 127.0.0.1:${port}`);
      } finally {
        other.close();
      }
    },
    patient(40_000),
  );

  // Our own listeners set it too: --api-listen and --http-proxy-listen on one port started, printed both on it in
  // the ready line, and the kernel spread connections over the API and the proxy. One process refuses it (exit 1).
  it(
    'refuses two of its own listeners on one port, as one process does',
    async () => {
      const free = net.createServer();
      await new Promise<void>((r) => free.listen({ host: '127.0.0.1', port: 0 }, r));
      const port = (free.address() as net.AddressInfo).port;
      await new Promise((r) => free.close(r));
      for (const [api, other] of [
        [`127.0.0.1:${port}`, ['--http-proxy-listen', `127.0.0.1:${port}`, '--socks-listen', '127.0.0.1:0']],
        [`0.0.0.0:${port}`, ['--http-proxy-listen', '127.0.0.1:0', '--socks-listen', `127.0.0.1:${port}`]],
      ] as const) {
        const r = await run(
          PROXYD,
          ['serve', '--data-dir', tempDir(), '--api-listen', api, ...other, '--workers', '2'],
          { timeoutMs: 30_000 },
        );
        expect(r.stdout).toBe('');
        expect(r.code).toBe(1);
        expect(r.stderr).toContain(`address in use: 127.0.0.1:${port}`);
      }
    },
    patient(60_000),
  );
});
