#!/usr/bin/env node
// Gateway benchmark: throughput, set-up latency and memory per idle tunnel for the gateway's
// CONNECT and SOCKS5 paths, against a direct loopback connection and against peer proxies
// (squid, tinyproxy, dante, microsocks from Debian; proxy-chain from npm).
//
//   node bench/gateway.mjs [--quick] [--only ours,squid,dante,socat,...] [--size-mib N] [--reps N] [--conc 8,64]
//                          [--no-memory] [--cpu-prof DIR] [--write-docs]
//   node bench/gateway.mjs --render results.json [--write-docs]
//
// Processes: this driver (client), a target server, and one proxy at a time, each its own process.
// --write-docs rewrites docs/benchmarks/gateway.md with the results (its `## Reading the gateway figures` notes kept).
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { len64 } from './target-protocol.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SELF = fileURLToPath(import.meta.url);
const args = process.argv.slice(2);
const arg = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
// Where the gateway sources are compiled to (--build: another dir, e.g. for bench/gateway-ab.mjs).
const BUILD = path.resolve(arg('--build') ?? path.join(ROOT, 'node_modules/.cache/gateway-bench'));

// ---------------------------------------------------------------- roles (child processes)

/**
 * U<len64>: read len bytes, answer "K". D<len64>: send len bytes, end. E: echo. Nothing: idle.
 * Listens on --host (default 127.0.0.1; bench/hop.mjs runs one inside a network namespace) and --port.
 */
