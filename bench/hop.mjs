#!/usr/bin/env node
// What the entry → exit hop (SPEC 13) costs at set-up and in throughput (docs/BENCHMARKS.md, "Entry → exit
// hop"). Run after `npm run build`. Every node runs as shipped (`node --max-semi-space-size=8 bin/proxyd
// serve`, connection log and metering on) on a PostgreSQL 15 cluster of the bench's own (a temp dir, made
// and destroyed by the run); every tunnel is an HTTP CONNECT with credentials (`bench-user-country-us`).
//
//   node bench/hop.mjs [--reps 3] [--lat-n 2000] [--remote-lat-n 200] [--size-mib 256] [--delay-ms 15]
//                      [--rate-ms 1500] [--link auto|netem|tun] [--no-remote]
//
// 1. One host (loopback): a `both` node, and an entry → exit pair. Per round: --lat-n sequential set-ups
//    (connect → CONNECT → 200 → first echoed byte) through each, interleaved with direct connections to the
//    target; "added" = proxied percentile − direct percentile; the hop's own = entry/exit − both. Then one
//    tunnel carrying --size-mib up and one carrying --size-mib down, each as a ratio of a direct transfer
//    right before it, with each node's CPU s/GiB relayed (/proc); and 8 loops opening tunnels for --rate-ms
//    (tunnels/s; CPU µs per tunnel of the node(s)).
// 2. Across "regions": the exit, a `both` node and the target in a network namespace, joined to the root
//    namespace (entry and client) by a link of --delay-ms one way per direction (2 × that RTT). Set-up and
//    one-tunnel throughput through entry → exit, against the remote `both` node reached directly across the
//    same link, and against a direct connection across it (--remote-lat-n set-ups per path per round). The link is a veth pair with `tc netem delay` on
//    each end (--link netem); a kernel without sch_netem gets a userspace delay line instead (--link tun: two
//    TUN devices, MTU 65,000, joined by a small python3 process that holds every packet --delay-ms). Needs
//    root and `ip netns`; otherwise part 2 is skipped with the reason and part 1 still runs.
// --reps rounds alternate the paths; figures are the median over rounds and their range. Prints JSON on
// stdout and the tables on stderr. Everything it makes (namespace, links, processes, cluster, temp dirs) is
// removed at exit, on error and on SIGINT/SIGTERM.
//
// The target is bench/gateway.mjs's target role, listening on the host given (--host).
import { spawn, spawnSync } from 'node:child_process';
import { appendFileSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { countFor, freePort, med, pct, pumpUpload, runInfo, sleep, treeCpu } from './lib/tunnel-bench.mjs';
import { len64 } from './target-protocol.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TARGET = path.join(ROOT, 'bench/gateway.mjs');
const PROXYD = path.join(ROOT, 'bin/proxyd');
const PG_BIN = '/usr/lib/postgresql/15/bin';
const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1] : def);
const REPS = Number(opt('reps', 3));
const LAT_N = Number(opt('lat-n', 2000));
const REMOTE_LAT_N = Number(opt('remote-lat-n', 200));
const SIZE = Number(opt('size-mib', 256)) * 2 ** 20;
const DELAY_MS = Number(opt('delay-ms', 15));
const RATE_MS = Number(opt('rate-ms', 1500));
const LINK = opt('link', 'auto');
const REMOTE = !argv.includes('--no-remote');
const LOOPS = 8;
const PASSWORD = 'bench hop password 123';
const USER = 'bench-user-country-us';
const NS_ROOT_IP = '10.200.0.1';
const NS_IP = '10.200.0.2';

const r3 = (x) => +x.toFixed(3);
const log = (...a) => console.error('[hop]', ...a);

// ------------------------------------------------------------------ clean-up

/** Synchronous undo steps, newest first: run at the end, on error, on SIGINT/SIGTERM. */
const undo = [];
function cleanUp() {
  while (undo.length) {
    try {
      undo.pop()();
    } catch {
      /* best effort */
    }
  }
}

