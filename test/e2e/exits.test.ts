// Entry and exit nodes, on one host and one PostgreSQL: two entries and three exits (two in the
// US, one in Germany), each exit dialling from its own --egress-address on 127.0.0.x, so the target tells
// which exit a connection came through. One exit (us2) and one entry (entry-2) run two workers each.
//
// Targeting by country and city, over HTTP CONNECT and SOCKS5; a session goes to the same exit from either
// entry; no match → 502 destination_unavailable / SOCKS 0x03 within 100 ms (logged no_exit); a killed exit
// leaves selection and its sessions move; a new exit takes traffic within 3 s of its ready line; the hop
// listener refuses a client without the fleet secret; an exit has no customer port. Plain proxied HTTP
// through an entry (one request, keep-alive clients); the hop as seen on the wire between entry and exit (a
// recording relay: TLS 1.3 and nothing readable; a replay reaches nothing); the fleet secret and an exit's
// certificate rotated while a tunnel streams.
import { execFile, execFileSync } from 'node:child_process';
import dgram from 'node:dgram';
import http from 'node:http';
import net from 'node:net';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, dataDirFor, makeAccount, startDaemon, waitForProxyUsers, type Daemon } from '../helpers/daemon.js';
import { makeTemplate, postgresSkipReason, startPostgres, type PgCluster } from '../helpers/postgres.js';
import { sleep } from '../helpers/wait.js';
import { udpTargetSocket } from '../helpers/net.js';
import { patient } from '../helpers/patience.js';

const skip = postgresSkipReason();
const PASSWORD = 'exits-password-123';
const EMAIL = 'exits@example.com';
const EGRESS = {
  us1: '127.0.0.11',
  us2: '127.0.0.12',
  de1: '127.0.0.13',
  us3: '127.0.0.14',
  fr1: '127.0.0.15',
} as const;
const byAddress = new Map<string, string>(Object.entries(EGRESS).map(([k, v]) => [v, k]));

/** Answers each connection with the address it came from (the exit's egress), then echoes. */
function whoAmI(): Promise<net.Server> {
  const s = net.createServer((c) => {
    c.on('error', () => {});
    c.write(`${c.remoteAddress?.replace(/^::ffff:/, '')}\n`);
    c.pipe(c);
  });
  return new Promise((r) => s.listen(0, '127.0.0.1', () => r(s)));
}

type Outcome = { ok: true; exit: string; ms: number } | { ok: false; status: number; head: string; ms: number };

/** One CONNECT through `entry` as `user`: which exit it came out of, or the refusal. */
function viaConnect(entry: Daemon, target: string, user: string): Promise<Outcome> {
  const [host, port] = entry.httpProxy.split(':') as [string, string];
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const s = net.connect(Number(port), host);
    let buf = '';
    s.setTimeout(10_000, () => {
      s.destroy();
      reject(new Error(`no answer as ${user}`));
    });
    s.on('error', () => {});
    s.on('connect', () =>
      s.write(
        `CONNECT ${target} HTTP/1.1\r\nProxy-Authorization: Basic ${Buffer.from(`${user}:${PASSWORD}`).toString('base64')}\r\n\r\n`,
      ),
    );
    s.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const status = Number(buf.slice(9, 12));
      if (status !== 200) {
        s.destroy();
        return resolve({ ok: false, status, head: buf.slice(0, end), ms: performance.now() - t0 });
      }
      const nl = buf.indexOf('\n', end + 4);
      if (nl < 0) return;
      s.destroy();
      resolve({
        ok: true,
        exit: byAddress.get(buf.slice(end + 4, nl)) ?? buf.slice(end + 4, nl),
        ms: performance.now() - t0,
      });
    });
  });
}

/** One SOCKS5 CONNECT: the exit, or the reply code. */
function viaSocks(
  entry: Daemon,
  targetPort: number,
  user: string,
): Promise<{ ok: true; exit: string } | { ok: false; reply: number }> {
  const [host, port] = entry.socks.split(':') as [string, string];
  return new Promise((resolve, reject) => {
    const s = net.connect(Number(port), host);
    let stage = 0;
    let buf = Buffer.alloc(0);
    s.setTimeout(10_000, () => {
      s.destroy();
      reject(new Error('socks: no answer'));
    });
    s.on('error', () => {});
    s.on('connect', () => s.write(Buffer.from([5, 1, 2])));
    s.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (stage === 0 && buf.length >= 2) {
        buf = buf.subarray(2);
        stage = 1;
        const u = Buffer.from(user);
        const p = Buffer.from(PASSWORD);
        s.write(Buffer.concat([Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]));
      }
      if (stage === 1 && buf.length >= 2) {
        buf = buf.subarray(2);
        stage = 2;
        s.write(Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, targetPort >> 8, targetPort & 255]));
      }
      if (stage === 2 && buf.length >= 2) {
        if (buf[1] !== 0) {
          s.destroy();
          return resolve({ ok: false, reply: buf[1]! });
        }
        if (buf.length < 10) return;
        buf = buf.subarray(10);
        stage = 3;
      }
      if (stage === 3) {
        const nl = buf.indexOf(10);
        if (nl < 0) return;
        s.destroy();
        const a = buf.subarray(0, nl).toString();
        resolve({ ok: true, exit: byAddress.get(a) ?? a });
      }
    });
  });
}

/**
 * Through `entry` as `user`: a CONNECT to a target that counts what it gets until the client's FIN, then
 * answers `got N` and closes; sends `body` and ends. What came back after the `200`.
 */
