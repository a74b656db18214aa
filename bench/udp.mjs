#!/usr/bin/env node
// SOCKS5 UDP relay cost (docs/benchmarks/socks5-udp.md, "SOCKS5 UDP"): proxyd (`bin/proxyd serve`, SQLite, credentials,
// connection log and metering on) against Dante's danted (no authentication), side by side. Run after
// `npm run build`; needs danted (Debian's dante-server) for the peer column (skipped, saying so, without it).
//
//   node bench/udp.mjs [--reps 3] [--ms 2000] [--window 16] [--cases 64x1,1200x1,64x64,1200x64] [--no-floor]
//                      [--proxyd-node-flags "--cpu-prof ..."]
//
// For each payload size (64 bytes, 1,200 bytes: QUIC-sized) and association count (1, 64): each association
// keeps --window datagrams in flight to a UDP echo on loopback (closed loop: an answer sends the next), for --ms;
// datagrams/s is answers per second, CPU per datagram the proxy's process tree (user + system) per answer (a
// datagram each way). --reps rounds alternate the proxies' order (proxyd, danted, the floor, then reversed);
// figures are the median over rounds (range).
// "node floor" (unless --no-floor) is the least a SOCKS5 UDP relay on Node's dgram costs: no authentication or
// bookkeeping (bench/peers/node-floor-udp.mjs).
// Prints JSON on stdout and a table on stderr. Temp dirs and processes are removed at exit.
import { spawn, spawnSync } from 'node:child_process';
import dgram from 'node:dgram';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { freePort, med, range, runInfo, sleep, treeCpu } from './lib/tunnel-bench.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PROXYD = path.join(ROOT, 'bin/proxyd');
const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1] : def);
const REPS = Number(opt('reps', 3));
const MS = Number(opt('ms', 2000));
const WINDOW = Number(opt('window', 16));
/** Payload bytes x associations, comma-separated (all four unless given). */
const CASES = opt('cases', '64x1,64x64,1200x1,1200x64')
  .split(',')
  .map((c) => {
    const [size, n] = c.split('x').map(Number);
    if (!(size > 0 && n > 0)) throw new Error(`--cases: ${c} is not SIZExASSOCIATIONS`);
    return { size, n };
  });
/** Extra Node flags for proxyd (a profile: --cpu-prof, --trace-gc). */
const PROXYD_NODE_FLAGS = (opt('proxyd-node-flags', '') || '').split(' ').filter(Boolean);
const PASSWORD = 'bench udp password 1';
const log = (...a) => console.error('[udp]', ...a);