async function runTarget() {
  const chunk = Buffer.alloc(1024 * 1024, 0x61);
  const server = net.createServer({ noDelay: true }, (s) => {
    s.on('error', () => {});
    let head = Buffer.alloc(0);
    let mode = null;
    let left = 0n;
    const onData = (d) => {
      if (mode === 'E') return void s.write(d);
      if (mode === 'U') {
        left -= BigInt(d.length);
        if (left <= 0n) s.end('K');
        return;
      }
      head = Buffer.concat([head, d]);
      const cmd = String.fromCharCode(head[0]);
      if (cmd === 'E') {
        mode = 'E';
        if (head.length > 1) s.write(head.subarray(1));
        return;
      }
      if (head.length < 9) return;
      left = head.readBigUInt64BE(1);
      const rest = head.subarray(9);
      if (cmd === 'U') {
        mode = 'U';
        left -= BigInt(rest.length);
        if (left <= 0n) s.end('K');
      } else if (cmd === 'D') {
        mode = 'D';
        s.removeListener('data', onData);
        const pump = () => {
          while (left > 0n) {
            const n = left >= BigInt(chunk.length) ? chunk.length : Number(left);
            left -= BigInt(n);
            if (!s.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return void s.once('drain', pump);
          }
          s.end();
        };
        pump();
      }
    };
    s.on('data', onData);
  });
  server.listen({ port: Number(arg('--port') ?? 0), host: arg('--host') ?? '127.0.0.1', backlog: 4096 }, () =>
    console.log(JSON.stringify({ port: server.address().port })),
  );
  controlLoop();
}

async function runGateway() {
  const { startGateway } = await import(path.join(BUILD, 'index.js'));
  const whitelist = new Map([['127.0.0.1', 1]]);
  const gw = await startGateway({
    httpProxyListen: { host: '127.0.0.1', port: Number(arg('--http-port') ?? 0) },
    socksListen: { host: '127.0.0.1', port: Number(arg('--socks-port') ?? 0) },
    allowPrivateTargets: true,
    proxyProtocolFrom: [],
    ownListeners: () => [],
    admission: {
      admitByCredentials: async () => ({ ok: false, reason: 'unknown_user' }),
      admitBySourceIp: async (ip) =>
        whitelist.has(ip) ? { ok: true, accountId: whitelist.get(ip) } : { ok: false, reason: 'not_whitelisted' },
    },
    limits: { maxConnectionsPerAccount: 100_000, maxConnectionsTotal: 100_000, idleTimeoutMs: 3_600_000 },
  });
  console.log(JSON.stringify({ http: gw.httpProxyAddress().port, socks: gw.socksAddress().port }));
  controlLoop();
}

async function runProxyChain() {
  const { Server } = await import('proxy-chain');
  const server = new Server({ host: '127.0.0.1', port: Number(arg('--http-port') ?? 0), verbose: false });
  await server.listen();
  console.log(JSON.stringify({ http: server.server.address().port }));
  controlLoop();
}

/** Node children take "gc" on stdin (run with --expose-gc) so the baseline after close is fair. */
function controlLoop() {
  createInterface({ input: process.stdin }).on('line', (l) => {
    if (l === 'gc' && globalThis.gc) {
      globalThis.gc();
      globalThis.gc();
    }
    if (l === 'gc') console.log('gc-done');
    if (l === 'mem') console.log(JSON.stringify(process.memoryUsage()));
  });
  process.stdin.on('end', () => process.exit(0));
}

// ---------------------------------------------------------------- driver

function buildGateway(src = path.join(ROOT, 'src/gateway'), out = BUILD) {
  mkdirSync(out, { recursive: true });
  const tsc = path.join(ROOT, 'node_modules/typescript/bin/tsc');
  const bin = existsSync(tsc) ? tsc : path.join(ROOT, 'node_modules/.bin/tsc');
  execFileSync(
    process.execPath,
    [
      bin,
      '--ignoreConfig',
      path.join(src, 'index.ts'),
      '--outDir',
      out,
      '--rootDir',
      src,
      '--module',
      'nodenext',
      '--moduleResolution',
      'nodenext',
      '--target',
      'es2023',
      '--skipLibCheck',
      '--types',
      'node',
      '--strict',
    ],
    { stdio: 'inherit' },
  );
}

/** Spawn a process, wait for its first stdout line (JSON). */
async function spawnChild(cmd, argv, { json = true, env } = {}) {
  const p = spawn(cmd, argv, { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  p.stderr.on('data', (d) => process.env.BENCH_DEBUG && process.stderr.write(d));
  const lines = createInterface({ input: p.stdout });
  const waiters = [];
  lines.on('line', (l) => waiters.shift()?.(l));
  const next = () => new Promise((r) => waiters.push(r));
  const first = json ? JSON.parse(await next()) : null;
  // Node children exit on stdin EOF (so a --cpu-prof profile is written); others get SIGTERM.
  return {
    p,
    info: first,
    next,
    stop: () =>
      new Promise((r) => {
        p.once('exit', r);
        p.stdin.end();
        setTimeout(() => p.kill('SIGTERM'), 1000).unref();
        setTimeout(() => p.kill('SIGKILL'), 4000).unref();
      }),
  };
}

async function waitPort(port, ms = 10_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const ok = await new Promise((r) => {
      const s = net.connect(port, '127.0.0.1', () => {
        s.destroy();
        r(true);
      });
      s.on('error', () => r(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`port ${port} never opened`);
    await sleep(50);
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * A free port below the ephemeral range (32768+), so the tens of thousands of TIME_WAIT sockets the
 * run leaves behind cannot make it unavailable (listen on port 0 fails once they fill that range).
 */
async function freePort() {
  for (;;) {
    const port = 20000 + Math.floor(Math.random() * 12000);
    const ok = await new Promise((resolve) => {
      const s = net.createServer();
      s.once('error', () => resolve(false));
      s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
    });
    if (ok) return port;
  }
}

function fillTemplate(name, vars) {
  let text = readFileSync(path.join(ROOT, 'bench/peers', name), 'utf8');
  for (const [k, v] of Object.entries(vars)) text = text.replaceAll(`{{${k}}}`, String(v));
  const dir = vars.DIR;
  const out = path.join(dir, name);
  writeFileSync(out, text);
  return out;
}

/** All pids in the process tree rooted at pid. */
function tree(pid) {
  const children = new Map();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (!children.has(ppid)) children.set(ppid, []);
      children.get(ppid).push(Number(d));
    } catch {
      /* exited meanwhile */
    }
  }
  const out = [];
  const walk = (p) => {
    out.push(p);
    for (const c of children.get(p) ?? []) walk(c);
  };
  walk(pid);
  return out;
}

/** CPU seconds (user + system, reaped children included) of a process tree, from /proc/<pid>/stat. */
function cpuSeconds(pid) {
  let ticks = 0;
  for (const p of tree(pid)) {
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // Fields 14-17 of stat(5): utime, stime, cutime, cstime (f[0] is field 3).
      ticks += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
    } catch {
      /* exited meanwhile */
    }
  }
  return ticks / CLK_TCK;
}
const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK']).toString()) || 100;
  } catch {
    return 100;
  }
})();

/** Proportional set size (KiB) summed over a process tree: fair for multi-process peers. */
function pssKiB(pid) {
  let total = 0;
  for (const p of tree(pid)) {
    try {
      const m = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${p}/smaps_rollup`, 'utf8'));
      if (m) total += Number(m[1]);
    } catch {
      /* exited meanwhile */
    }
  }
  return total;
}

class Reader {
  constructor(socket) {
    this.s = socket;
    this.buf = Buffer.alloc(0);
    this.waiter = null;
    socket.on('data', (d) => {
      this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
      this.waiter?.();
    });
    socket.on('close', () => {
      this.closed = true;
      this.waiter?.();
    });
  }
  async until(pred) {
    for (;;) {
      const n = pred(this.buf);
      if (n > 0) {
        const out = this.buf.subarray(0, n);
        this.buf = this.buf.subarray(n);
        return out;
      }
      if (this.closed) throw new Error('closed');
      await new Promise((r) => (this.waiter = r));
      this.waiter = null;
    }
  }
  exactly(n) {
    return this.until((b) => (b.length >= n ? n : 0));
  }
  head() {
    return this.until((b) => {
      const i = b.indexOf('\r\n\r\n');
      return i >= 0 ? i + 4 : 0;
    });
  }
}

function connect(port) {
  return new Promise((resolve, reject) => {
    const s = net.connect({ port, host: '127.0.0.1', noDelay: true }, () => resolve(s));
    s.once('error', reject);
  });
}

/** Open a socket to the target through `via` (null: direct). Returns socket + reader. */
async function open(via, targetPort) {
  const port = via ? via.port : targetPort;
  const s = await connect(port);
  s.on('error', () => {});
  const r = new Reader(s);
  if (via?.kind === 'plain') {
    // A port forwarder (socat): no handshake, the target is fixed.
  } else if (via?.kind === 'connect') {
    s.write(`CONNECT 127.0.0.1:${targetPort} HTTP/1.1\r\nHost: 127.0.0.1:${targetPort}\r\n\r\n`);
    const h = (await r.head()).toString('latin1');
    if (!/^HTTP\/1\.[01] 200/.test(h)) throw new Error(`CONNECT failed: ${h.split('\r\n')[0]}`);
  } else if (via?.kind === 'socks5') {
    s.write(Buffer.from([5, 1, 0]));
    const m = await r.exactly(2);
    if (m[1] !== 0) throw new Error('socks method refused');
    s.write(Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, targetPort >> 8, targetPort & 0xff]));
    const rep = await r.exactly(10);
    if (rep[1] !== 0) throw new Error(`socks reply ${rep[1]}`);
  }
  return { s, r };
}

async function upload(via, targetPort, size) {
  const { s, r } = await open(via, targetPort);
  const chunk = Buffer.alloc(1024 * 1024, 0x62);
  const t0 = process.hrtime.bigint();
  s.write(len64('U', size));
  let left = size;
  while (left > 0) {
    const n = Math.min(left, chunk.length);
    left -= n;
    if (!s.write(n === chunk.length ? chunk : chunk.subarray(0, n))) await new Promise((res) => s.once('drain', res));
  }
  await r.exactly(1);
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  s.destroy();
  return size / secs;
}

async function download(via, targetPort, size) {
  const { s } = await open(via, targetPort);
  s.removeAllListeners('data');
  const t0 = process.hrtime.bigint();
  let got = 0;
  await new Promise((resolve, reject) => {
    s.on('data', (d) => {
      got += d.length;
      if (got >= size) resolve();
    });
    s.on('close', () => (got >= size ? resolve() : reject(new Error(`download short: ${got}`))));
    s.write(len64('D', size));
  });
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  s.destroy();
  return size / secs;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

/**
 * Direct and proxied transfers alternate (direct, proxy, direct, proxy...) so both see the same
 * machine load; the ratio is taken per pair, and the median and range over pairs are reported.
 * `conc` tunnels run at once, each moving size/conc bytes each way (aggregate bytes per second).
 * CPU: the proxy's CPU seconds over the proxied transfers only, per GiB relayed (up + down).
 */
async function throughput(via, targetPort, size, reps, proc, conc = 1) {
  const pairs = [];
  let cpu = 0;
  let relayed = 0;
  const each = Math.floor(size / conc);
  const par = async (fn, v) => {
    const t0 = process.hrtime.bigint();
    await Promise.all(Array.from({ length: conc }, () => fn(v, targetPort, each)));
    return (each * conc) / (Number(process.hrtime.bigint() - t0) / 1e9);
  };
  const proxied = async (fn) => {
    const c0 = cpuSeconds(proc.pid);
    const r = await par(fn, via);
    cpu += cpuSeconds(proc.pid) - c0;
    relayed += each * conc;
    return r;
  };
  for (let i = 0; i < reps; i++) {
    const du = await par(upload, null);
    const pu = await proxied(upload);
    const dd = await par(download, null);
    const pd = await proxied(download);
    pairs.push({ du, pu, dd, pd, ratio: (pu / du + pd / dd) / 2 });
  }
  const ratios = pairs.map((x) => x.ratio);
  return {
    conc,
    up: median(pairs.map((x) => x.pu)),
    down: median(pairs.map((x) => x.pd)),
    directUp: median(pairs.map((x) => x.du)),
    directDown: median(pairs.map((x) => x.dd)),
    ratio: median(ratios),
    ratios,
    cpuSecPerGiB: cpu / (relayed / 2 ** 30),
  };
}

/** New tunnels per second: `workers` loops each open a tunnel, echo one byte, close, for `ms`. */
async function tunnelRate(via, targetPort, ms, workers = 8) {
  let n = 0;
  const end = Date.now() + ms;
  const loop = async () => {
    while (Date.now() < end) {
      const { s, r } = await open(via, targetPort);
      s.write('Ex');
      await r.exactly(1);
      s.destroy();
      n++;
    }
  };
  const t0 = Date.now();
  await Promise.all(Array.from({ length: workers }, loop));
  return n / ((Date.now() - t0) / 1000);
}

/** Proxied and direct tunnel rates alternate; median and range over reps. */
async function tunnelRates(via, targetPort, reps, ms) {
  const proxied = [];
  const direct = [];
  for (let i = 0; i < reps; i++) {
    direct.push(await tunnelRate(null, targetPort, ms));
    proxied.push(await tunnelRate(via, targetPort, ms));
  }
  return { perSec: median(proxied), range: [Math.min(...proxied), Math.max(...proxied)], directPerSec: median(direct) };
}

async function setupOnce(via, targetPort) {
  const t0 = process.hrtime.bigint();
  const { s, r } = await open(via, targetPort);
  s.write('Ex');
  await r.exactly(1);
  const us = Number(process.hrtime.bigint() - t0) / 1000;
  s.destroy();
  return us;
}

/** Time from connect() to the first echoed byte through the tunnel; direct and proxied alternate. */
async function setupLatency(via, targetPort, n, warm) {
  const direct = [];
  const proxied = [];
  for (let i = 0; i < n + warm; i++) {
    const d = await setupOnce(null, targetPort);
    const p = await setupOnce(via, targetPort);
    if (i >= warm) {
      direct.push(d);
      proxied.push(p);
    }
  }
  return { p50: pct(proxied, 50), p99: pct(proxied, 99), directP50: pct(direct, 50), directP99: pct(direct, 99) };
}

/** Open idle tunnels in steps; memory (PSS of the proxy's process tree) per tunnel at each step. */
async function idleMemory(via, targetPort, proc, steps) {
  const sockets = [];
  const gc = async () => {
    if (proc.isNode) {
      proc.child.p.stdin.write('gc\n');
      await proc.child.next();
    }
  };
  await gc();
  await sleep(300);
  const base = pssKiB(proc.pid);
  const rows = [];
  let failed = null;
  for (const target of steps) {
    while (sockets.length < target && !failed) {
      const batch = Math.min(200, target - sockets.length);
      const res = await Promise.allSettled(Array.from({ length: batch }, () => open(via, targetPort)));
      for (const x of res) {
        if (x.status === 'fulfilled') sockets.push(x.value.s);
        else failed ??= `${x.reason?.message ?? x.reason} at ${sockets.length}`;
      }
    }
    if (failed) {
      rows.push({ tunnels: target, error: failed });
      break;
    }
    await sleep(500);
    const kib = pssKiB(proc.pid);
    rows.push({ tunnels: target, pssKiB: kib, perTunnelKiB: (kib - base) / target });
  }
  const closeAll = async () => {
    for (const s of sockets.splice(0)) s.destroy();
    await sleep(2000);
    await gc();
    await sleep(300);
    return pssKiB(proc.pid);
  };
  const after = await closeAll();
  // A second full cycle: if memory is retained by the allocator rather than leaked, it is reused
  // and the figure stays flat instead of growing again.
  let after2 = null;
  if (!failed) {
    const max = steps[steps.length - 1];
    while (sockets.length < max) {
      const res = await Promise.allSettled(
        Array.from({ length: Math.min(200, max - sockets.length) }, () => open(via, targetPort)),
      );
      for (const x of res) if (x.status === 'fulfilled') sockets.push(x.value.s);
      if (res.some((x) => x.status === 'rejected')) break;
    }
    after2 = await closeAll();
  }
  return { baseKiB: base, rows, afterCloseKiB: after, afterSecondCycleKiB: after2 };
}

// Both node proxies run as the daemon should: a capped young generation (V8 otherwise grows it to
// 128 MiB under bursts and keeps it), and --expose-gc only so the benchmark can measure after a GC.
const NODE_PROXY_FLAGS = [
  '--expose-gc',
  '--max-semi-space-size=8',
  ...(arg('--cpu-prof') ? ['--cpu-prof', `--cpu-prof-dir=${arg('--cpu-prof')}`] : []),
];

async function startPeer(name, dir, targetPort) {
  const port = await freePort();
  const node = process.execPath;
  switch (name) {
    case 'ours-connect':
    case 'ours-socks5': {
      // One fresh gateway process per path, so each memory baseline starts clean.
      const child = await spawnChild(node, [
        ...NODE_PROXY_FLAGS,
        SELF,
        '--role',
        'gateway',
        '--http-port',
        String(port),
        '--socks-port',
        String(await freePort()),
      ]);
      const path1 =
        name === 'ours-connect'
          ? { kind: 'connect', port: child.info.http, label: 'gateway CONNECT' }
          : { kind: 'socks5', port: child.info.socks, label: 'gateway SOCKS5' };
      return { child, pid: child.p.pid, isNode: true, paths: [path1] };
    }
    case 'proxy-chain': {
      const child = await spawnChild(node, [
        ...NODE_PROXY_FLAGS,
        SELF,
        '--role',
        'proxychain',
        '--http-port',
        String(port),
      ]);
      return {
        child,
        pid: child.p.pid,
        isNode: true,
        paths: [{ kind: 'connect', port: child.info.http, label: 'proxy-chain CONNECT' }],
      };
    }
    case 'squid': {
      const d = path.join(dir, 'squid');
      mkdirSync(d, { recursive: true, mode: 0o777 });
      execFileSync('chmod', ['777', d]);
      const conf = fillTemplate('squid.conf', { PORT: port, DIR: d });
      const child = await spawnChild('squid', ['-N', '-f', conf], { json: false });
      await waitPort(port, 20_000);
      return { child, pid: child.p.pid, paths: [{ kind: 'connect', port, label: 'squid CONNECT' }] };
    }
    case 'tinyproxy': {
      const d = path.join(dir, 'tinyproxy');
      mkdirSync(d, { recursive: true });
      execFileSync('chmod', ['777', d]);
      const conf = fillTemplate('tinyproxy.conf', { PORT: port, DIR: d });
      const child = await spawnChild('tinyproxy', ['-d', '-c', conf], { json: false });
      await waitPort(port);
      return { child, pid: child.p.pid, paths: [{ kind: 'connect', port, label: 'tinyproxy CONNECT' }] };
    }
    case 'dante': {
      const d = path.join(dir, 'dante');
      mkdirSync(d, { recursive: true });
      const conf = fillTemplate('danted.conf', { PORT: port, DIR: d });
      const child = await spawnChild('danted', ['-f', conf, '-p', path.join(d, 'danted.pid')], { json: false });
      await waitPort(port);
      return { child, pid: child.p.pid, paths: [{ kind: 'socks5', port, label: 'dante SOCKS5' }] };
    }
    case 'socat': {
      // The reference for what one relay process in C does here: a plain port forwarder (fork per connection).
      // -b: the same 256 KiB reads as the gateway (socat's default is 8 KiB).
      const child = await spawnChild(
        'socat',
        [
          '-b',
          '262144',
          `TCP-LISTEN:${port},bind=127.0.0.1,reuseaddr,fork,backlog=4096`,
          `TCP:127.0.0.1:${targetPort}`,
        ],
        { json: false },
      );
      await waitPort(port);
      return {
        child,
        pid: child.p.pid,
        paths: [{ kind: 'plain', port, label: 'socat (plain relay)' }],
        noMemory: true,
      };
    }
    case 'microsocks': {
      const child = await spawnChild('microsocks', ['-i', '127.0.0.1', '-p', String(port)], { json: false });
      await waitPort(port);
      return { child, pid: child.p.pid, paths: [{ kind: 'socks5', port, label: 'microsocks SOCKS5' }] };
    }
  }
  throw new Error(name);
}

function versions() {
  const v = {};
  const tryRun = (k, f) => {
    try {
      v[k] = f();
    } catch {
      v[k] = 'not installed';
    }
  };
  tryRun('node', () => process.version);
  tryRun('squid', () => execFileSync('squid', ['-v']).toString().split('\n')[0].replace('Squid Cache: Version ', ''));
  tryRun('tinyproxy', () => execFileSync('tinyproxy', ['-v']).toString().trim().replace('tinyproxy ', ''));
  tryRun('dante', () => execFileSync('dpkg-query', ['-W', '-f=${Version}', 'dante-server']).toString());
  tryRun('microsocks', () => execFileSync('dpkg-query', ['-W', '-f=${Version}', 'microsocks']).toString());
  tryRun(
    'socat',
    () =>
      execFileSync('socat', ['-V'])
        .toString()
        .match(/socat version (\S+)/)[1],
  );
  tryRun(
    'proxy-chain',
    () => JSON.parse(readFileSync(path.join(ROOT, 'node_modules/proxy-chain/package.json'), 'utf8')).version,
  );
  tryRun('kernel', () => os.release());
  tryRun('cpu', () => `${os.cpus().length} x ${os.cpus()[0].model}`);
  return v;
}

async function main() {
  const loadBefore = os.loadavg();
  const quick = args.includes('--quick');
  const only = arg('--only')?.split(',');
  const peers = [
    'ours-connect',
    'ours-socks5',
    'squid',
    'dante',
    'socat',
    'tinyproxy',
    'proxy-chain',
    'microsocks',
  ].filter((p) => !only || only.includes(p) || (only.includes('ours') && p.startsWith('ours')));
  const SIZE = Number(arg('--size-mib') ?? (quick ? 64 : 1024)) * 1024 * 1024;
  const REPS = Number(arg('--reps') ?? (quick ? 1 : 5));
  const CONC = (arg('--conc') ?? (quick ? '8' : '8,64')).split(',').filter(Boolean).map(Number);
  const RATE_MS = quick ? 500 : 1500;
  const LAT_N = Number(arg('--lat-n') ?? (quick ? 300 : 2000));
  const STEPS = quick ? [1000] : [1000, 5000, 9900];
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gw-bench-'));
  buildGateway();
  const target = await spawnChild(process.execPath, [SELF, '--role', 'target', '--port', String(await freePort())]);
  const tport = target.info.port;
  const log = (...a) => console.error('[bench]', ...a);

  log('direct (alone, for reference)');
  const direct = {
    throughput: { up: await upload(null, tport, SIZE), down: await download(null, tport, SIZE) },
  };
  log('direct', JSON.stringify(direct));
  const results = [];
  const skipped = [];
  for (const name of peers) {
    let proc;
    try {
      proc = await startPeer(name, dir, tport);
    } catch (e) {
      skipped.push({ name, why: String(e.message ?? e) });
      log('skip', name, e.message);
      continue;
    }
    try {
      for (const via of proc.paths) {
        log(via.label);
        const row = { label: via.label, peer: name };
        try {
          row.throughput = await throughput(via, tport, SIZE, REPS, proc);
          row.concurrent = [];
          for (const c of CONC) row.concurrent.push(await throughput(via, tport, SIZE, REPS, proc, c));
          row.latency = await setupLatency(via, tport, LAT_N, 200);
          if (!proc.noMemory && !args.includes('--no-memory')) row.memory = await idleMemory(via, tport, proc, STEPS);
          // Last: a peer that fails under connection churn (dante: its bound outgoing sockets run out
          // of ports) loses only this figure.
          row.rate = await tunnelRates(via, tport, REPS, RATE_MS).catch((e) => ({ error: String(e.message ?? e) }));
        } catch (e) {
          row.error = String(e.message ?? e);
        }
        log(via.label, JSON.stringify(row));
        results.push(row);
        writeFileSync(path.join(dir, 'partial.json'), JSON.stringify(results, null, 2));
      }
    } finally {
      await proc.child.stop();
    }
  }
  await target.stop();
  const report = {
    date: new Date().toISOString(),
    versions: versions(),
    sizeBytes: SIZE,
    reps: REPS,
    conc: CONC,
    latencyN: LAT_N,
    steps: STEPS,
    rateMs: RATE_MS,
    loadavgBefore: loadBefore,
    loadavg: os.loadavg(),
    argv: args,
    direct,
    results,
    skipped,
  };
  writeFileSync(path.join(dir, 'results.json'), JSON.stringify(report, null, 2));
  console.log(JSON.stringify(report, null, 2));
  log(`results: ${path.join(dir, 'results.json')} (re-render: node bench/gateway.mjs --render <file> [--write-docs])`);
  if (args.includes('--write-docs')) writeDocs(report);
}

// ---------------------------------------------------------------- report

const MB = (bps) => (bps / 1e6).toFixed(0);
const bar = (ratio, width = 40) => '█'.repeat(Math.max(0, Math.round(Math.min(ratio, 1.25) * width)));

function markdown(r) {
  const lines = [];
  const ms = (us) => (us / 1000).toFixed(3);
  const range = (xs) => `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}`;
  const cmd = ['node bench/gateway.mjs', ...(r.argv ?? [])].join(' ');
  lines.push('## Gateway', '');
  lines.push(
    `Measured ${r.date.slice(0, 16).replace('T', ' ')} UTC with \`${cmd}\` on ${r.versions.cpu}, Linux ${r.versions.kernel}, Node ${r.versions.node}.`,
  );
  const load = (l) => (l ? l.map((x) => x.toFixed(2)).join(' / ') : 'not recorded');
  lines.push(
    `Load average (1 / 5 / 15 min) measured before the run ${load(r.loadavgBefore)}, after it ${load(r.loadavg)}.`,
  );
  lines.push(
    'Absolute MB/s move from run to run; the ratios against a direct transfer made right before, and CPU seconds per GiB, are the figures to compare.',
  );
  lines.push(
    'Three processes: the benchmark client, a target server, and one proxy at a time; all on loopback. Peers are',
  );
  lines.push(
    'configured alike (no auth, no cache, no access log, any port: `bench/peers/`); the gateway admits the client by source IP;',
  );
  lines.push(
    'socat (`-b 262144`: 256 KiB reads, like the gateway) is a plain port forwarder (no handshake, a process per connection): the reference for what a relay in C does here.',
  );
  lines.push(
    `Throughput: ${r.sizeBytes / 2 ** 20} MiB up and ${r.sizeBytes / 2 ** 20} MiB down, each proxied transfer paired with a direct one right before it;`,
  );
  lines.push(
    `ratio = mean of the up and down ratios, median (range) of ${r.reps} pairs. With N tunnels the same bytes are split over N tunnels at once.`,
  );
  lines.push(
    "CPU s/GiB: the proxy's user + system CPU (its process tree, /proc/<pid>/stat) over the proxied transfers, per GiB relayed (up + down).",
  );
  lines.push(
    `Set-up: connect + handshake + first echoed byte, ${r.latencyN} sequential tunnels alternating with ${r.latencyN} direct connections; "added" = proxied percentile − direct percentile.`,
  );
  lines.push(
    `Tunnels/s: 8 loops each opening a tunnel, echoing one byte and closing, for ${(r.rateMs ?? 1500) / 1000} s; median of ${r.reps}, alternating with direct.`,
  );
  lines.push(
    "Memory: PSS of the proxy's process tree per idle tunnel over its baseline; node proxies after a forced GC; a fresh gateway process per path.",
    '',
  );
  lines.push(
    `Versions: squid ${r.versions.squid}, dante-server ${r.versions.dante}, socat ${r.versions.socat ?? '-'}, tinyproxy ${r.versions.tinyproxy}, microsocks ${r.versions.microsocks}, proxy-chain ${r.versions['proxy-chain']}.`,
    '',
  );
  lines.push(
    '| path | up MB/s (direct) | down MB/s (direct) | vs direct, 1 tunnel: median (range) | CPU s/GiB | set-up p50 added ms (direct) | p99 added ms (direct) | tunnels/s (direct) |',
  );
  lines.push('|---|---|---|---|---|---|---|---|');
  for (const x of r.results) {
    if (!x.throughput) {
      lines.push(`| ${x.label} | error: ${x.error} |`);
      continue;
    }
    const t = x.throughput;
    const l = x.latency;
    const lat = l
      ? [`${ms(l.p50 - l.directP50)} (${ms(l.directP50)})`, `${ms(l.p99 - l.directP99)} (${ms(l.directP99)})`]
      : ['-', '-'];
    const rate = !x.rate
      ? '-'
      : x.rate.error
        ? `failed: ${x.rate.error}`
        : `${x.rate.perSec.toFixed(0)} (${x.rate.directPerSec.toFixed(0)})`;
    lines.push(
      `| ${x.label} | ${MB(t.up)} (${MB(t.directUp)}) | ${MB(t.down)} (${MB(t.directDown)}) | ${t.ratio.toFixed(2)} (${range(t.ratios)}) | ${t.cpuSecPerGiB?.toFixed(2) ?? '-'} | ${lat[0]} | ${lat[1]} | ${rate} |`,
    );
  }
  const conc = r.conc ?? [];
  if (conc.length) {
    lines.push('', '| path | ' + conc.map((c) => `${c} tunnels: vs direct (range) | CPU s/GiB`).join(' | ') + ' |');
    lines.push('|---|' + conc.map(() => '---|---|').join(''));
    for (const x of r.results) {
      if (!x.concurrent) continue;
      lines.push(
        `| ${x.label} | ` +
          x.concurrent
            .map((t) => `${t.ratio.toFixed(2)} (${range(t.ratios)}) | ${t.cpuSecPerGiB.toFixed(2)}`)
            .join(' | ') +
          ' |',
      );
    }
  }
  const withMem = r.results.filter((x) => x.memory);
  if (withMem.length) {
    lines.push(
      '',
      '| path | ' +
        r.steps.map((s) => `KiB/tunnel @${s}`).join(' | ') +
        ' | PSS MiB: base → after close → after a 2nd open/close cycle |',
    );
    lines.push('|---|' + r.steps.map(() => '---|').join('') + '---|');
    const mib = (k) => (k == null ? '-' : (k / 1024).toFixed(1));
    for (const x of withMem) {
      const mem = r.steps.map((s) => {
        const row = x.memory.rows.find((m) => m.tunnels === s);
        return row ? (row.error ? `failed: ${row.error}` : row.perTunnelKiB.toFixed(1)) : '-';
      });
      lines.push(
        `| ${x.label} | ${mem.join(' | ')} | ${mib(x.memory.baseKiB)} → ${mib(x.memory.afterCloseKiB)} → ${mib(x.memory.afterSecondCycleKiB)} |`,
      );
    }
  }
  const w = Math.max(...r.results.map((x) => x.label.length), 6);
  lines.push('', 'Throughput through one tunnel relative to a direct loopback connection:', '', '```');
  lines.push(`${'direct'.padEnd(w)} ${bar(1)} 1.00`);
  for (const x of r.results)
    if (x.throughput) lines.push(`${x.label.padEnd(w)} ${bar(x.throughput.ratio)} ${x.throughput.ratio.toFixed(2)}`);
  lines.push('```', '');
  if (r.skipped.length) lines.push('Skipped: ' + r.skipped.map((s) => `${s.name} (${s.why})`).join('; '), '');
  return lines.join('\n');
}

// The run history file's opening (docs/benchmarks/gateway.md); docs/BENCHMARKS.md keeps the current line per figure,
// updated by hand from a new run.
const GATEWAY_PREAMBLE =
  'Run history, moved from docs/BENCHMARKS.md (which keeps one current line per figure: [current figures](../BENCHMARKS.md)).\n' +
  "Runs are kept as they were recorded, oldest statements included; dates and machines are in each run's text.\n";

function writeDocs(r) {
  const file = path.join(ROOT, 'docs/benchmarks/gateway.md');
  const section = markdown(r).replace(/^## Gateway\n/, `# Gateway\n\n${GATEWAY_PREAMBLE}\n`);
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
  // Hand-written notes under `## Reading the gateway figures` survive a re-render.
  const notesAt = text.indexOf('\n## Reading the gateway figures');
  const notes = notesAt >= 0 ? text.slice(notesAt + 1).replace(/\s*$/, '\n') : '';
  writeFileSync(file, section + notes);
}

// ---------------------------------------------------------------- entry

const role = arg('--role');
if (role === 'target') await runTarget();
else if (role === 'gateway') await runGateway();
else if (role === 'proxychain') await runProxyChain();
else if (arg('--render')) {
  // Re-render the docs section from a saved results.json (printed path at the end of a run).
  const report = JSON.parse(readFileSync(arg('--render'), 'utf8'));
  if (args.includes('--write-docs')) writeDocs(report);
  else console.log(markdown(report));
} else await main();