async function sendAndHalfClose(
  entry: Daemon,
  user: string,
  body: Buffer,
): Promise<{ status: string; answer: string }> {
  const counter = net.createServer((c) => {
    let n = 0;
    c.on('error', () => {});
    c.on('data', (d: Buffer) => (n += d.length));
    c.on('end', () => c.end(`got ${n}\n`));
  });
  await new Promise<void>((r) => counter.listen(0, '127.0.0.1', () => r()));
  try {
    const [host, port] = entry.httpProxy.split(':') as [string, string];
    const s = net.connect({ host, port: Number(port), allowHalfOpen: true });
    let got = '';
    const done = new Promise<void>((r) => s.on('end', () => r()));
    s.on('data', (d: Buffer) => (got += d.toString('latin1')));
    s.on('connect', () =>
      s.write(
        `CONNECT 127.0.0.1:${(counter.address() as net.AddressInfo).port} HTTP/1.1\r\nProxy-Authorization: Basic ${Buffer.from(`${user}:${PASSWORD}`).toString('base64')}\r\n\r\n`,
      ),
    );
    while (!got.includes('\r\n\r\n')) await sleep(5);
    s.end(body);
    await done;
    s.destroy();
    const end = got.indexOf('\r\n\r\n');
    return { status: got.slice(0, 12), answer: got.slice(end + 4) };
  } finally {
    counter.close();
  }
}

/** An HTTP origin that answers each request with the address it came from (the exit's egress) and its path. */
function httpOrigin(): Promise<http.Server> {
  const s = http.createServer((req, res) => {
    let body = 0;
    req.on('data', (d: Buffer) => (body += d.length));
    req.on('end', () => res.end(`from ${req.socket.remoteAddress?.replace(/^::ffff:/, '')} ${req.url} body ${body}\n`));
  });
  return new Promise((r) => s.listen(0, '127.0.0.1', () => r(s)));
}

/** curl through the entry's HTTP proxy: its stdout, or its error. */
function curl(entry: Daemon, user: string, urls: string[]): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(
      'curl',
      ['-sS', '--max-time', '10', '--noproxy', '', '-x', `http://${user}:${PASSWORD}@${entry.httpProxy}`, ...urls],
      (e, out, err) => resolve({ code: e ? ((e as { code?: number }).code ?? 1) : 0, out, err }),
    );
  });
}

/**
 * A relay on the hop's path that records every byte each way (the exit advertises it with --hop-advertise):
 * what an observer between an entry and an exit sees.
 */