const dirs = [];
const procs = [];
process.on('exit', () => {
  for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(130));
const temp = (p) => {
  const d = mkdtempSync(path.join(os.tmpdir(), p));
  dirs.push(d);
  return d;
};

async function startProxyd() {
  const dir = temp('proxyd-udp-bench-');
  const admin = (args, input) => {
    const r = spawnSync(process.execPath, [PROXYD, 'admin', ...args, '--data-dir', dir], { input, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(r.stderr);
  };
  admin(
    ['account', 'create', '--email', 'bench@example.com', '--password-stdin', '--verified'],
    'bench console password 1\n',
  );
  admin(
    ['proxy-user', 'create', '--email', 'bench@example.com', '--username', 'bench', '--password-stdin'],
    `${PASSWORD}\n`,
  );
  const p = spawn(
    process.execPath,
    [
      '--max-semi-space-size=8',
      ...PROXYD_NODE_FLAGS,
      PROXYD,
      'serve',
      '--data-dir',
      dir,
      '--api-listen',
      '127.0.0.1:0',
      '--http-proxy-listen',
      '127.0.0.1:0',
      '--socks-listen',
      '127.0.0.1:0',
      '--allow-private-targets',
      '--log-level',
      'warn',
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  procs.push(p);
  const ready = await new Promise((resolve, reject) => {
    p.once('exit', (c) => reject(new Error(`proxyd exited ${c}`)));
    // The first JSON line is the ready line (--trace-gc writes its lines to stdout too).
    const lines = createInterface({ input: p.stdout });
    lines.on('line', (l) => {
      if (l.startsWith('{')) {
        lines.removeAllListeners('line');
        lines.on('line', (m) => PROXYD_NODE_FLAGS.length > 0 && console.error(`[proxyd] ${m}`));
        resolve(JSON.parse(l));
      }
    });
  });
  return {
    name: 'proxyd',
    pid: p.pid,
    proc: p,
    port: Number(ready.socks5.split(':')[1]),
    auth: { user: 'bench', pass: PASSWORD },
  };
}

async function startDante() {
  if (spawnSync('sh', ['-c', 'command -v danted || test -x /usr/sbin/danted']).status !== 0) return null;
  const dir = temp('danted-udp-bench-');
  const port = await freePort();
  const conf = path.join(dir, 'danted.conf');
  writeFileSync(
    conf,
    `logoutput: /dev/null
internal: 127.0.0.1 port = ${port}
external: 127.0.0.1
clientmethod: none
socksmethod: none
user.privileged: root
user.unprivileged: nobody
client pass { from: 127.0.0.0/8 to: 0.0.0.0/0 }
socks pass { from: 127.0.0.0/8 to: 0.0.0.0/0 command: connect udpassociate }
socks pass { from: 0.0.0.0/0 to: 127.0.0.0/8 command: udpreply }
`,
  );
  const p = spawn('/usr/sbin/danted', ['-f', conf, '-p', path.join(dir, 'danted.pid')], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  procs.push(p);
  for (let i = 0; i < 50; i++) {
    if (
      await new Promise((r) =>
        net
          .connect(port, '127.0.0.1')
          .once('connect', function () {
            this.destroy();
            r(true);
          })
          .once('error', () => r(false)),
      )
    )
      break;
    await sleep(100);
  }
  return { name: 'danted', pid: p.pid, port, auth: null };
}

/** The floor of any SOCKS5 UDP relay on Node's dgram (bench/peers/node-floor-udp.mjs), under bin/proxyd's shebang flag. */
async function startFloor() {
  const port = await freePort();
  const p = spawn(
    process.execPath,
    ['--max-semi-space-size=8', path.join(ROOT, 'bench/peers/node-floor-udp.mjs'), String(port)],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  procs.push(p);
  await new Promise((resolve, reject) => {
    p.once('exit', (c) => reject(new Error(`node floor exited ${c}`)));
    createInterface({ input: p.stdout }).once('line', resolve);
  });
  return { name: 'node floor', pid: p.pid, port, auth: null };
}

/**
 * A UDP echo in this process (its CPU is not the proxy's), on a port outside proxyd's relay ports (40000-44999 by
 * default): on a local address those are relays of the gateway, and it refuses them as targets.
 */
async function echo() {
  for (;;) {
    const s = dgram.createSocket('udp4');
    await new Promise((r) => s.bind(0, '127.0.0.1', r));
    const port = s.address().port;
    if (port < 40000 || port > 44999) {
      s.on('message', (m, r) => s.send(m, r.port, r.address));
      return s;
    }
    await new Promise((r) => s.close(r));
  }
}

/** One association's control connection and relay endpoint. */
async function associate(proxy) {
  const c = net.connect(proxy.port, '127.0.0.1');
  let buf = Buffer.alloc(0);
  c.on('data', (d) => (buf = Buffer.concat([buf, d])));
  await new Promise((r, j) => c.once('connect', r).once('error', j));
  const need = async (n) => {
    for (let t = 0; buf.length < n; t++) {
      if (t > 500) throw new Error(`${proxy.name}: socks handshake stalled`);
      await sleep(5);
    }
    const out = buf.subarray(0, n);
    buf = buf.subarray(n);
    return out;
  };
  c.write(Buffer.from([5, 1, proxy.auth ? 2 : 0]));
  await need(2);
  if (proxy.auth) {
    const u = Buffer.from(proxy.auth.user);
    const p = Buffer.from(proxy.auth.pass);
    c.write(Buffer.concat([Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]));
    if ((await need(2))[1] !== 0) throw new Error(`${proxy.name}: authentication refused`);
  }
  c.write(Buffer.from([5, 3, 0, 1, 0, 0, 0, 0, 0, 0]));
  const rep = await need(10);
  if (rep[1] !== 0) throw new Error(`${proxy.name}: UDP ASSOCIATE refused (${rep[1]})`);
  return { control: c, relay: { host: rep.subarray(4, 8).join('.'), port: rep.readUInt16BE(8) } };
}

/** `n` associations, each with WINDOW in flight, for MS: answers/s and the proxy's CPU µs per answer. */
async function measure(proxy, target, n, size) {
  const assocs = await Promise.all(Array.from({ length: n }, () => associate(proxy)));
  const tp = target.address().port;
  const frame = Buffer.concat([Buffer.from([0, 0, 0, 1, 127, 0, 0, 1, tp >> 8, tp & 255]), Buffer.alloc(size, 0x61)]);
  let answers = 0;
  let running = true;
  const sockets = [];
  for (const a of assocs) {
    const s = dgram.createSocket('udp4');
    await new Promise((r) => s.bind(0, '127.0.0.1', r));
    s.on('message', () => {
      answers++;
      if (running) s.send(frame, a.relay.port, a.relay.host);
    });
    sockets.push(s);
    // Warm-up: the first datagram tells the relay where answers go.
    s.send(frame, a.relay.port, a.relay.host);
  }
  await sleep(200);
  for (let i = 1; i < WINDOW; i++) sockets.forEach((s, k) => s.send(frame, assocs[k].relay.port, assocs[k].relay.host));
  await sleep(200);
  const a0 = answers;
  const c0 = treeCpu([proxy.pid]);
  const g0 = process.cpuUsage();
  const t0 = performance.now();
  await sleep(MS);
  const got = answers - a0;
  const secs = (performance.now() - t0) / 1000;
  const cpu = treeCpu([proxy.pid]) - c0;
  const g = process.cpuUsage(g0);
  running = false;
  for (const s of sockets) s.close();
  for (const a of assocs) a.control.destroy();
  await sleep(300);
  // The generator's own share of a core (client and echo, one process): near 1, the rate is the generator's limit.
  return {
    perSec: got / secs,
    cpuUsPerDatagram: got > 0 ? (cpu * 1e6) / got : NaN,
    genCore: (g.user + g.system) / 1e6 / secs,
  };
}

async function main() {
  const loadBefore = os.loadavg();
  const target = await echo();
  const dante = await startDante();
  if (!dante) log('danted not installed: no peer column (apt-get install dante-server for it)');
  const peers = [await startProxyd(), dante, argv.includes('--no-floor') ? null : await startFloor()].filter(Boolean);
  const results = {};
  for (let rep = 0; rep < REPS; rep++) {
    for (const c of CASES) {
      const order = rep % 2 === 0 ? peers : [...peers].reverse(); // alternating who goes first
      for (const p of order) {
        const r = await measure(p, target, c.n, c.size);
        const key = `${p.name} ${c.size}B x${c.n}`;
        (results[key] ??= []).push(r);
        log(
          `round ${rep + 1}: ${key}: ${Math.round(r.perSec)} datagrams/s, ${r.cpuUsPerDatagram.toFixed(1)} µs CPU per datagram, generator ${r.genCore.toFixed(2)} core`,
        );
      }
    }
  }
  const out = { ...runInfo(argv, loadBefore, os.loadavg()), window: WINDOW, ms: MS, reps: REPS, results: {} };
  console.error(
    '\n| path | datagrams/s | CPU µs per datagram (each way) | generator, share of a core |\n|---|---|---|---|',
  );
  for (const [key, rs] of Object.entries(results)) {
    const rate = rs.map((r) => r.perSec);
    const cpu = rs.map((r) => r.cpuUsPerDatagram);
    const gen = rs.map((r) => r.genCore);
    out.results[key] = {
      datagrams_per_s: Math.round(med(rate)),
      range: range(rate, 0),
      cpu_us: +med(cpu).toFixed(1),
      cpu_range: range(cpu, 1),
      generator_core: +med(gen).toFixed(2),
    };
    console.error(
      `| ${key} | ${Math.round(med(rate)).toLocaleString('en')} (${range(rate, 0)}) | ${med(cpu).toFixed(1)} (${range(cpu, 1)}) | ${med(gen).toFixed(2)} |`,
    );
  }
  target.close();
  console.log(JSON.stringify(out));
  // proxyd stops on SIGTERM (a --cpu-prof profile is written then; SIGKILL would lose it); the rest go with the exit handler.
  const ours = peers.find((x) => x.name === 'proxyd');
  await new Promise((r) => {
    ours.proc.once('exit', r);
    ours.proc.kill('SIGTERM');
    setTimeout(r, 10_000).unref();
  });
  process.exit(0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