function sh(cmd, args, { check = true } = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 60_000 });
  if (check && r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${(r.stderr || r.stdout || r.error?.message || '').trim()}`);
  return r;
}

// ------------------------------------------------------------------ PostgreSQL

const asRoot = process.getuid?.() === 0;
function pgRun(cmd, args) {
  const bin = path.join(PG_BIN, cmd);
  return sh(asRoot ? 'runuser' : bin, asRoot ? ['-u', 'postgres', '--', bin, ...args] : args);
}

/** A throwaway cluster listening on `hosts`; `allow`: extra CIDRs let in (trust), e.g. the namespace's. */
async function startPostgres(hosts, allow) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'proxyd-hop-pg-'));
  undo.push(() => rmSync(dir, { recursive: true, force: true }));
  if (asRoot) {
    const id = (flag) => Number(sh('id', [flag, 'postgres']).stdout.trim());
    chownSync(dir, id('-u'), id('-g'));
  }
  const data = path.join(dir, 'data');
  pgRun('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C']);
  for (const cidr of allow) appendFileSync(path.join(data, 'pg_hba.conf'), `host all all ${cidr} trust\n`);
  const port = await freePort();
  const conf = { port, listen_addresses: hosts.join(','), unix_socket_directories: dir, max_connections: 200, fsync: 'off', full_page_writes: 'off', synchronous_commit: 'off' };
  const opts = Object.entries(conf).map(([k, v]) => `-c ${k}=${v}`).join(' ');
  pgRun('pg_ctl', ['-D', data, '-l', path.join(dir, 'log'), '-o', opts, '-w', '-t', '60', 'start']);
  undo.push(() => pgRun('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']));
  return {
    port,
    url: (host, db) => `postgres://postgres@${host}:${port}/${db}`,
    createDb: (name) => sh(path.join(PG_BIN, 'createdb'), ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', name]),
  };
}

// ------------------------------------------------------------------ processes

