#!/usr/bin/env node
// What the entry → exit hop (docs/operations.md, "Entry and exit nodes") costs at set-up and in throughput
// (docs/benchmarks/hop.md, "Entry → exit hop"). Run after `npm run build`. Every node runs as shipped (`node
// --max-semi-space-size=8 bin/proxyd serve`, connection log and metering on) on a PostgreSQL 15 cluster of the
// bench's own (a temp dir, made and destroyed by the run); every tunnel is an HTTP CONNECT with credentials
// (`bench-user-country-us`).
//
//   node bench/hop.mjs [--reps 3] [--lat-n 2000] [--remote-lat-n 200] [--size-mib 256] [--remote-size-mib N]
//                      [--delay-ms 15] [--rate-ms 1500] [--setup-gap-ms 0] [--link auto|netem|tun] [--no-remote]
//                      [--baseline DIR] [--cpu-prof DIR] [--no-tls-floor]
//
// 1. One host (loopback): a `both` node, and an entry → exit pair (and the baseline's, --baseline). Per
//    round: --lat-n sequential set-ups (connect → CONNECT → 200 → first echoed byte) through each,
//    interleaved with direct connections to the target (--setup-gap-ms: a pause after each); "added" =
//    proxied percentile − direct percentile; the hop's own = entry/exit − both; the JSON also has each path's
//    p50 to the `200` (setupTo200P50). Then one tunnel carrying --size-mib up and one carrying --size-mib
//    down, each as a ratio of a direct transfer right before it, with each node's CPU s/GiB relayed (/proc);
//    and 8 loops opening tunnels for --rate-ms (tunnels/s; CPU µs per tunnel of the node(s)).
//    The TLS floor (unless --no-tls-floor): the same one-tunnel transfers, in the same rounds and order
//    rotation, through raw Node TLS between two processes (bench/peers/tls-pair.mjs: plain TCP in, one TLS
//    1.3 connection per tunnel with a certificate made as the hop's, plain TCP out to the target, pipe()
//    both ways; no proxyd). Reported: its MB/s and CPU s/GiB (both processes), and per round the hop's
//    throughput ÷ the floor's (target ≥ 0.8, up and down) and CPU per GiB ÷ the floor's (target ≤ 1.25).
// 2. Across "regions": the exit, a `both` node and the target in a network namespace, joined to the root
//    namespace (entry and client) by a link of --delay-ms one way per direction (2 × that RTT). Set-up and
//    one-tunnel throughput (--remote-size-mib each way, default --size-mib) through entry → exit, against the
//    remote `both` node reached directly across the same link, and against a direct connection across it
//    (--remote-lat-n set-ups per path per round). The link is a veth pair with `tc netem delay` on
//    each end (--link netem); a kernel without sch_netem gets a userspace delay line instead (--link tun: two
//    TUN devices, MTU 65,000, joined by a small python3 process that holds every packet --delay-ms). Needs
//    root and `ip netns`; otherwise part 2 is skipped with the reason and part 1 still runs.
// --baseline DIR: DIR is a checkout of an earlier build of proxyd (`npm run build` done there; e.g. a `git
//    worktree add` of an older commit with node_modules copied in). Its bin/proxyd runs a second entry → exit
//    pair in each part, on the same PostgreSQL cluster but in databases of its own (made with its own
//    `proxyd admin`: migrations differ), measured in the same rounds as the current pair (set-ups interleaved
//    as above; transfers and tunnels/s in an order rotated each round). The report adds, per round and then
//    median (range): current − baseline set-up p50 and p99 (and p50 to the `200`), throughput current /
//    baseline up and down, and each pair's CPU s/GiB (entry + exit).
// --cpu-prof DIR: the current entry and exit (both parts) run under `node --cpu-prof`; their profiles are
//    written to DIR at the end and their top functions (self time) printed. The profiler slows them: use a
//    run of its own, not the figures of that run.
// --reps rounds alternate the paths; figures are the median over rounds and their range. Prints JSON on
// stdout and the tables on stderr. Everything it makes (namespace, links, processes, cluster, temp dirs) is
// removed at exit, on error and on SIGINT/SIGTERM.
//
// The target is bench/gateway.mjs's target role, listening on the host given (--host).
import { spawn, spawnSync } from 'node:child_process';
import { appendFileSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
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
const REMOTE_SIZE = Number(opt('remote-size-mib', SIZE / 2 ** 20)) * 2 ** 20;
const DELAY_MS = Number(opt('delay-ms', 15));
const RATE_MS = Number(opt('rate-ms', 1500));
const GAP_MS = Number(opt('setup-gap-ms', 0));
const LINK = opt('link', 'auto');
const REMOTE = !argv.includes('--no-remote');
const BASE_DIR = opt('baseline', null) && path.resolve(opt('baseline', null));
const BASE_PROXYD = BASE_DIR && path.join(BASE_DIR, 'bin/proxyd');
const PROF_DIR = opt('cpu-prof', null) && path.resolve(opt('cpu-prof', null));
const FLOOR = !argv.includes('--no-tls-floor');
const TLS_PAIR = path.join(ROOT, 'bench/peers/tls-pair.mjs');
const LOOPS = 8;
const PASSWORD = 'bench hop password 123';
const USER = 'bench-user-country-us';
const NS_ROOT_IP = '10.200.0.1';
const NS_IP = '10.200.0.2';

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
  if (check && r.status !== 0)
    throw new Error(`${cmd} ${args.join(' ')}: ${(r.stderr || r.stdout || r.error?.message || '').trim()}`);
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
  const conf = {
    port,
    listen_addresses: hosts.join(','),
    unix_socket_directories: dir,
    max_connections: 200,
    fsync: 'off',
    full_page_writes: 'off',
    synchronous_commit: 'off',
  };
  const opts = Object.entries(conf)
    .map(([k, v]) => `-c ${k}=${v}`)
    .join(' ');
  pgRun('pg_ctl', ['-D', data, '-l', path.join(dir, 'log'), '-o', opts, '-w', '-t', '60', 'start']);
  undo.push(() => pgRun('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']));
  return {
    port,
    url: (host, db) => `postgres://postgres@${host}:${port}/${db}`,
    createDb: (name) =>
      sh(path.join(PG_BIN, 'createdb'), ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', name]),
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

function admin(dataDir, dbUrl, args, input = '', proxyd = PROXYD) {
  const r = spawnSync(process.execPath, [proxyd, 'admin', ...args, '--data-dir', dataDir, '--database-url', dbUrl], {
    input,
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`proxyd admin ${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

/**
 * One proxyd node; `ns`: in that network namespace. Listeners on `host`. `proxyd`: the build's bin/proxyd
 * (the baseline's for its pair); `prof`: under --cpu-prof (its profile written to PROF_DIR as it stops).
 */
async function startNode({ name, role, dbUrl, host = '127.0.0.1', ns = null, proxyd = PROXYD, prof = false }) {
  const dataDir = tempDir(`proxyd-hop-${name}-`);
  const roleArgs =
    role === 'exit'
      ? ['--role', 'exit', '--location', 'us', '--hop-listen', `${host}:0`]
      : role === 'entry'
        ? ['--role', 'entry']
        : ['--role', 'both', '--location', 'us'];
  const profArgs =
    prof && PROF_DIR ? ['--cpu-prof', `--cpu-prof-dir=${PROF_DIR}`, `--cpu-prof-name=${name}.cpuprofile`] : [];
  const args = [
    '--max-semi-space-size=8',
    ...profArgs,
    proxyd,
    'serve',
    '--data-dir',
    dataDir,
    '--database-url',
    dbUrl,
    '--api-listen',
    '127.0.0.1:0',
    '--http-proxy-listen',
    `${host}:0`,
    '--socks-listen',
    `${host}:0`,
    '--allow-private-targets',
    '--log-level',
    'warn',
    '--node-name',
    name,
    ...roleArgs,
  ];
  const n = await spawnJson(process.execPath, args, { ns, label: name });
  return { ...n, name, http: n.info.httpProxy ? hostPort(n.info.httpProxy) : null, hop: n.info.hop ?? null };
}

async function startTarget(host, ns = null) {
  const t = await spawnJson(process.execPath, [TARGET, '--role', 'target', '--host', host], {
    ns,
    label: `target ${host}`,
  });
  return {
    ...t,
    host,
    port: t.info.port,
    stop: () => new Promise((r) => (t.p.exitCode !== null ? r() : (t.p.once('exit', r), t.p.stdin.end()))),
  };
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
      const q = sh('tc', ['qdisc', 'add', 'dev', a, 'root', 'netem', 'delay', `${DELAY_MS}ms`, 'limit', '10000'], {
        check: false,
      });
      if (q.status !== 0) {
        drop();
        throw new Error(`tc netem: ${(q.stderr || '').trim()}`);
      }
      sh('ip', [
        'netns',
        'exec',
        ns,
        'tc',
        'qdisc',
        'add',
        'dev',
        b,
        'root',
        'netem',
        'delay',
        `${DELAY_MS}ms`,
        'limit',
        '10000',
      ]);
    }
    return { a, b, kind: 'netem', note: `veth pair, tc netem delay ${DELAY_MS}ms on each end` };
  };

  const tryTun = async () => {
    if (sh('which', ['python3'], { check: false }).status !== 0)
      throw new Error('python3 not found (for the TUN delay line)');
    const a = `hopt${tag}a`;
    const b = `hopt${tag}b`;
    const line = await spawnJson('python3', ['-c', DELAY_LINE, a, b, String(DELAY_MS)], { label: 'delay line' });
    undo.push(() => line.p.exitCode === null && line.p.kill('SIGKILL'));
    sh('ip', ['link', 'set', b, 'netns', ns]);
    sh('ip', ['link', 'set', a, 'mtu', '65000']);
    sh('ip', ['-n', ns, 'link', 'set', b, 'mtu', '65000']);
    return {
      a,
      b,
      kind: 'tun',
      line,
      note: `two TUN devices (MTU 65,000) joined by a python3 delay line holding each packet ${DELAY_MS} ms`,
    };
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
 * resolves with the socket once `want` bytes came back after the handshake (0: at once). Its `answeredAt`:
 * when the proxy's `200` came (direct: when it connected).
 */
function open(via, target, payload, want) {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: via ? via.host : target.host, port: via ? via.port : target.port, noDelay: true });
    let stage = via ? 'hs' : 'data';
    let buf = Buffer.alloc(0);
    let got = 0;
    s.setTimeout(
      30_000,
      () => (s.destroy(), reject(new Error(`timeout (${via ? `${via.host}:${via.port}` : 'direct'})`))),
    );
    s.on('error', reject);
    const start = () => {
      stage = 'data';
      s.answeredAt = performance.now();
      s.write(payload);
      if (want === 0) resolve(s);
    };
    s.on('connect', () => {
      if (!via) return start();
      const t = `${target.host}:${target.port}`;
      s.write(
        `CONNECT ${t} HTTP/1.1\r\nHost: ${t}\r\nProxy-Authorization: Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}\r\n\r\n`,
      );
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
      if (!buf.subarray(0, 12).toString().startsWith('HTTP/1.1 200'))
        return reject(new Error(buf.subarray(0, end).toString()));
      if (buf.length > end + 4) got += buf.length - end - 4;
      start();
    });
  });
}

/** Set-up to the first echoed byte (ms); `heads`: where the time to the `200` goes. */
async function echoOnce(via, target, heads = null) {
  const t0 = performance.now();
  const s = await open(via, target, Buffer.from('Ex'), 1);
  const ms = performance.now() - t0;
  s.destroy();
  heads?.push(s.answeredAt - t0);
  return ms;
}

/**
 * `n` rounds of: a direct set-up, then each path's (their order swapped every round), each followed by a
 * pause of --setup-gap-ms. `head`: the same set-ups' times to the `200`.
 */
async function setupSample(paths, target, n) {
  const keys = ['direct', ...paths.map((p) => p.key)];
  const out = { ...Object.fromEntries(keys.map((k) => [k, []])), head: Object.fromEntries(keys.map((k) => [k, []])) };
  for (let i = 0; i < n; i++) {
    out.direct.push(await echoOnce(null, target, out.head.direct));
    if (GAP_MS) await sleep(GAP_MS);
    for (const p of i % 2 ? [...paths].reverse() : paths) {
      out[p.key].push(await echoOnce(p.via, target, out.head[p.key]));
      if (GAP_MS) await sleep(GAP_MS);
    }
  }
  return out;
}

/** One tunnel: `size` bytes up (U) or down (D); MB/s. */
async function transfer(via, target, dir, size) {
  const t0 = performance.now();
  if (dir === 'up') {
    const s = await open(via, target, len64('U', size), 0);
    await pumpUpload(s, size);
  } else {
    const s = await open(via, target, len64('D', size), 0);
    await new Promise((resolve, reject) => {
      let got = 0;
      s.removeAllListeners('data');
      s.on('data', (d) => {
        got += d.length;
        if (got >= size) {
          s.destroy();
          resolve();
        }
      });
      s.on('error', reject);
      s.on('close', () => (got >= size ? resolve() : reject(new Error(`down: ${got} of ${size} bytes`))));
    });
  }
  return size / 1e6 / ((performance.now() - t0) / 1000);
}

/** LOOPS loops opening a tunnel, echoing a byte, closing, for `ms`: tunnels/s and how many. */
async function rate(via, target, ms) {
  const done = await countFor(ms, LOOPS, () => echoOnce(via, target));
  return { perSec: done / (ms / 1000), done };
}

// ------------------------------------------------------------------ a fleet on one database

/** A database with the bench's account and proxy user, made by `proxyd`'s admin (its migrations). */
function makeDatabase(pg, name, proxyd = PROXYD) {
  pg.createDb(name);
  const url = pg.url('127.0.0.1', name);
  const dir = tempDir('proxyd-hop-admin-');
  admin(
    dir,
    url,
    ['account', 'create', '--email', 'bench@example.com', '--password-stdin', '--verified'],
    'bench account password 123\n',
    proxyd,
  );
  admin(
    dir,
    url,
    ['proxy-user', 'create', '--email', 'bench@example.com', '--username', 'bench-user', '--password-stdin'],
    `${PASSWORD}\n`,
    proxyd,
  );
  return url;
}

/**
 * An exit (first, so its entry sees it on its first read) and an entry on `dbRoot` (the exit on `dbNs`,
 * in `ns` on `host` when given); `proxyd`: whose build. Resolves once a CONNECT through the entry is answered.
 */
async function startPair({ tag, dbRoot, dbNs = dbRoot, host, ns = null, proxyd = PROXYD, prof = false, via }) {
  const exit = await startNode({ name: `exit-${tag}`, role: 'exit', dbUrl: dbNs, host, ns, proxyd, prof });
  const entry = await startNode({ name: `entry-${tag}`, role: 'entry', dbUrl: dbRoot, proxyd, prof });
  await waitAdmitted(entry.http, via, `entry-${tag}`);
  return { nodes: [exit, entry], via: entry.http, procs: { entry: entry.p.pid, exit: exit.p.pid } };
}

/** The raw TLS floor's two processes (bench/peers/tls-pair.mjs), as the nodes run (same Node flags); its entry's port. */
async function startTlsPair(target) {
  const run = async (name, args) => {
    const n = await spawnJson(process.execPath, ['--max-semi-space-size=8', TLS_PAIR, ...args], { label: name });
    return {
      ...n,
      stop: () => new Promise((r) => (n.p.exitCode !== null ? r() : (n.p.once('exit', r), n.p.stdin.end()))),
    };
  };
  const exit = await run('tls-exit', [
    '--role',
    'exit',
    '--host',
    '127.0.0.1',
    '--target',
    `${target.host}:${target.port}`,
  ]);
  const entry = await run('tls-entry', [
    '--role',
    'entry',
    '--host',
    '127.0.0.1',
    '--exit',
    `127.0.0.1:${exit.info.port}`,
  ]);
  return {
    nodes: [exit, entry],
    target: { host: '127.0.0.1', port: entry.info.port },
    procs: { entry: entry.p.pid, exit: exit.p.pid },
  };
}

/** The baseline build's short commit, when DIR is a git checkout. */
function baselineRev() {
  const r = spawnSync('git', ['-C', BASE_DIR, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

/** The top functions by self time of a --cpu-prof profile (shares of its busy, non-idle time). */
function profileTop(file, n = 15) {
  const prof = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(prof.nodes.map((x) => [x.id, x.callFrame]));
  const self = new Map();
  prof.samples.forEach((id, i) => {
    const f = byId.get(id);
    const where = f.url ? `${f.url.replace(/^file:\/\//, '').replace(`${ROOT}/`, '')}:${f.lineNumber + 1}` : '';
    const key = `${f.functionName || '(anonymous)'} ${where}`.trim();
    self.set(key, (self.get(key) ?? 0) + (prof.timeDeltas[i] ?? 0));
  });
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const busy = total - (self.get('(idle)') ?? 0);
  const top = [...self.entries()]
    .filter(([k]) => k !== '(idle)')
    .sort((a, b) => b[1] - a[1])
    .slice(0, n);
  return {
    file,
    busySec: +(busy / 1e6).toFixed(2),
    idlePct: +((1 - busy / total) * 100).toFixed(1),
    top: top.map(([fn, us]) => ({ fn, pctOfBusy: +((us / busy) * 100).toFixed(1) })),
  };
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

const summary = (xs, d = 3) => ({
  median: +med(xs).toFixed(d),
  min: +Math.min(...xs).toFixed(d),
  max: +Math.max(...xs).toFixed(d),
});

/** The paths of each part: the `both` node, the current entry → exit pair, and the baseline's (--baseline). */
const KEYS = ['both', 'hop', ...(BASE_DIR ? ['base'] : [])];
/** `xs` started at its `i`-th element: round i puts every path first in turn. */
const turn = (xs, i) => xs.map((_, j) => xs[(i + j) % xs.length]);

async function main() {
  if (BASE_DIR && !existsSync(path.join(BASE_DIR, 'dist')))
    throw new Error(`--baseline ${BASE_DIR}: no dist/ there (run npm run build in it)`);
  if (BASE_DIR && !existsSync(BASE_PROXYD)) throw new Error(`--baseline ${BASE_DIR}: no bin/proxyd there`);
  if (PROF_DIR) mkdirSync(PROF_DIR, { recursive: true });
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

  const pg = await startPostgres(
    region ? ['127.0.0.1', NS_ROOT_IP] : ['127.0.0.1'],
    region ? [`${NS_ROOT_IP}/30`] : [],
  );
  const localDb = makeDatabase(pg, 'hop_local');
  /** Every proxyd node, stopped at the end. */
  const nodes = [];

  // ---- part 1: one host
  const target = await startTarget('127.0.0.1');
  const tgt = { host: '127.0.0.1', port: target.port };
  // The first node migrates nothing (admin did).
  const both1 = await startNode({ name: 'both-local', role: 'both', dbUrl: localDb });
  const hop1 = await startPair({ tag: 'local', dbRoot: localDb, host: '127.0.0.1', prof: true, via: tgt });
  nodes.push(both1, ...hop1.nodes);
  const local = [
    { key: 'both', via: both1.http, procs: { both: both1.p.pid } },
    { key: 'hop', via: hop1.via, procs: hop1.procs },
  ];
  if (BASE_DIR) {
    const base1 = await startPair({
      tag: 'base-local',
      dbRoot: makeDatabase(pg, 'hop_base_local', BASE_PROXYD),
      host: '127.0.0.1',
      proxyd: BASE_PROXYD,
      via: tgt,
    });
    nodes.push(...base1.nodes);
    local.push({ key: 'base', via: base1.via, procs: base1.procs });
  }
  // The raw TLS floor: transfers only (its set-up is not a proxy's), straight to its entry's port.
  const floor = FLOOR ? await startTlsPair(tgt) : null;
  if (floor) nodes.push(...floor.nodes);
  const localTransfer = floor ? [...local, { key: 'raw', via: null, target: floor.target, procs: floor.procs }] : local;

  // ---- part 2: across the link
  let remote = null;
  let rtgt = null;
  if (region) {
    const inNs = (url) => url.replace('127.0.0.1', NS_ROOT_IP);
    const remoteDb = makeDatabase(pg, 'hop_remote');
    const rtarget = await startTarget(NS_IP, region.ns);
    rtgt = { host: NS_IP, port: rtarget.port };
    const both2 = await startNode({
      name: 'both-remote',
      role: 'both',
      dbUrl: inNs(remoteDb),
      host: NS_IP,
      ns: region.ns,
    });
    const hop2 = await startPair({
      tag: 'remote',
      dbRoot: remoteDb,
      dbNs: inNs(remoteDb),
      host: NS_IP,
      ns: region.ns,
      prof: true,
      via: rtgt,
    });
    nodes.push(both2, ...hop2.nodes);
    remote = {
      target: rtarget,
      paths: [
        { key: 'both', via: both2.http, procs: { both: both2.p.pid } },
        { key: 'hop', via: hop2.via, procs: hop2.procs },
      ],
    };
    if (BASE_DIR) {
      const db = makeDatabase(pg, 'hop_base_remote', BASE_PROXYD);
      const base2 = await startPair({
        tag: 'base-remote',
        dbRoot: db,
        dbNs: inNs(db),
        host: NS_IP,
        ns: region.ns,
        proxyd: BASE_PROXYD,
        via: rtgt,
      });
      nodes.push(...base2.nodes);
      remote.paths.push({ key: 'base', via: base2.via, procs: base2.procs });
    }
  }

  log('warm-up');
  for (const p of local) for (let i = 0; i < 300; i++) await echoOnce(p.via, tgt);
  for (let i = 0; i < 300; i++) await echoOnce(null, tgt);
  if (remote) for (const p of remote.paths) for (let i = 0; i < 20; i++) await echoOnce(p.via, rtgt);

  const perKey = () => Object.fromEntries(['direct', ...KEYS, ...(FLOOR ? ['raw'] : [])].map((k) => [k, []]));
  const acc = () => ({
    p50: perKey(),
    p99: perKey(),
    head50: perKey(),
    up: perKey(),
    down: perKey(),
    ratio: { up: perKey(), down: perKey() },
    gib: {},
  });
  const L = { ...acc(), tps: perKey(), cpu: perKey() };
  const R = acc();

  /**
   * One round of single-tunnel transfers, each paired with a direct one right before it; CPU s/GiB per node,
   * and of a pair together ('pair').
   */
  async function transferRound(A, paths, target, r, size) {
    const cpu = Object.fromEntries(
      paths.map((p) => [p.key, Object.fromEntries(Object.keys(p.procs).map((n) => [n, 0]))]),
    );
    for (const dir of ['up', 'down']) {
      for (const p of turn(paths, r)) {
        const d = await transfer(null, target, dir, size);
        const c0 = Object.fromEntries(Object.entries(p.procs).map(([n, pid]) => [n, treeCpu([pid])]));
        const x = await transfer(p.via, p.target ?? target, dir, size);
        for (const [n, pid] of Object.entries(p.procs)) cpu[p.key][n] += treeCpu([pid]) - c0[n];
        A[dir].direct.push(d);
        A[dir][p.key].push(x);
        A.ratio[dir][p.key].push(x / d);
      }
    }
    const perGiB = (sec) => sec / ((2 * size) / 2 ** 30);
    for (const p of paths) {
      const g = (A.gib[p.key] ??= {});
      for (const n of Object.keys(p.procs)) (g[n] ??= []).push(perGiB(cpu[p.key][n]));
      if (Object.keys(p.procs).length > 1)
        (g.pair ??= []).push(perGiB(Object.values(cpu[p.key]).reduce((a, b) => a + b, 0)));
    }
  }

  for (let r = 0; r < REPS; r++) {
    log(`round ${r + 1}/${REPS}: one host: ${LAT_N} set-ups per path`);
    const s = await setupSample(local, tgt, LAT_N);
    for (const k of ['direct', ...KEYS]) {
      L.p50[k].push(med(s[k]));
      L.p99[k].push(pct(s[k], 99));
      L.head50[k].push(med(s.head[k]));
    }
    log(`round ${r + 1}/${REPS}: one host: one tunnel, ${SIZE / 2 ** 20} MiB up and down per path`);
    await transferRound(L, localTransfer, tgt, r, SIZE);
    log(`round ${r + 1}/${REPS}: one host: tunnels/s, ${LOOPS} loops for ${RATE_MS} ms per path`);
    L.tps.direct.push((await rate(null, tgt, RATE_MS)).perSec);
    for (const p of turn(local, r)) {
      const pids = Object.values(p.procs);
      const c0 = treeCpu(pids);
      const x = await rate(p.via, tgt, RATE_MS);
      L.tps[p.key].push(x.perSec);
      L.cpu[p.key].push(((treeCpu(pids) - c0) / x.done) * 1e6);
    }
    if (remote) {
      log(`round ${r + 1}/${REPS}: across the link: ${REMOTE_LAT_N} set-ups per path`);
      const t = await setupSample(remote.paths, rtgt, REMOTE_LAT_N);
      for (const k of ['direct', ...KEYS]) {
        R.p50[k].push(med(t[k]));
        R.p99[k].push(pct(t[k], 99));
        R.head50[k].push(med(t.head[k]));
      }
      log(`round ${r + 1}/${REPS}: across the link: one tunnel, ${REMOTE_SIZE / 2 ** 20} MiB up and down per path`);
      await transferRound(R, remote.paths, rtgt, r, REMOTE_SIZE);
    }
  }
  const load1 = os.loadavg();

  // Per round: added = path − direct; a pair's own = the pair − both; current against baseline = hop − base
  // (set-up) and hop / base (throughput, CPU).
  const minus = (xs, ys) => xs.map((x, i) => x - ys[i]);
  const over = (xs, ys) => xs.map((x, i) => x / ys[i]);
  const added = (A, q, k) => minus(A[q][k], A[q].direct);
  const mean2 = (R2, k) => R2.up[k].map((x, i) => (x + R2.down[k][i]) / 2);
  const part = (A, extra) => ({
    direct: {
      setupP50: summary(A.p50.direct),
      setupP99: summary(A.p99.direct),
      upMBs: summary(A.up.direct, 0),
      downMBs: summary(A.down.direct, 0),
    },
    rows: KEYS.map((k) => ({
      path: k,
      setupP50: summary(A.p50[k]),
      setupP99: summary(A.p99[k]),
      setupTo200P50: summary(A.head50[k]),
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
    hopAddedP50: summary(minus(A.p50.hop, A.p50.both)),
    hopAddedP99: summary(minus(A.p99.hop, A.p99.both)),
    ...(BASE_DIR && {
      baseAddedP50: summary(minus(A.p50.base, A.p50.both)),
      baseAddedP99: summary(minus(A.p99.base, A.p99.both)),
      vsBaseline: {
        setupP50Minus: summary(minus(A.p50.hop, A.p50.base)),
        setupP99Minus: summary(minus(A.p99.hop, A.p99.base)),
        setupTo200P50Minus: summary(minus(A.head50.hop, A.head50.base)),
        upRatio: summary(over(A.up.hop, A.up.base), 2),
        downRatio: summary(over(A.down.hop, A.down.base), 2),
        cpuPerGiBRatio: summary(over(A.gib.hop.pair, A.gib.base.pair), 2),
      },
    }),
  });
  const local1 = part(L, (k) => ({ tunnelsPerSec: summary(L.tps[k], 0), cpuUsPerTunnel: summary(L.cpu[k], 0) }));
  if (BASE_DIR) {
    Object.assign(local1.vsBaseline, {
      tunnelsPerSecRatio: summary(over(L.tps.hop, L.tps.base), 2),
      cpuPerTunnelRatio: summary(over(L.cpu.hop, L.cpu.base), 2),
    });
    local1.vsBaseline.setupTargetMet = local1.vsBaseline.setupP50Minus.median <= 0.3;
    local1.vsBaseline.throughputTargetMet =
      local1.vsBaseline.upRatio.median >= 0.8 && local1.vsBaseline.downRatio.median >= 0.8;
  }
  if (floor) {
    // The hop against raw Node TLS between two processes, per round (docs/benchmarks/hop.md, "TLS floor").
    const g = L.gib.raw;
    const f = {
      upMBs: summary(L.up.raw, 0),
      downMBs: summary(L.down.raw, 0),
      upVsDirect: summary(L.ratio.up.raw, 2),
      downVsDirect: summary(L.ratio.down.raw, 2),
      cpuSecPerGiB: Object.fromEntries(Object.entries(g).map(([n, xs]) => [n, summary(xs, 2)])),
      hopUpRatio: summary(over(L.up.hop, L.up.raw), 2),
      hopDownRatio: summary(over(L.down.hop, L.down.raw), 2),
      hopCpuPerGiBRatio: summary(over(L.gib.hop.pair, g.pair), 2),
      ...(BASE_DIR && {
        baseUpRatio: summary(over(L.up.base, L.up.raw), 2),
        baseDownRatio: summary(over(L.down.base, L.down.raw), 2),
        baseCpuPerGiBRatio: summary(over(L.gib.base.pair, g.pair), 2),
      }),
    };
    f.throughputTargetMet = f.hopUpRatio.median >= 0.8 && f.hopDownRatio.median >= 0.8;
    f.cpuTargetMet = f.hopCpuPerGiBRatio.median <= 1.25;
    local1.tlsFloor = f;
  }
  const remote1 = remote
    ? {
        link: region.note,
        delayMsEachWay: DELAY_MS,
        latN: REMOTE_LAT_N,
        sizeMiB: REMOTE_SIZE / 2 ** 20,
        ...part(R, () => ({})),
      }
    : { skipped: skipReason };
  if (remote) {
    // No round trip added: through the entry still one round trip (2 × DELAY_MS) faster than the remote `both`
    // node (half of one is the margin), and, with a baseline, less than half a round trip over the cleartext pair.
    remote1.noAddedRoundTrip =
      remote1.hopAddedP50.median <= -DELAY_MS && (!BASE_DIR || remote1.vsBaseline.setupP50Minus.median < DELAY_MS);
  }
  const report = {
    ...runInfo(argv, load0, load1),
    reps: REPS,
    setupGapMs: GAP_MS,
    ...(BASE_DIR && { baseline: { dir: BASE_DIR, rev: baselineRev() } }),
    local: {
      latN: LAT_N,
      sizeMiB: SIZE / 2 ** 20,
      ...local1,
      directTunnelsPerSec: summary(L.tps.direct, 0),
      hopTargetMet: med(minus(L.p50.hop, L.p50.both)) <= 1,
    },
    remote: remote1,
    seconds: Math.round((Date.now() - t00) / 1000),
  };

  await Promise.all(nodes.map((n) => n.stop()));
  await target.stop();
  if (remote) await remote.target.stop();
  if (PROF_DIR) {
    report.profiles = {};
    for (const n of ['entry-local', 'exit-local', 'entry-remote', 'exit-remote']) {
      const file = path.join(PROF_DIR, `${n}.cpuprofile`);
      if (existsSync(file)) report.profiles[n] = profileTop(file);
    }
  }
  console.log(JSON.stringify(report, null, 2));
  printTables(report);
}

function printTables(rep) {
  const c = (s, d = 3) => `${s.median.toFixed(d)} (${s.min.toFixed(d)}–${s.max.toFixed(d)})`;
  const base = `entry → exit, baseline${rep.baseline?.rev ? ` ${rep.baseline.rev}` : ''}`;
  const name = { both: '`both` node', hop: 'entry → exit', base };
  const gib = (r) => {
    const g = r.cpuSecPerGiB;
    const each = Object.keys(g)
      .filter((n) => n !== 'pair')
      .map((n) => `${n} ${c(g[n], 2)}`)
      .join(' + ');
    return g.pair ? `${each} = ${c(g.pair, 2)}` : each;
  };
  const row = (p, k) => p.rows.find((r) => r.path === k);
  /** Current against baseline, one part: each pair's figure and, per round, current − or ÷ baseline. */
  const versus = (p, out, withRate) => {
    const [h, b, v] = [row(p, 'hop'), row(p, 'base'), p.vsBaseline];
    out.push(`\nCurrent pair against the baseline pair (${base}), same rounds:`);
    out.push(
      '| | current entry → exit | baseline entry → exit | per round: current − baseline (set-up), current ÷ baseline (the rest) |',
    );
    out.push('|---|---|---|---|');
    out.push(`| set-up p50 (ms) | ${c(h.setupP50)} | ${c(b.setupP50)} | ${c(v.setupP50Minus)} |`);
    out.push(`| set-up p99 (ms) | ${c(h.setupP99)} | ${c(b.setupP99)} | ${c(v.setupP99Minus)} |`);
    out.push(
      `| of which to the \`200\`, p50 (ms) | ${c(h.setupTo200P50)} | ${c(b.setupTo200P50)} | ${c(v.setupTo200P50Minus)} |`,
    );
    out.push(`| 1 tunnel up (MB/s) | ${c(h.upMBs, 0)} | ${c(b.upMBs, 0)} | ${c(v.upRatio, 2)} |`);
    out.push(`| 1 tunnel down (MB/s) | ${c(h.downMBs, 0)} | ${c(b.downMBs, 0)} | ${c(v.downRatio, 2)} |`);
    out.push(
      `| CPU s/GiB, entry + exit | ${c(h.cpuSecPerGiB.pair, 2)} | ${c(b.cpuSecPerGiB.pair, 2)} | ${c(v.cpuPerGiBRatio, 2)} |`,
    );
    if (withRate) {
      out.push(`| tunnels/s | ${c(h.tunnelsPerSec, 0)} | ${c(b.tunnelsPerSec, 0)} | ${c(v.tunnelsPerSecRatio, 2)} |`);
      out.push(
        `| CPU µs per tunnel, entry + exit | ${c(h.cpuUsPerTunnel, 0)} | ${c(b.cpuUsPerTunnel, 0)} | ${c(v.cpuPerTunnelRatio, 2)} |`,
      );
    }
  };
  const out = [];
  const gap = rep.setupGapMs ? `, ${rep.setupGapMs} ms apart` : '';
  out.push(
    `\nOne host (loopback), ${rep.reps} rounds, median (range); ${rep.local.latN} set-ups per path per round${gap}; ${rep.local.sizeMiB} MiB per transfer`,
  );
  out.push(
    `direct set-up p50 ${c(rep.local.direct.setupP50)} ms, p99 ${c(rep.local.direct.setupP99)} ms; direct MB/s up ${c(rep.local.direct.upMBs, 0)}, down ${c(rep.local.direct.downMBs, 0)}`,
  );
  out.push(
    '| path | set-up added p50 (ms) | set-up added p99 (ms) | 1 tunnel up vs direct | 1 tunnel down vs direct | CPU s/GiB relayed | tunnels/s | CPU µs per tunnel |',
  );
  out.push('|---|---|---|---|---|---|---|---|');
  for (const r of rep.local.rows)
    out.push(
      `| ${name[r.path]} | ${c(r.setupAddedP50)} | ${c(r.setupAddedP99)} | ${c(r.upVsDirect, 2)} | ${c(r.downVsDirect, 2)} | ${gib(r)} | ${c(r.tunnelsPerSec, 0)} | ${c(r.cpuUsPerTunnel, 0)} |`,
    );
  out.push(
    `| the hop's own (entry → exit − both) | ${c(rep.local.hopAddedP50)} | ${c(rep.local.hopAddedP99)} | | | | | |`,
  );
  if (rep.baseline)
    out.push(
      `| the baseline hop's own (baseline − both) | ${c(rep.local.baseAddedP50)} | ${c(rep.local.baseAddedP99)} | | | | | |`,
    );
  out.push(`hop adds ≤ 1 ms p50 on one host: ${rep.local.hopTargetMet ? 'met' : 'NOT met'}`);
  if (rep.baseline) {
    versus(rep.local, out, true);
    out.push(
      `current adds ≤ 0.3 ms p50 to set-up over the baseline: ${rep.local.vsBaseline.setupTargetMet ? 'met' : 'NOT met'}; throughput ≥ 0.8 × the baseline's, up and down: ${rep.local.vsBaseline.throughputTargetMet ? 'met' : 'NOT met'}`,
    );
  }
  const f = rep.local.tlsFloor;
  if (f) {
    out.push(
      `\nAgainst raw Node TLS between two processes (bench/peers/tls-pair.mjs), same rounds; per round: path ÷ raw TLS`,
    );
    out.push(`| | raw TLS pair | entry → exit ÷ raw TLS${rep.baseline ? ' | baseline ÷ raw TLS' : ''} |`);
    out.push(`|---|---|---|${rep.baseline ? '---|' : ''}`);
    out.push(
      `| 1 tunnel up (MB/s) | ${c(f.upMBs, 0)} | ${c(f.hopUpRatio, 2)}${rep.baseline ? ` | ${c(f.baseUpRatio, 2)}` : ''} |`,
    );
    out.push(
      `| 1 tunnel down (MB/s) | ${c(f.downMBs, 0)} | ${c(f.hopDownRatio, 2)}${rep.baseline ? ` | ${c(f.baseDownRatio, 2)}` : ''} |`,
    );
    out.push(
      `| CPU s/GiB, entry + exit | ${gib({ cpuSecPerGiB: f.cpuSecPerGiB })} | ${c(f.hopCpuPerGiBRatio, 2)}${rep.baseline ? ` | ${c(f.baseCpuPerGiBRatio, 2)}` : ''} |`,
    );
    out.push(
      `hop throughput ≥ 0.8 × raw TLS, up and down: ${f.throughputTargetMet ? 'met' : 'NOT met'}; hop CPU per GiB ≤ 1.25 × raw TLS: ${f.cpuTargetMet ? 'met' : 'NOT met'}`,
    );
  }
  if (rep.remote.skipped) out.push(`\nAcross regions: skipped (${rep.remote.skipped})`);
  else {
    const rname = {
      both: '`both` node across the link',
      hop: 'entry here → exit across the link',
      base: `${base}, exit across the link`,
    };
    out.push(
      `\nAcross regions: ${rep.remote.link}; ${rep.remote.latN} set-ups per path per round${gap}; ${rep.remote.sizeMiB} MiB per transfer`,
    );
    out.push(
      `direct set-up p50 ${c(rep.remote.direct.setupP50)} ms, p99 ${c(rep.remote.direct.setupP99)} ms; direct MB/s up ${c(rep.remote.direct.upMBs, 0)}, down ${c(rep.remote.direct.downMBs, 0)}`,
    );
    out.push(
      '| path | set-up added p50 (ms) | set-up added p99 (ms) | 1 tunnel up vs direct | 1 tunnel down vs direct | CPU s/GiB relayed |',
    );
    out.push('|---|---|---|---|---|---|');
    for (const r of rep.remote.rows)
      out.push(
        `| ${rname[r.path]} | ${c(r.setupAddedP50)} | ${c(r.setupAddedP99)} | ${c(r.upVsDirect, 2)} | ${c(r.downVsDirect, 2)} | ${gib(r)} |`,
      );
    out.push(`| entry → exit − remote \`both\` | ${c(rep.remote.hopAddedP50)} | ${c(rep.remote.hopAddedP99)} | | | |`);
    if (rep.baseline) {
      out.push(
        `| baseline entry → exit − remote \`both\` | ${c(rep.remote.baseAddedP50)} | ${c(rep.remote.baseAddedP99)} | | | |`,
      );
      versus(rep.remote, out, false);
    }
    out.push(
      `no round trip added across the link (entry → exit still one faster than the remote \`both\` node${rep.baseline ? ', and under half of one over the baseline pair' : ''}): ${rep.remote.noAddedRoundTrip ? 'met' : 'NOT met'}`,
    );
  }
  if (rep.profiles) {
    for (const [n, p] of Object.entries(rep.profiles)) {
      out.push(`\nProfile of ${n} (${p.file}): ${p.busySec} s busy, ${p.idlePct} % idle; top self time, % of busy:`);
      for (const t of p.top) out.push(`  ${String(t.pctOfBusy).padStart(5)}  ${t.fn}`);
    }
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