async function recordingRelay(): Promise<{
  port: number;
  to: { port: number };
  conns: Array<{ up: Buffer[]; down: Buffer[] }>;
  close(): void;
}> {
  const conns: Array<{ up: Buffer[]; down: Buffer[] }> = [];
  const to = { port: 0 };
  const server = net.createServer({ allowHalfOpen: true }, (c) => {
    const rec = { up: [] as Buffer[], down: [] as Buffer[] };
    conns.push(rec);
    const u = net.connect({ port: to.port, host: '127.0.0.1', allowHalfOpen: true });
    for (const [a, b, into] of [
      [c, u, rec.up],
      [u, c, rec.down],
    ] as const) {
      a.on('data', (d: Buffer) => {
        into.push(Buffer.from(d));
        b.write(d);
      });
      a.on('end', () => b.end());
      a.on('error', () => b.destroy());
      a.on('close', () => b.destroy());
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { port: (server.address() as net.AddressInfo).port, to, conns, close: () => server.close() };
}

/** TCP ports a process listens on (ss -ltnp). */
function listeningPorts(pid: number): number[] {
  const out = execFileSync('ss', ['-Hltnp'], { encoding: 'utf8' });
  return out
    .split('\n')
    .filter((l) => l.includes(`pid=${pid},`))
    .map((l) => Number(/:(\d+)\s/.exec(l.split(/\s+/)[3] + ' ')?.[1]));
}

describe.skipIf(skip)('entry and exit nodes on one PostgreSQL', () => {
  let pg: PgCluster;
  let url: string;
  let first: string;
  let target: net.Server;
  const exits = new Map<string, Daemon>();
  const entries: Daemon[] = [];
  const relays: Array<{ close(): void }> = [];
  const tgt = () => `127.0.0.1:${(target.address() as net.AddressInfo).port}`;

  const startExit = async (name: keyof typeof EGRESS, location: string, extra: string[] = []) => {
    const d = await startDaemon({
      dataDir: await dataDirFor('sqlite'),
      args: [
        '--database-url',
        url,
        '--role',
        'exit',
        '--location',
        location,
        '--hop-listen',
        '127.0.0.1:0',
        '--node-name',
        `exit-${name}`,
        '--egress-address',
        EGRESS[name],
        '--allow-private-targets',
        ...extra,
      ],
    });
    exits.set(name, d);
    return d;
  };

  type LogRecord = {
    node: string;
    exit?: string;
    exit_moved_from?: string | null;
    decision: string;
    reason: string | null;
    protocol?: string;
    datagrams_up?: number;
    datagrams_down?: number;
  };
  /** The connection-log records of a username, once `ready` says they are all there (5 s at most). */
  async function recordsOf(user: string, ready: (rs: LogRecord[]) => boolean): Promise<LogRecord[]> {
    const t0 = Date.now();
    for (;;) {
      const q = await admin(first, ['connections', '--user', user]);
      const rs = q.stdout
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as LogRecord);
      if (ready(rs) || Date.now() - t0 > 5_000) return rs;
      await sleep(200);
    }
  }

  /** The exits `n` connections as `user` through `entry` came out of (every one must be admitted). */
  async function spread(entry: Daemon, user: string, n: number): Promise<string[]> {
    const out: string[] = [];
    for (let i = 0; i < n; i++) {
      const r = await viaConnect(entry, tgt(), user);
      if (!r.ok) throw new Error(`${user}: ${r.status} ${r.head}`);
      out.push(r.exit);
    }
    return out;
  }

  beforeAll(async () => {
    pg = await startPostgres();
    await makeTemplate(pg.url);
    first = await dataDirFor('postgres', pg.url);
    await makeAccount(first, EMAIL);
    const r = await admin(
      first,
      ['proxy-user', 'create', '--email', EMAIL, '--username', 'alice', '--password-stdin'],
      `${PASSWORD}\n`,
    );
    expect(r.code, r.stderr).toBe(0);
    target = await whoAmI();
    // The first node started migrates the database; its URL serves the others.
    const e1 = await startDaemon({ dataDir: first, args: ['--role', 'entry', '--node-name', 'entry-1'] });
    url = e1.databaseUrl!;
    entries.push(e1);
    await Promise.all([
      startExit('us1', 'us:nyc'),
      startExit('us2', 'US:la', ['--workers', '2']),
      startExit('de1', 'de:berlin'),
    ]);
    entries.push(
      await startDaemon({
        dataDir: await dataDirFor('sqlite'),
        args: ['--database-url', url, '--role', 'entry', '--node-name', 'entry-2', '--workers', '2'],
      }),
    );
    // Both entries see all three exits (the registry is read every second).
    for (const e of entries) {
      const t0 = Date.now();
      for (;;) {
        const seen = new Set(await spread(e, 'alice', 12).catch(() => []));
        if (seen.size === 3) break;
        if (Date.now() - t0 > 10_000) throw new Error(`entry sees only ${[...seen].join(',')}`);
        await sleep(200);
      }
    }
  }, patient(120_000));

  afterAll(async () => {
    await Promise.all([...entries, ...exits.values()].map((d) => d.stop()));
    target?.close();
    for (const r of relays) r.close();
    pg?.destroy();
  });

  it('an exit listens on its API and its hop only', () => {
    const exit = exits.get('de1')!;
    const ports = listeningPorts(exit.proc.pid!);
    expect(ports.sort()).toEqual([Number(new URL(exit.api).port), Number(exit.hop.split(':')[1])].sort());
  });

  it('ready lines: an exit names its hop and opens no customer port; an entry opens no hop', () => {
    const exit = exits.get('de1')!;
    expect(exit.ready).toMatchObject({ event: 'ready', role: 'exit' });
    expect(exit.ready.hop).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(exit.ready).not.toHaveProperty('httpProxy');
    expect(exit.ready).not.toHaveProperty('socks5');
    expect(entries[0]!.ready).toMatchObject({ role: 'entry' });
    expect(entries[0]!.ready).not.toHaveProperty('hop');
    expect(entries[0]!.ready.httpProxy).toMatch(/^127\.0\.0\.1:\d+$/);
  });

  it('targeting by country and city, over CONNECT and SOCKS5, from either entry', async () => {
    for (const e of entries) {
      expect(new Set(await spread(e, 'alice-country-de', 5))).toEqual(new Set(['de1']));
      expect(new Set(await spread(e, 'alice-country-us-city-la', 5))).toEqual(new Set(['us2']));
      expect(new Set(await spread(e, 'alice-city-nyc', 5))).toEqual(new Set(['us1']));
      const us = new Set(await spread(e, 'alice-country-US', 20));
      expect(us).toEqual(new Set(['us1', 'us2'])); // both US exits take traffic
      const port = (target.address() as net.AddressInfo).port;
      expect(await viaSocks(e, port, 'alice-country-de')).toEqual({ ok: true, exit: 'de1' });
      expect(await viaSocks(e, port, 'alice-country-us-city-nyc')).toEqual({ ok: true, exit: 'us1' });
    }
  });

  it("an entry's connection-log records name the exit", async () => {
    await spread(entries[1]!, 'alice-country-de-session-log1', 1);
    const rs = await recordsOf('alice-country-de-session-log1', (x) => x.length > 0);
    expect(rs[0]).toMatchObject({ node: 'entry-2', exit: 'exit-de1', exit_moved_from: null, decision: 'admitted' });
    expect(rs).toHaveLength(1); // once, by the entry: the exit writes no record of it
    const all = await admin(first, ['connections', '--limit', '100000']);
    const nodes = new Set(
      all.stdout
        .split('\n')
        .filter(Boolean)
        .map((l) => (JSON.parse(l) as LogRecord).node),
    );
    expect([...nodes].sort()).toEqual(['entry-1', 'entry-2']);
  });

  it("a refusal the exit answered (the target's, as that exit saw it) is recorded with the exit too", async () => {
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const r = await viaConnect(entries[0]!, `127.0.0.1:${port}`, 'alice-country-de-session-log2');
    expect(r).toMatchObject({ ok: false, status: 502 });
    const rs = await recordsOf('alice-country-de-session-log2', (x) => x.length > 0);
    expect(rs[0]).toMatchObject({
      node: 'entry-1',
      decision: 'refused',
      reason: 'target_refused',
      exit: 'exit-de1',
      exit_moved_from: null,
    });
  });

  it('a tunnel through the hop carries bytes both ways and passes a half-close on', async () => {
    const body = Buffer.alloc(3 * 2 ** 20, 7);
    const r = await sendAndHalfClose(entries[0]!, 'alice-country-de', body);
    expect(r.status).toBe('HTTP/1.1 200');
    expect(r.answer).toBe(`got ${body.length}\n`);
  });

  it('metering counts a tunnel through the hop once, on the entry, to the byte', async () => {
    const made = await admin(
      first,
      ['proxy-user', 'create', '--email', EMAIL, '--username', 'bob', '--password-stdin'],
      `${PASSWORD}\n`,
    );
    expect(made.code, made.stderr).toBe(0);
    for (const e of entries) await waitForProxyUsers(e, 2);
    expect((await sendAndHalfClose(entries[1]!, 'bob-country-de', Buffer.alloc(1_000_000, 9))).answer).toBe(
      'got 1000000\n',
    );
    // Flushed within a second or two; exactly the payload up and the answer down, not twice.
    const t0 = Date.now();
    let row: { bytes_up: number; bytes_down: number } | undefined;
    while (Date.now() - t0 < 8_000) {
      const u = await admin(first, ['usage', '--email', EMAIL]);
      row = (u.json as { rows: Array<{ user: string; bytes_up: number; bytes_down: number }> }).rows.find(
        (x) => x.user === 'bob',
      );
      if (row && row.bytes_up >= 1_000_000) break;
      await sleep(300);
    }
    await sleep(1_500); // a second count would have been flushed by now
    const u = await admin(first, ['usage', '--email', EMAIL]);
    row = (u.json as { rows: Array<{ user: string; bytes_up: number; bytes_down: number }> }).rows.find(
      (x) => x.user === 'bob',
    );
    expect(row).toMatchObject({ bytes_up: 1_000_000, bytes_down: 'got 1000000\n'.length });
  });

  it('a session goes to the same exit from either entry', async () => {
    const placed = new Map<string, string>();
    for (let i = 0; i < 12; i++) {
      const user = `alice-country-us-session-s${i}`;
      const a = await spread(entries[0]!, user, 2);
      const b = await spread(entries[1]!, user, 2);
      expect(new Set([...a, ...b]).size, user).toBe(1);
      placed.set(user, a[0]!);
    }
    // Rendezvous hashing spreads sessions over both US exits.
    expect(new Set(placed.values())).toEqual(new Set(['us1', 'us2']));
  });

  it('no exit matches: 502 destination_unavailable within 100 ms, SOCKS5 0x03, logged no_exit', async () => {
    const r = await viaConnect(entries[0]!, tgt(), 'alice-country-fr');
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.status).toBe(502);
    expect(r.head).toContain('Proxy-Status: proxyd; error=destination_unavailable; details="no exit for country fr"');
    expect(r.ms).toBeLessThan(100);
    const city = await viaConnect(entries[1]!, tgt(), 'alice-country-de-city-paris');
    expect(city.ok ? 200 : city.status).toBe(502);
    if (!city.ok) expect(city.head).toContain('details="no exit for city paris"'); // Germany has an exit, Paris none
    expect(await viaSocks(entries[1]!, (target.address() as net.AddressInfo).port, 'alice-country-fr')).toEqual({
      ok: false,
      reply: 3,
    });
    const id = /X-Request-Id: ([^\r]+)/.exec(r.head)![1]!;
    const t0 = Date.now();
    let reason: string | undefined;
    while (Date.now() - t0 < 5_000 && reason === undefined) {
      const q = await admin(first, ['connections', '--id', id]);
      reason = (q.json as { reason?: string } | null)?.reason;
      if (reason === undefined) await sleep(200);
    }
    expect(reason).toBe('no_exit');
    // /metrics on the entry: the refusals by reason, and its hop links to each exit it knows (what the alerts read).
    const metrics = await (await fetch(`${entries[0]!.api}/metrics`)).text();
    expect(
      Number(/^proxyd_gateway_refusals_total\{reason="no_exit"\} (\d+)/m.exec(metrics)?.[1] ?? 0),
    ).toBeGreaterThanOrEqual(1);
    const links = [...metrics.matchAll(/^proxyd_hop_links\{exit="([^"]+)"\} (\d+)/gm)].map(
      (m) => [m[1], Number(m[2])] as const,
    );
    expect(links.map(([exit]) => exit).sort()).toEqual([...exits.keys()].map((name) => `exit-${name}`).sort());
    for (const [exit, n] of links) expect(n, exit).toBeGreaterThanOrEqual(1);
  });

  it('a second exit of the same name does not start (exit 1, naming it)', async () => {
    const err = await startDaemon({
      dataDir: await dataDirFor('sqlite'),
      args: [
        '--database-url',
        url,
        '--role',
        'exit',
        '--location',
        'de',
        '--hop-listen',
        '127.0.0.1:0',
        '--node-name',
        'exit-de1',
        '--allow-private-targets',
      ],
    }).then(
      () => null,
      (e: Error) => e.message,
    );
    expect(err).toMatch(/exited 1 before ready/);
    expect(err).toContain('--node-name exit-de1: another exit of that name is running');
    // The first one still serves.
    expect((await viaConnect(entries[0]!, tgt(), 'alice-country-de')).ok).toBe(true);
  });

  it('the hop listener refuses a client without the fleet secret: plain TCP, TLS without a proof, HTTP', async () => {
    const [host, port] = exits.get('de1')!.hop.split(':') as [string, string];
    let reached = 0;
    const watch = () => reached++;
    target.on('connection', watch);
    const hear = (s: net.Socket) =>
      new Promise<{ said: string; closed: boolean }>((resolve) => {
        let said = '';
        s.on('error', () => {});
        s.on('data', (d: Buffer) => (said += d.toString('latin1')));
        s.on('close', () => resolve({ said, closed: true }));
        setTimeout(() => {
          s.destroy();
          resolve({ said, closed: false });
        }, 3_000);
      });
    try {
      // Today's cleartext lines, as an old entry (or anyone) would send them: no greeting, no answer.
      const plain = net.connect(Number(port), host);
      plain.write(`AUTH ${'0'.repeat(64)}\nDIAL ${tgt().replace(':', ' ')} - 0\n`);
      const p = await hear(plain);
      expect(p.said).not.toMatch(/PROXYD|OK/);
      expect(p.closed).toBe(true);
      // A TLS client that completes the handshake (it may: the certificate is no secret) but has no proof.
      const t = tls.connect({ host, port: Number(port), rejectUnauthorized: false, ALPNProtocols: ['proxyd-hop/2'] });
      t.on('secureConnect', () => t.write(`AUTH ${'0'.repeat(64)}\nDIAL ${tgt().replace(':', ' ')} - 0\n`));
      expect(await hear(t)).toEqual({ said: '', closed: true });
      // An HTTP client on the hop port gets nothing either.
      const h = net.connect(Number(port), host);
      h.write(`CONNECT ${tgt()} HTTP/1.1\r\n\r\n`);
      expect((await hear(h)).said).not.toContain('200');
      expect(reached).toBe(0);
    } finally {
      target.removeListener('connection', watch);
    }
    const metrics = await (await fetch(`${exits.get('de1')!.api}/metrics`)).text();
    expect(Number(/^proxyd_hop_refused_total (\d+)/m.exec(metrics)?.[1] ?? 0)).toBeGreaterThanOrEqual(3);
  });

  it('plain proxied HTTP through an entry: one request, three from keep-alive clients, each answered and recorded with the exit', async () => {
    const origin = await httpOrigin();
    const base = `http://127.0.0.1:${(origin.address() as net.AddressInfo).port}`;
    try {
      for (const e of entries) {
        const one = await curl(e, 'alice-country-de-session-fwd1', [`${base}/one`]);
        expect(one, one.err).toMatchObject({ code: 0, out: 'from 127.0.0.13 /one body 0\n' });
        // curl with several URLs (it reuses its connection where it can: here it reconnects after each close).
        const three = await curl(e, 'alice-country-de', [`${base}/a`, `${base}/b`, `${base}/c`]);
        expect(three, three.err).toMatchObject({
          code: 0,
          out: ['a', 'b', 'c'].map((x) => `from 127.0.0.13 /${x} body 0\n`).join(''),
        });
      }
      // An HTTP library with a keep-alive agent, as it sends requests through a proxy (absolute-form).
      const [host, port] = entries[0]!.httpProxy.split(':') as [string, string];
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        for (const [i, method] of (['GET', 'POST', 'GET'] as const).entries()) {
          const body = await new Promise<string>((resolve, reject) => {
            const req = http.request(
              {
                host,
                port: Number(port),
                method,
                path: `${base}/k${i}`,
                agent,
                headers: {
                  'Proxy-Authorization': `Basic ${Buffer.from(`alice-country-de:${PASSWORD}`).toString('base64')}`,
                },
              },
              (res) => {
                let b = '';
                res.on('data', (d: Buffer) => (b += d.toString()));
                res.on('end', () => resolve(`${res.statusCode} ${res.headers.connection} ${b}`));
              },
            );
            req.setTimeout(10_000, () => req.destroy(new Error('no answer')));
            req.on('error', reject);
            req.end(method === 'POST' ? 'x'.repeat(1000) : undefined);
          });
          expect(body).toBe(`200 close from 127.0.0.13 /k${i} body ${method === 'POST' ? 1000 : 0}\n`);
        }
      } finally {
        agent.destroy();
      }
      const rs = await recordsOf('alice-country-de-session-fwd1', (x) => x.length >= 2);
      expect(rs).toHaveLength(2);
      for (const r of rs) expect(r).toMatchObject({ exit: 'exit-de1', decision: 'admitted', protocol: 'http' });
    } finally {
      origin.close();
    }
  });

  it(
    'on the wire between entry and exit: a TLS 1.3 handshake, then no target, username, DIAL line or HTTP text; a replay reaches nothing',
    async () => {
      const relay = await recordingRelay();
      const origin = await httpOrigin();
      const marker = `MARKER-${Math.random().toString(36).slice(2)}`;
      try {
        const fr = await startExit('fr1', 'fr', ['--hop-advertise', `127.0.0.1:${relay.port}`]);
        relay.to.port = Number(fr.hop.split(':')[1]);
        // Each worker of an entry learns of the exit on its own, and the kernel picks the worker per connection:
        // eight answers in a row (1 in 128 that a worker that does not know it yet was never asked).
        for (const e of entries) {
          const t0 = Date.now();
          for (let inRow = 0; inRow < 8;) {
            inRow = (await viaConnect(e, tgt(), 'alice-country-fr')).ok ? inRow + 1 : 0;
            if (Date.now() - t0 > 10_000) throw new Error('the entry does not reach the exit through the relay');
            if (inRow === 0) await sleep(200);
          }
        }
        // Tunnels carrying the marker, over each protocol.
        const r1 = await sendAndHalfClose(
          entries[0]!,
          'alice-country-fr-session-wire',
          Buffer.from(`${marker} over CONNECT`),
        );
        expect(r1.answer).toMatch(/^got \d+\n$/);
        const originUrl = `http://127.0.0.1:${(origin.address() as net.AddressInfo).port}/${marker}`;
        const f = await curl(entries[1]!, 'alice-country-fr', ['-H', `X-Marker: ${marker}`, '-d', marker, originUrl]);
        expect(f.out).toBe(`from 127.0.0.15 /${marker} body ${marker.length}\n`);
        expect(await viaSocks(entries[0]!, (target.address() as net.AddressInfo).port, 'alice-country-fr')).toEqual({
          ok: true,
          exit: 'fr1',
        });

        expect(relay.conns.length).toBeGreaterThan(0);
        const all = Buffer.concat(relay.conns.flatMap((c) => [...c.up, ...c.down])).toString('latin1');
        for (const plain of [
          marker,
          'alice',
          'DIAL',
          'AUTH',
          'PING',
          'HTTP/1.1',
          'X-Marker',
          '127.0.0.1',
          String((target.address() as net.AddressInfo).port),
        ]) {
          expect(all.includes(plain), plain).toBe(false);
        }
        for (const c of relay.conns.filter((x) => x.up.length > 0 && x.down.length > 0)) {
          const up = Buffer.concat(c.up);
          const down = Buffer.concat(c.down);
          expect(up[0]).toBe(0x16); // a TLS handshake record: the ClientHello
          expect(down[0]).toBe(0x16); // the ServerHello…
          expect(down.subarray(0, 200).includes(Buffer.from([0x00, 0x2b, 0x00, 0x02, 0x03, 0x04]))).toBe(true); // …choosing TLS 1.3
        }

        // A replay of a recorded entry → exit stream, sent to the exit's hop port: no target is reached.
        let reached = 0;
        const watch = () => reached++;
        target.on('connection', watch);
        try {
          for (const c of relay.conns.slice(0, 5)) {
            const s = net.connect(relay.to.port, '127.0.0.1');
            s.on('error', () => {});
            s.on('connect', () => s.write(Buffer.concat(c.up)));
            await new Promise<void>((r) => {
              s.on('close', () => r());
              setTimeout(() => {
                s.destroy();
                r();
              }, 1_000);
            });
          }
          await sleep(200);
          expect(reached).toBe(0);
        } finally {
          target.removeListener('connection', watch);
        }
      } finally {
        relays.push(relay); // the fr exit is reached through it from now on (the rotation test below)
        origin.close();
      }
    },
    patient(60_000),
  );

  it(
    'rotate-secret and rotate-cert while a tunnel streams: it is not cut, new tunnels keep working, entries pin the new certificate within 2 s',
    async () => {
      // A tunnel through the fr exit that streams in the background all along.
      const counter = net.createServer({ allowHalfOpen: true }, (c) => {
        let n = 0;
        c.on('error', () => {});
        c.on('data', (d: Buffer) => (n += d.length));
        c.on('end', () => c.end(`got ${n}\n`));
      });
      await new Promise<void>((r) => counter.listen(0, '127.0.0.1', () => r()));
      const [host, port] = entries[0]!.httpProxy.split(':') as [string, string];
      const s = net.connect({ host, port: Number(port), allowHalfOpen: true });
      let got = '';
      s.on('data', (d: Buffer) => (got += d.toString('latin1')));
      const ended = new Promise<void>((r) => s.on('end', () => r()));
      s.write(
        `CONNECT 127.0.0.1:${(counter.address() as net.AddressInfo).port} HTTP/1.1\r\nProxy-Authorization: Basic ${Buffer.from(`alice-country-fr:${PASSWORD}`).toString('base64')}\r\n\r\n`,
      );
      while (!got.includes('\r\n\r\n')) await sleep(5);
      expect(got.slice(0, 12)).toBe('HTTP/1.1 200');
      let sent = 0;
      const chunk = Buffer.alloc(64 * 1024, 3);
      const streaming = setInterval(() => {
        s.write(chunk);
        sent += chunk.length;
      }, 20);
      // New tunnels all along, through both entries.
      let stop = false;
      const failures: string[] = [];
      let made = 0;
      const began = Date.now();
      const newTunnels = (async () => {
        while (!stop) {
          for (const e of entries) {
            const r = await viaConnect(e, tgt(), 'alice-country-fr').catch((err: Error) => ({
              ok: false as const,
              status: 0,
              head: err.message,
              ms: 0,
            }));
            if (!r.ok)
              failures.push(
                `${r.status} ${/details="[^"]*"/.exec(r.head)?.[0] ?? r.head.split('\r\n')[0]} at ${Date.now() - began} ms`,
              );
            else made++;
          }
        }
      })();
      try {
        const rs = await admin(first, ['fleet', 'rotate-secret']);
        expect(rs.code, rs.stderr).toBe(0);
        expect(rs.json).toEqual({ rotated: true });
        await sleep(1_500);
        const before = JSON.parse(
          (await admin(first, ['exits'])).stdout.split('\n').find((l) => l.includes('"exit-fr1"'))!,
        ) as { fingerprints: string[] };
        const t0 = Date.now();
        const rc = await admin(first, ['fleet', 'rotate-cert', '--node', 'exit-fr1']);
        expect(rc.code, rc.stderr).toBe(0);
        const returned = Date.now();
        expect(rc.json).toMatchObject({ node: 'exit-fr1', previous: before.fingerprints[0] });
        expect(rc.json.fingerprint).toMatch(/^[0-9a-f]{64}$/);
        expect(rc.json.fingerprint).not.toBe(before.fingerprints[0]);
        expect(returned - t0).toBeLessThan(15_000);
        // Every entry pins the new certificate alone within 2 s of the command returning.
        for (const e of entries) {
          const seen = () =>
            e.logs.some(
              (l) =>
                l.includes('"exit_certificate_changed"') &&
                l.includes('"exit-fr1"') &&
                l.includes(`"fingerprints":["${rc.json.fingerprint}"]`),
            );
          while (!seen() && Date.now() - returned < 2_000) await sleep(50);
          expect(seen(), e.logs.filter((l) => l.includes('exit_certificate')).join('\n')).toBe(true);
        }
        await sleep(1_000);
        const after = await admin(first, ['exits']);
        expect(after.stdout).toContain(`"fingerprints":["${rc.json.fingerprint}"]`);
      } finally {
        stop = true;
        await newTunnels;
        clearInterval(streaming);
      }
      expect(
        failures.slice(0, 5),
        `${failures.length} failures; ${failures.at(-1)}\n${entries[0]!.logs
          .filter((l) => /exit_|hop_/.test(l))
          .slice(-12)
          .join('\n')}\n${exits
          .get('fr1')!
          .logs.filter((l) => /hop|exit/.test(l))
          .slice(-12)
          .join('\n')}`,
      ).toEqual([]);
      expect(made).toBeGreaterThan(10);
      // The streaming tunnel was never cut: every byte arrived.
      s.end();
      await ended;
      counter.close();
      expect(got.slice(got.indexOf('\r\n\r\n') + 4)).toBe(`got ${sent}\n`);
      // New tunnels after both rotations.
      expect((await viaConnect(entries[1]!, tgt(), 'alice-country-fr')).ok).toBe(true);
    },
    patient(60_000),
  );

  it(
    'rotate-cert on an exit with two workers sharing its data dir: no new tunnel fails, both serve the new certificate',
    async () => {
      let stop = false;
      const failures: string[] = [];
      let made = 0;
      const newTunnels = (async () => {
        while (!stop) {
          for (const e of entries) {
            const r = await viaConnect(e, tgt(), 'alice-country-us-city-la').catch((err: Error) => ({
              ok: false as const,
              status: 0,
              head: err.message,
              ms: 0,
            }));
            if (!r.ok)
              failures.push(
                `${r.status} ${/details="[^"]*"/.exec(r.head)?.[0] ?? r.head.split('\r\n')[0]} at ${new Date().toISOString()}`,
              );
            else made++;
          }
        }
      })();
      try {
        const rc = await admin(first, ['fleet', 'rotate-cert', '--node', 'exit-us2']);
        expect(rc.code, rc.stderr).toBe(0);
        await sleep(2_000);
      } finally {
        stop = true;
        await newTunnels;
      }
      expect(
        failures.slice(0, 5),
        `${failures.length} failures\n${entries.flatMap((e) => e.logs.filter((l) => /exit_|hop_/.test(l)).slice(-8)).join('\n')}`,
      ).toEqual([]);
      expect(made).toBeGreaterThan(10);
    },
    patient(60_000),
  );

  /** The next `n` bytes a socket receives (a SOCKS5 control connection's replies), within 5 s. */
  function byteReader(s: net.Socket): (n: number) => Promise<Buffer> {
    let buf = Buffer.alloc(0);
    s.on('data', (d: Buffer) => (buf = Buffer.concat([buf, d])));
    return async (n) => {
      const t0 = Date.now();
      while (buf.length < n) {
        if (Date.now() - t0 > 5_000) throw new Error(`socks: ${buf.length} of ${n} bytes`);
        await sleep(5);
      }
      const out = buf.subarray(0, n);
      buf = buf.subarray(n);
      return out;
    };
  }

  /** One datagram (its SOCKS5 UDP header included) through a fresh association on `entry`: the answer, or null within 1.5 s. */
  async function udpOnce(entry: Daemon, user: string, datagram: Buffer): Promise<Buffer | null> {
    const client = dgram.createSocket('udp4');
    await new Promise<void>((r) => client.bind(0, '127.0.0.1', r));
    const [host, port] = entry.socks.split(':') as [string, string];
    const control = net.connect(Number(port), host);
    try {
      const need = byteReader(control);
      const u = Buffer.from(user);
      const p = Buffer.from(PASSWORD);
      control.write(
        Buffer.concat([
          Buffer.from([5, 1, 2, 1, u.length]),
          u,
          Buffer.from([p.length]),
          p,
          Buffer.from([5, 3, 0, 1, 0, 0, 0, 0, 0, 0]),
        ]),
      );
      await need(4);
      const rep = await need(10);
      expect(rep[1]).toBe(0);
      const answer = new Promise<Buffer | null>((resolve) => {
        client.once('message', (m) => resolve(m));
        setTimeout(() => resolve(null), 1_500);
      });
      client.send(datagram, rep.readUInt16BE(8), '127.0.0.1');
      return await answer;
    } finally {
      control.destroy();
      client.close();
    }
  }

  it('SOCKS5 UDP through an entry: the exit is chosen by the username, datagrams leave from its egress, answers come back; recorded on the entry', async () => {
    const echo = await udpTargetSocket(); // outside the relay ports: a local address there is a relay, refused
    const from: string[] = [];
    echo.on('message', (m, r) => {
      from.push(r.address);
      echo.send(m, r.port, r.address);
    });
    const client = dgram.createSocket('udp4');
    await new Promise<void>((r) => client.bind(0, '127.0.0.1', r));
    const inbox: Buffer[] = [];
    client.on('message', (m) => inbox.push(m));
    const [host, port] = entries[1]!.socks.split(':') as [string, string];
    const control = net.connect(Number(port), host);
    try {
      const need = byteReader(control);
      control.write(Buffer.from([5, 1, 2]));
      await need(2);
      const u = Buffer.from('alice-country-de-session-udp1');
      const p = Buffer.from(PASSWORD);
      control.write(Buffer.concat([Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]));
      expect([...(await need(2))]).toEqual([1, 0]);
      control.write(Buffer.from([5, 3, 0, 1, 0, 0, 0, 0, 0, 0]));
      const rep = await need(10);
      expect(rep[1]).toBe(0);
      const relayPort = rep.readUInt16BE(8);
      const ep = (echo.address() as net.AddressInfo).port;
      for (const text of ['one', 'two', 'three']) {
        client.send(
          Buffer.concat([Buffer.from([0, 0, 0, 1, 127, 0, 0, 1, ep >> 8, ep & 255]), Buffer.from(text)]),
          relayPort,
          '127.0.0.1',
        );
        const n = inbox.length;
        const t0 = Date.now();
        while (inbox.length === n && Date.now() - t0 < 3_000) await sleep(5);
        expect(inbox[n]?.subarray(10).toString()).toBe(text);
      }
      expect(new Set(from)).toEqual(new Set([EGRESS.de1])); // out of the German exit, not the entry
    } finally {
      control.destroy();
      client.close();
      echo.close();
    }
    const rs = await recordsOf('alice-country-de-session-udp1', (x) => x.length > 0);
    expect(rs[0]).toMatchObject({ node: 'entry-2', exit: 'exit-de1', protocol: 'socks5-udp', decision: 'admitted' });
    expect(rs[0]).toMatchObject({ datagrams_up: 3, datagrams_down: 3 });
  });

  it("through an entry, a datagram to the entry's own listeners or relay ports never leaves (as on a `both` node)", async () => {
    const policyDrops = async () => {
      const text = await (await fetch(`${entries[0]!.api}/metrics`)).text();
      return Number(/^proxyd_udp_dropped_total\{reason="policy"\} (\d+)/m.exec(text)?.[1] ?? 0);
    };
    const before = await policyDrops();
    const header = (host: number[] | string, port: number) => {
      if (typeof host === 'string')
        return Buffer.concat([
          Buffer.from([0, 0, 0, 3, host.length]),
          Buffer.from(host),
          Buffer.from([port >> 8, port & 255]),
        ]);
      return Buffer.from([0, 0, 0, 1, ...host, port >> 8, port & 255]);
    };
    const socksPort = Number(entries[0]!.socks.split(':')[1]);
    // Its SOCKS listener, a relay port of its range on a local address (by literal and by `localhost`).
    for (const h of [header([127, 0, 0, 1], socksPort), header([127, 0, 0, 1], 40_000), header('localhost', 44_999)]) {
      expect(
        await udpOnce(entries[0]!, 'alice-country-de', Buffer.concat([h, Buffer.from('to the entry itself')])),
      ).toBeNull();
    }
    expect(await policyDrops()).toBe(before + 3);
  });

  it("through an entry, the account's denied network holds for a name the exit resolves into it (and is lifted again)", async () => {
    const set = await admin(first, ['policy', 'set', '--email', EMAIL, '--deny', '127.0.0.0/8']);
    expect(set.code, set.stderr).toBe(0);
    try {
      const port = (target.address() as net.AddressInfo).port;
      // localhost is resolved by the exit (its /etc/hosts): 127.0.0.1, in the denied network.
      const t0 = Date.now();
      let r = await viaConnect(entries[0]!, `localhost:${port}`, 'alice-country-de');
      while (r.ok && Date.now() - t0 < 3_000) {
        await sleep(100); // the rule reaches the exit's view within a second
        r = await viaConnect(entries[0]!, `localhost:${port}`, 'alice-country-de');
      }
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.status).toBe(403);
        expect(r.head).toContain('details="target denied by account policy"');
      }
      const literal = await viaConnect(entries[1]!, tgt(), 'alice-country-us');
      expect(literal.ok ? 200 : literal.status).toBe(403); // a literal is judged at the entry already
      // A SOCKS5 UDP datagram to the same name through the entry: the exit resolves it and drops it too (the
      // association carries the account to the exit; it did not, and the datagram went out).
      const echo = await udpTargetSocket();
      const got: string[] = [];
      echo.on('message', (m, r) => {
        got.push(m.toString());
        echo.send(m, r.port, r.address);
      });
      try {
        const ep = (echo.address() as net.AddressInfo).port;
        const name = Buffer.from('localhost');
        const answer = await udpOnce(
          entries[0]!,
          'alice-country-de',
          Buffer.concat([
            Buffer.from([0, 0, 0, 3, name.length]),
            name,
            Buffer.from([ep >> 8, ep & 255]),
            Buffer.from('to a denied network'),
          ]),
        );
        expect(answer).toBeNull();
        expect(got).toEqual([]);
      } finally {
        echo.close();
      }
    } finally {
      const off = await admin(first, ['policy', 'set', '--email', EMAIL, '--deny', 'none']);
      expect(off.code, off.stderr).toBe(0);
    }
    const t0 = Date.now();
    while (!(await viaConnect(entries[0]!, tgt(), 'alice-country-de')).ok) {
      if (Date.now() - t0 > 5_000) throw new Error('the rule was not lifted');
      await sleep(100);
    }
  });

  it(
    'a killed exit leaves selection within 3 s and its sessions move; a new exit takes traffic within 3 s of its ready line',
    async () => {
      // Sessions placed on us1 before it dies.
      const onUs1: string[] = [];
      for (let i = 0; onUs1.length < 3 && i < 40; i++) {
        const user = `alice-country-us-session-k${i}`;
        if ((await spread(entries[0]!, user, 1))[0] === 'us1') onUs1.push(user);
      }
      expect(onUs1.length).toBe(3);
      exits.get('us1')!.proc.kill('SIGKILL');
      await exits.get('us1')!.exited;
      const killedAt = Date.now();
      // Every connection after the kill is admitted (a hop that fails before the exit answers is retried on
      // another exit); from 3 s on, none goes to us1.
      let lastUs1 = 0;
      while (Date.now() - killedAt < 4_000) {
        for (const e of entries) {
          const r = await viaConnect(e, tgt(), 'alice-country-us').catch((err: Error) => {
            throw new Error(`${err.message} at ${Date.now() - killedAt} ms:\n${e.logs.slice(-20).join('\n')}`);
          });
          expect(r.ok, JSON.stringify(r)).toBe(true);
          if (r.ok && r.exit === 'us1') lastUs1 = Date.now() - killedAt;
        }
      }
      expect(lastUs1).toBeLessThan(3_000);
      for (const user of onUs1) {
        expect(new Set([...(await spread(entries[0]!, user, 2)), ...(await spread(entries[1]!, user, 2))])).toEqual(
          new Set(['us2']),
        );
      }
      // The connection log says so: the entry's record of a moved session names the exit it had before.
      const moved = await recordsOf(onUs1[0]!, (rs) => rs.some((r) => r.exit_moved_from === 'exit-us1'));
      expect(moved.find((r) => r.exit_moved_from === 'exit-us1')).toMatchObject({
        node: 'entry-1',
        exit: 'exit-us2',
        decision: 'admitted',
      });

      // The operator's view of the registry: the killed exit's row is stale, the others live.
      const listed = await admin(first, ['exits']);
      expect(listed.code, listed.stderr).toBe(0);
      const byNode = new Map(
        listed.stdout
          .split('\n')
          .filter(Boolean)
          .map((l) => {
            const r = JSON.parse(l) as { node: string; state: string; country: string; hop: string };
            return [r.node, r] as const;
          }),
      );
      expect(byNode.get('exit-us1')).toMatchObject({ state: 'stale', country: 'us' });
      expect(byNode.get('exit-de1')).toMatchObject({
        state: 'live',
        country: 'de',
        city: 'berlin',
        hop: exits.get('de1')!.hop,
      });
      // --format table: aligned columns (the state column starts at one offset on every line).
      const table = (await admin(first, ['exits', '--format', 'table'])).stdout.trimEnd().split('\n');
      expect(table.length).toBe(byNode.size + 1);
      const stateAt = table[0]!.indexOf('state');
      for (const l of table.slice(1)) expect(l.slice(stateAt), l).toMatch(/^(live|stale)$/);

      const us3 = await startExit('us3', 'us');
      const readyAt = Date.now();
      void us3;
      let firstAt = -1;
      while (firstAt < 0 && Date.now() - readyAt < 6_000) {
        for (const e of entries) {
          const r = await viaConnect(e, tgt(), 'alice-country-us');
          if (r.ok && r.exit === 'us3' && firstAt < 0) firstAt = Date.now() - readyAt;
        }
      }
      expect(firstAt).toBeGreaterThanOrEqual(0);
      expect(firstAt).toBeLessThan(3_000);
    },
    patient(60_000),
  );

  it(
    'an exit that stops answering (SIGSTOP, its sockets still open) leaves selection within 3 s; tunnels waiting on it go elsewhere',
    async () => {
      const us3 = exits.get('us3')!;
      us3.proc.kill('SIGSTOP');
      const stoppedAt = Date.now();
      try {
        let lastUs3 = 0;
        const slow: number[] = [];
        while (Date.now() - stoppedAt < 4_500) {
          const r = await viaConnect(entries[0]!, tgt(), 'alice-country-us').catch((err: Error) => {
            throw new Error(
              `${err.message} at ${Date.now() - stoppedAt} ms:\n${entries[0]!.logs.slice(-12).join('\n')}`,
            );
          });
          expect(r.ok, JSON.stringify(r)).toBe(true);
          if (r.ok && r.exit === 'us3') lastUs3 = Date.now() - stoppedAt;
          if (r.ms > 500) slow.push(Math.round(r.ms));
        }
        expect(lastUs3).toBe(0); // a stopped exit answers no DIAL: nothing comes out of it
        // A tunnel sent to it before its probes failed waited at most until they did (about 3 s), then went to us2.
        expect(Math.max(0, ...slow)).toBeLessThan(3_500);
        const after = await spread(entries[1]!, 'alice-country-us', 6);
        expect(new Set(after)).toEqual(new Set(['us2']));
      } finally {
        us3.proc.kill('SIGCONT');
      }
      // Back: it takes traffic again.
      const t0 = Date.now();
      let back = false;
      while (!back && Date.now() - t0 < 6_000)
        back = (await spread(entries[0]!, 'alice-country-us', 4)).includes('us3');
      expect(back).toBe(true);
    },
    patient(30_000),
  );
});