const dirs = [];
function tempDir(prefix) {
  const d = mkdtempSync(path.join(os.tmpdir(), prefix));
  dirs.push(d);
  return d;
}
undo.push(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** Spawns a child (optionally in namespace `ns`) and waits for its first stdout line (JSON). */
async function spawnJson(cmd, args, { ns = null, label = cmd } = {}) {
  const [c, a] = ns ? ['ip', ['netns', 'exec', ns, cmd, ...args]] : [cmd, args];
  const p = spawn(c, a, { stdio: ['pipe', 'pipe', 'pipe'] });
  undo.push(() => p.exitCode === null && p.signalCode === null && p.kill('SIGKILL'));
  const tail = [];
  createInterface({ input: p.stderr }).on('line', (l) => {
    if (process.env.BENCH_DEBUG) console.error(`[${label}] ${l}`);
    tail.push(l);
    if (tail.length > 30) tail.shift();
  });
  const first = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${label}: no ready line in 30 s\n${tail.join('\n')}`)), 30_000);
    p.once('exit', (code) => (clearTimeout(timer), reject(new Error(`${label} exited ${code}\n${tail.join('\n')}`))));
    createInterface({ input: p.stdout }).once('line', (l) => (clearTimeout(timer), resolve(JSON.parse(l))));
  });
  const stop = () =>
    new Promise((r) => {
      if (p.exitCode !== null || p.signalCode !== null) return r();
      p.once('exit', r);
      p.kill('SIGTERM');
      setTimeout(() => p.kill('SIGKILL'), 10_000).unref();
    });
  return { p, info: first, stop, tail };
}

const hostPort = (s) => {
  const i = s.lastIndexOf(':');
  return { host: s.slice(0, i), port: Number(s.slice(i + 1)) };
};

function admin(dataDir, dbUrl, args, input = '') {
  const r = spawnSync(process.execPath, [PROXYD, 'admin', ...args, '--data-dir', dataDir, '--database-url', dbUrl], { input, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`proxyd admin ${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

/** One proxyd node; `ns`: in that network namespace. Listeners on `host`. */
async function startNode({ name, role, dbUrl, host = '127.0.0.1', ns = null }) {
  const dataDir = tempDir(`proxyd-hop-${name}-`);
  const roleArgs = role === 'exit' ? ['--role', 'exit', '--location', 'us', '--hop-listen', `${host}:0`] : role === 'entry' ? ['--role', 'entry'] : ['--role', 'both', '--location', 'us'];
  const args = ['--max-semi-space-size=8', PROXYD, 'serve', '--data-dir', dataDir, '--database-url', dbUrl, '--api-listen', '127.0.0.1:0',
    '--http-proxy-listen', `${host}:0`, '--socks-listen', `${host}:0`, '--allow-private-targets', '--log-level', 'warn', '--node-name', name, ...roleArgs];
  const n = await spawnJson(process.execPath, args, { ns, label: name });
  return { ...n, name, http: n.info.httpProxy ? hostPort(n.info.httpProxy) : null, hop: n.info.hop ?? null };
}

async function startTarget(host, ns = null) {
  const t = await spawnJson(process.execPath, [TARGET, '--role', 'target', '--host', host], { ns, label: `target ${host}` });
  return { ...t, host, port: t.info.port, stop: () => new Promise((r) => (t.p.exitCode !== null ? r() : (t.p.once('exit', r), t.p.stdin.end()))) };
}

// ------------------------------------------------------------------ the link between "regions"

/**
 * A namespace and a link to it with DELAY_MS one way each direction. Returns { ns, kind, note } or throws
 * with the reason it cannot.
 */
async function makeRegion() {
  if (!asRoot) throw new Error('not root (ip netns needs CAP_SYS_ADMIN / CAP_NET_ADMIN)');
  for (const c of ['ip', 'tc']) if (sh('which', [c], { check: false }).status !== 0) throw new Error(`${c} not found`);
  const taken = sh('ip', ['-4', '-o', 'addr'], { check: false }).stdout;
  if (/\b10\.200\.0\.[0-3]\//.test(taken)) throw new Error('10.200.0.0/30 is already on an interface here');
  const ns = `proxyd-hop-${process.pid}`;
  const tag = String(process.pid % 1_000_000);
  sh('ip', ['netns', 'add', ns]);
  undo.push(() => {
    // Whatever still runs in it first (a process left in a deleted namespace keeps it alive).
    for (const pid of sh('ip', ['netns', 'pids', ns], { check: false }).stdout.split('\n').filter(Boolean)) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    sh('ip', ['netns', 'del', ns], { check: false });
  });
  sh('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);

  const tryNetem = async () => {
    const a = `hopv${tag}a`;
    const b = `hopv${tag}b`;
    sh('ip', ['link', 'add', a, 'type', 'veth', 'peer', 'name', b]);
    const drop = () => sh('ip', ['link', 'del', a], { check: false });
    undo.push(drop);
    sh('ip', ['link', 'set', b, 'netns', ns]);
    if (DELAY_MS > 0) {
      // limit: room for a 30 ms window of 64 KiB segments, so the queue, not the delay, never drops.
      const q = sh('tc', ['qdisc', 'add', 'dev', a, 'root', 'netem', 'delay', `${DELAY_MS}ms`, 'limit', '10000'], { check: false });
      if (q.status !== 0) {
        drop();
        throw new Error(`tc netem: ${(q.stderr || '').trim()}`);
      }
      sh('ip', ['netns', 'exec', ns, 'tc', 'qdisc', 'add', 'dev', b, 'root', 'netem', 'delay', `${DELAY_MS}ms`, 'limit', '10000']);
    }
    return { a, b, kind: 'netem', note: `veth pair, tc netem delay ${DELAY_MS}ms on each end` };
  };

  const tryTun = async () => {
    if (sh('which', ['python3'], { check: false }).status !== 0) throw new Error('python3 not found (for the TUN delay line)');
    const a = `hopt${tag}a`;
    const b = `hopt${tag}b`;
    const line = await spawnJson('python3', ['-c', DELAY_LINE, a, b, String(DELAY_MS)], { label: 'delay line' });
    undo.push(() => line.p.exitCode === null && line.p.kill('SIGKILL'));
    sh('ip', ['link', 'set', b, 'netns', ns]);
    sh('ip', ['link', 'set', a, 'mtu', '65000']);
    sh('ip', ['-n', ns, 'link', 'set', b, 'mtu', '65000']);
    return { a, b, kind: 'tun', line, note: `two TUN devices (MTU 65,000) joined by a python3 delay line holding each packet ${DELAY_MS} ms` };
  };

  let link;
  if (LINK === 'tun') link = await tryTun();
  else {
    try {
      link = await tryNetem();
    } catch (e) {
      if (LINK === 'netem') throw e;
      log(`netem unavailable (${e.message.split('\n')[0]}); using the TUN delay line`);
      link = await tryTun();
      link.note += ` (netem unavailable here: ${e.message.split('\n')[0]})`;
    }
  }
  sh('ip', ['addr', 'add', `${NS_ROOT_IP}/30`, 'dev', link.a]);
  sh('ip', ['link', 'set', link.a, 'up']);
  sh('ip', ['-n', ns, 'addr', 'add', `${NS_IP}/30`, 'dev', link.b]);
  sh('ip', ['-n', ns, 'link', 'set', link.b, 'up']);
  // The link answers (a TCP connect to a closed port comes back refused after one RTT).
  const t0 = performance.now();
  await new Promise((resolve, reject) => {
    const s = net.connect(9, NS_IP);
    s.setTimeout(5000, () => (s.destroy(), reject(new Error('the namespace does not answer over the link'))));
    s.on('error', (e) => (e.code === 'ECONNREFUSED' ? resolve() : reject(e)));
    s.on('connect', () => (s.destroy(), resolve()));
  });
  log(`link up (${link.kind}): first round trip ${(performance.now() - t0).toFixed(1)} ms`);
  return { ns, ...link };
}

// Each packet read from one TUN device is written to the other DELAY ms later (FIFO per direction; the
// delay is constant, so order is kept). Exits when its stdin closes.
const DELAY_LINE = String.raw`
import os, fcntl, struct, select, time, sys, collections
def tun(name):
    fd = os.open('/dev/net/tun', os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, 0x400454ca, struct.pack('16sH', name.encode(), 0x0001 | 0x1000))  # TUNSETIFF, IFF_TUN|IFF_NO_PI
    return fd
a = tun(sys.argv[1]); b = tun(sys.argv[2]); delay = float(sys.argv[3]) / 1000
qs = {a: collections.deque(), b: collections.deque()}
other = {a: b, b: a}
ep = select.epoll()
for fd in (a, b): ep.register(fd, select.EPOLLIN)
ep.register(0, select.EPOLLIN | select.EPOLLHUP)
print('{"ready":true}', flush=True)
mono = time.monotonic
while True:
    now = mono(); due = None
    for fd, q in qs.items():
        while q and q[0][0] <= now:
            try: os.write(other[fd], q.popleft()[1])
            except OSError: pass
        if q and (due is None or q[0][0] < due): due = q[0][0]
    for fd, ev in ep.poll(-1 if due is None else max(0.0, due - mono())):
        if fd == 0: sys.exit(0)
        q = qs[fd]; t = mono() + delay
        while True:
            try: q.append((t, os.read(fd, 65536)))
            except BlockingIOError: break
`;

// ------------------------------------------------------------------ client

/**
 * One connection through `via` (a proxy {host, port}; null: direct) to `target`, then `payload` sent:
 * resolves with the socket once `want` bytes came back after the handshake (0: at once).
 */
function open(via, target, payload, want) {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: via ? via.host : target.host, port: via ? via.port : target.port, noDelay: true });
    let stage = via ? 'hs' : 'data';
    let buf = Buffer.alloc(0);
    let got = 0;
    s.setTimeout(30_000, () => (s.destroy(), reject(new Error(`timeout (${via ? `${via.host}:${via.port}` : 'direct'})`))));
    s.on('error', reject);
    const start = () => {
      stage = 'data';
      s.write(payload);
      if (want === 0) resolve(s);
    };
    s.on('connect', () => {
      if (!via) return start();
      const t = `${target.host}:${target.port}`;
      s.write(`CONNECT ${t} HTTP/1.1\r\nHost: ${t}\r\nProxy-Authorization: Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}\r\n\r\n`);
    });
    s.on('data', (d) => {
      if (stage === 'data') {
        got += d.length;
        if (got >= want && want > 0) resolve(s);
        return;
      }
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      if (!buf.subarray(0, 12).toString().startsWith('HTTP/1.1 200')) return reject(new Error(buf.subarray(0, end).toString()));
      if (buf.length > end + 4) got += buf.length - end - 4;
      start();
    });
  });
}

/** Set-up to the first echoed byte (ms). */
async function echoOnce(via, target) {
  const t0 = performance.now();
  const s = await open(via, target, Buffer.from('Ex'), 1);
  const ms = performance.now() - t0;
  s.destroy();
  return ms;
}

/** `n` rounds of: a direct set-up, then each path's (their order swapped every round). */
async function setupSample(paths, target, n) {
  const out = { direct: [], ...Object.fromEntries(paths.map((p) => [p.key, []])) };
  for (let i = 0; i < n; i++) {
    out.direct.push(await echoOnce(null, target));
    for (const p of i % 2 ? [...paths].reverse() : paths) out[p.key].push(await echoOnce(p.via, target));
  }
  return out;
}

/** One tunnel: SIZE bytes up (U) or down (D); MB/s. */
async function transfer(via, target, dir) {
  const t0 = performance.now();
  if (dir === 'up') {
    const s = await open(via, target, len64('U', SIZE), 0);
    await pumpUpload(s, SIZE);
  } else {
    const s = await open(via, target, len64('D', SIZE), 0);
    await new Promise((resolve, reject) => {
      let got = 0;
      s.removeAllListeners('data');
      s.on('data', (d) => {
        got += d.length;
        if (got >= SIZE) (s.destroy(), resolve());
      });
      s.on('error', reject);
      s.on('close', () => (got >= SIZE ? resolve() : reject(new Error(`down: ${got} of ${SIZE} bytes`))));
    });
  }
  return SIZE / 1e6 / ((performance.now() - t0) / 1000);
}

/** LOOPS loops opening a tunnel, echoing a byte, closing, for `ms`: tunnels/s and how many. */
async function rate(via, target, ms) {
  const done = await countFor(ms, LOOPS, () => echoOnce(via, target));
  return { perSec: done / (ms / 1000), done };
}

// ------------------------------------------------------------------ a fleet on one database

/** A database with the bench's account and proxy user. */
function makeDatabase(pg, name) {
  pg.createDb(name);
  const url = pg.url('127.0.0.1', name);
  const dir = tempDir('proxyd-hop-admin-');
  admin(dir, url, ['account', 'create', '--email', 'bench@example.com', '--password-stdin', '--verified'], 'bench account password 123\n');
  admin(dir, url, ['proxy-user', 'create', '--email', 'bench@example.com', '--username', 'bench-user', '--password-stdin'], `${PASSWORD}\n`);
  return url;
}

/** Until a CONNECT through `via` to `target` is answered 200 (an entry sees its exit within ~1–2 s). */
async function waitAdmitted(via, target, what) {
  const t0 = Date.now();
  for (;;) {
    try {
      await echoOnce(via, target);
      return;
    } catch (e) {
      if (Date.now() - t0 > 20_000) throw new Error(`${what}: not admitted within 20 s: ${e.message}`);
      await sleep(200);
    }
  }
}

// ------------------------------------------------------------------ main

const summary = (xs, d = 3) => ({ median: +med(xs).toFixed(d), min: +Math.min(...xs).toFixed(d), max: +Math.max(...xs).toFixed(d) });

async function main() {
  const load0 = os.loadavg();
  const t00 = Date.now();

  let region = null;
  let skipReason = null;
  if (REMOTE) {
    try {
      region = await makeRegion();
    } catch (e) {
      skipReason = e.message.split('\n')[0];
      log(`part 2 (across regions) skipped: ${skipReason}`);
    }
  } else skipReason = '--no-remote';

  const pg = await startPostgres(region ? ['127.0.0.1', NS_ROOT_IP] : ['127.0.0.1'], region ? [`${NS_ROOT_IP}/30`] : []);
  const localDb = makeDatabase(pg, 'hop_local');

  // ---- part 1: one host
  const target = await startTarget('127.0.0.1');
  const tgt = { host: '127.0.0.1', port: target.port };
  // The first node migrates nothing (admin did); start the exit first so the entry sees it on its first read.
  const exit1 = await startNode({ name: 'exit-local', role: 'exit', dbUrl: localDb });
  const [both1, entry1] = await Promise.all([startNode({ name: 'both-local', role: 'both', dbUrl: localDb }), startNode({ name: 'entry-local', role: 'entry', dbUrl: localDb })]);
  const local = [
    { key: 'both', via: both1.http, procs: { both: both1.p.pid } },
    { key: 'hop', via: entry1.http, procs: { entry: entry1.p.pid, exit: exit1.p.pid } },
  ];
  await waitAdmitted(entry1.http, tgt, 'local entry');

  // ---- part 2: across the link
  let remote = null;
  let rtgt = null;
  if (region) {
    const remoteDbRoot = makeDatabase(pg, 'hop_remote');
    const remoteDbNs = remoteDbRoot.replace('127.0.0.1', NS_ROOT_IP);
    const rtarget = await startTarget(NS_IP, region.ns);
    rtgt = { host: NS_IP, port: rtarget.port };
    const exit2 = await startNode({ name: 'exit-remote', role: 'exit', dbUrl: remoteDbNs, host: NS_IP, ns: region.ns });
    const [both2, entry2] = await Promise.all([
      startNode({ name: 'both-remote', role: 'both', dbUrl: remoteDbNs, host: NS_IP, ns: region.ns }),
      startNode({ name: 'entry-remote', role: 'entry', dbUrl: remoteDbRoot }),
    ]);
    remote = {
      target: rtarget,
      nodes: [exit2, both2, entry2],
      paths: [
        { key: 'both', via: both2.http, procs: { both: both2.p.pid } },
        { key: 'hop', via: entry2.http, procs: { entry: entry2.p.pid, exit: exit2.p.pid } },
      ],
    };
    await waitAdmitted(entry2.http, rtgt, 'remote entry');
  }

  log('warm-up');
  for (const p of local) for (let i = 0; i < 300; i++) await echoOnce(p.via, tgt);
  for (let i = 0; i < 300; i++) await echoOnce(null, tgt);
  if (remote) for (const p of remote.paths) for (let i = 0; i < 20; i++) await echoOnce(p.via, rtgt);

  const three = () => ({ direct: [], both: [], hop: [] });
  const acc = () => ({ p50: three(), p99: three(), up: three(), down: three(), ratio: { up: three(), down: three() }, gib: { both: { both: [] }, hop: { entry: [], exit: [] } } });
  const L = { ...acc(), tps: three(), cpu: { both: [], hop: [] } };
  const R = acc();

  /** One round of single-tunnel transfers, each paired with a direct one right before it; CPU s/GiB per node. */
  async function transferRound(A, paths, target, r) {
    const cpu = Object.fromEntries(paths.map((p) => [p.key, Object.fromEntries(Object.keys(p.procs).map((n) => [n, 0]))]));
    for (const dir of ['up', 'down']) {
      for (const p of r % 2 ? [...paths].reverse() : paths) {
        const d = await transfer(null, target, dir);
        const c0 = Object.fromEntries(Object.entries(p.procs).map(([n, pid]) => [n, treeCpu([pid])]));
        const x = await transfer(p.via, target, dir);
        for (const [n, pid] of Object.entries(p.procs)) cpu[p.key][n] += treeCpu([pid]) - c0[n];
        A[dir].direct.push(d);
        A[dir][p.key].push(x);
        A.ratio[dir][p.key].push(x / d);
      }
    }
    for (const p of paths) for (const n of Object.keys(p.procs)) A.gib[p.key][n].push(cpu[p.key][n] / ((2 * SIZE) / 2 ** 30));
  }

  for (let r = 0; r < REPS; r++) {
    log(`round ${r + 1}/${REPS}: one host: ${LAT_N} set-ups per path`);
    const s = await setupSample(local, tgt, LAT_N);
    for (const k of ['direct', 'both', 'hop']) (L.p50[k].push(med(s[k])), L.p99[k].push(pct(s[k], 99)));
    log(`round ${r + 1}/${REPS}: one host: one tunnel, ${SIZE / 2 ** 20} MiB up and down per path`);
    await transferRound(L, local, tgt, r);
    log(`round ${r + 1}/${REPS}: one host: tunnels/s, ${LOOPS} loops for ${RATE_MS} ms per path`);
    L.tps.direct.push((await rate(null, tgt, RATE_MS)).perSec);
    for (const p of r % 2 ? [...local].reverse() : local) {
      const pids = Object.values(p.procs);
      const c0 = treeCpu(pids);
      const x = await rate(p.via, tgt, RATE_MS);
      L.tps[p.key].push(x.perSec);
      L.cpu[p.key].push(((treeCpu(pids) - c0) / x.done) * 1e6);
    }
    if (remote) {
      log(`round ${r + 1}/${REPS}: across the link: ${REMOTE_LAT_N} set-ups per path`);
      const t = await setupSample(remote.paths, rtgt, REMOTE_LAT_N);
      for (const k of ['direct', 'both', 'hop']) (R.p50[k].push(med(t[k])), R.p99[k].push(pct(t[k], 99)));
      log(`round ${r + 1}/${REPS}: across the link: one tunnel, ${SIZE / 2 ** 20} MiB up and down per path`);
      await transferRound(R, remote.paths, rtgt, r);
    }
  }
  const load1 = os.loadavg();

  // Per round: added = path − direct; the hop's own = entry/exit − both.
  const added = (A, q, k) => A[q][k].map((x, i) => x - A[q].direct[i]);
  const hopOwn = (A, q) => A[q].hop.map((x, i) => x - A[q].both[i]);
  const mean2 = (R2, k) => R2.up[k].map((x, i) => (x + R2.down[k][i]) / 2);
  const part = (A, extra) => ({
    direct: { setupP50: summary(A.p50.direct), setupP99: summary(A.p99.direct), upMBs: summary(A.up.direct, 0), downMBs: summary(A.down.direct, 0) },
    rows: ['both', 'hop'].map((k) => ({
      path: k,
      setupAddedP50: summary(added(A, 'p50', k)),
      setupAddedP99: summary(added(A, 'p99', k)),
      upMBs: summary(A.up[k], 0),
      downMBs: summary(A.down[k], 0),
      upVsDirect: summary(A.ratio.up[k], 2),
      downVsDirect: summary(A.ratio.down[k], 2),
      vsDirect: summary(mean2(A.ratio, k), 2),
      cpuSecPerGiB: Object.fromEntries(Object.entries(A.gib[k]).map(([n, xs]) => [n, summary(xs, 2)])),
      ...extra(k),
    })),
    hopAddedP50: summary(hopOwn(A, 'p50')),
    hopAddedP99: summary(hopOwn(A, 'p99')),
  });
  const report = {
    ...runInfo(argv, load0, load1),
    reps: REPS,
    local: {
      latN: LAT_N,
      ...part(L, (k) => ({ tunnelsPerSec: summary(L.tps[k], 0), cpuUsPerTunnel: summary(L.cpu[k], 0) })),
      directTunnelsPerSec: summary(L.tps.direct, 0),
      hopTargetMet: med(hopOwn(L, 'p50')) <= 1,
    },
    remote: remote
      ? { link: region.note, delayMsEachWay: DELAY_MS, latN: REMOTE_LAT_N, ...part(R, () => ({})) }
      : { skipped: skipReason },
    seconds: Math.round((Date.now() - t00) / 1000),
  };

  await Promise.all([both1, entry1, exit1, ...(remote ? remote.nodes : [])].map((n) => n.stop()));
  await target.stop();
  if (remote) await remote.target.stop();
  console.log(JSON.stringify(report, null, 2));
  printTables(report);
}

function printTables(rep) {
  const c = (s, d = 3) => `${s.median.toFixed(d)} (${s.min.toFixed(d)}–${s.max.toFixed(d)})`;
  const name = { both: '`both` node', hop: 'entry → exit' };
  const gib = (r) => Object.entries(r.cpuSecPerGiB).map(([n, x]) => `${n} ${c(x, 2)}`).join(' + ');
  const out = [];
  out.push(`\nOne host (loopback), ${rep.reps} rounds, median (range); ${rep.local.latN} set-ups per path per round`);
  out.push(`direct set-up p50 ${c(rep.local.direct.setupP50)} ms, p99 ${c(rep.local.direct.setupP99)} ms; direct MB/s up ${c(rep.local.direct.upMBs, 0)}, down ${c(rep.local.direct.downMBs, 0)}`);
  out.push('| path | set-up added p50 (ms) | set-up added p99 (ms) | 1 tunnel up vs direct | 1 tunnel down vs direct | CPU s/GiB relayed | tunnels/s | CPU µs per tunnel |');
  out.push('|---|---|---|---|---|---|---|---|');
  for (const r of rep.local.rows) out.push(`| ${name[r.path]} | ${c(r.setupAddedP50)} | ${c(r.setupAddedP99)} | ${c(r.upVsDirect, 2)} | ${c(r.downVsDirect, 2)} | ${gib(r)} | ${c(r.tunnelsPerSec, 0)} | ${c(r.cpuUsPerTunnel, 0)} |`);
  out.push(`| the hop's own (entry → exit − both) | ${c(rep.local.hopAddedP50)} | ${c(rep.local.hopAddedP99)} | | | | | |`);
  out.push(`hop adds ≤ 1 ms p50 on one host: ${rep.local.hopTargetMet ? 'met' : 'NOT met'}`);
  if (rep.remote.skipped) out.push(`\nAcross regions: skipped (${rep.remote.skipped})`);
  else {
    out.push(`\nAcross regions: ${rep.remote.link}; ${rep.remote.latN} set-ups per path per round`);
    out.push(`direct set-up p50 ${c(rep.remote.direct.setupP50)} ms, p99 ${c(rep.remote.direct.setupP99)} ms; direct MB/s up ${c(rep.remote.direct.upMBs, 0)}, down ${c(rep.remote.direct.downMBs, 0)}`);
    out.push('| path | set-up added p50 (ms) | set-up added p99 (ms) | 1 tunnel up vs direct | 1 tunnel down vs direct | CPU s/GiB relayed |');
    out.push('|---|---|---|---|---|---|');
    for (const r of rep.remote.rows) out.push(`| ${r.path === 'both' ? '`both` node across the link' : 'entry here → exit across the link'} | ${c(r.setupAddedP50)} | ${c(r.setupAddedP99)} | ${c(r.upVsDirect, 2)} | ${c(r.downVsDirect, 2)} | ${gib(r)} |`);
    out.push(`| entry → exit − remote \`both\` | ${c(rep.remote.hopAddedP50)} | ${c(rep.remote.hopAddedP99)} | | | |`);
  }
  out.push(`\nload average before ${rep.loadBefore.join(' / ')}, after ${rep.loadAfter.join(' / ')}; ${rep.seconds} s`);
  console.error(out.join('\n'));
}

let stopping = false;
const bail = (code) => {
  if (stopping) return;
  stopping = true;
  cleanUp();
  process.exit(code);
};
process.on('SIGINT', () => (log('interrupted: cleaning up'), bail(130)));
process.on('SIGTERM', () => (log('terminated: cleaning up'), bail(143)));
process.on('exit', cleanUp);
main().then(
  () => (cleanUp(), process.exit(0)),
  (e) => (console.error(e), bail(1)),
);
