#!/usr/bin/env node
// Set-up and tunnel rate of the whole daemon against squid and dante (docs/benchmarks/setup-and-tunnel-rate.md, "Set-up and tunnel
// rate"). `proxyd serve` runs as shipped: SQLite, usage metering and the connection log on (both default),
// and every tunnel presents proxy credentials (CONNECT Proxy-Authorization, SOCKS5 RFC 1929); squid and dante
// run without auth (bench/peers/). All on loopback; the target is bench/gateway.mjs's target role in its own
// process. Alternating between proxies (and with a direct connection for set-up) so outside load hits all alike.
//
//   node bench/setup.mjs [--reps 5] [--lat-n 2000] [--rate-ms 1500] [--size-mib 256] [--phases setup,rate,64]
//                        [--no-dante] [--no-floor] [--no-workers] [--no-widen] [--warm-ms 8000] [--lead-ms 0] [--profile DIR] [--strace]
//   node bench/setup.mjs --dedicated [--dedicated-aa] [--reps 5] [--lat-n 2000] [--rate-ms 1500] [--warm-ms 8000]   (mainDedicated, below)
//
// Per path: set-up added p50/p99 (connect → handshake → first echoed byte, minus a direct connection's,
// sequential), tunnels/s (8 loops opening a tunnel, echoing a byte, closing; with --lead-ms, each round of a path
// opens with that much of the same loops, its rate reported apart as `leadTunnelsPerSec`), 64 tunnels uploading
// --size-mib in all (ratio to 64 direct connections), and `proxyd --workers 2` tunnels/s beside --workers 1.
// "node floor" (unless --no-floor) is the least a CONNECT or SOCKS5 relay on Node's `net` costs (bench/peers/node-floor.mjs:
// no credentials checked, no bookkeeping), one process and two on SO_REUSEPORT ("node floor x2", beside --workers 2).
// --profile DIR: afterwards, one more daemon under --cpu-prof through a tunnels/s run; prints the top entries.
// --strace: afterwards, system calls per tunnel of each proxy (strace -c on all its threads through one
// tunnels/s round; strace slows the process, so that round's rate is not reported).
// Ports: tens of thousands of short connections leave as many in TIME_WAIT. As root it widens
// /proc/sys/net/ipv4/ip_local_port_range for the run (restored at exit, also on failure; its connections' TIME_WAIT
// then holds ports of the wide range for a minute, listening ports included, and it says so); otherwise, before a
// phase, it waits while TIME_WAIT holds most of the range (pacing). It says which on stderr. Every phase has
// a deadline: a phase that does not finish ends the run with an error naming it.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { startDante, startFloor, startProxyd, startSquid } from './lib/peers.mjs';
import { portsWidener } from './lib/ports.mjs';
import {
  countFor,
  freePort,
  med,
  pct,
  pumpUpload,
  range,
  runInfo,
  sleep,
  treeCpu,
  within,
} from './lib/tunnel-bench.mjs';
import { len64 } from './target-protocol.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1] : def);
const REPS = Number(opt('reps', 5));
const LAT_N = Number(opt('lat-n', 2000));
const RATE_MS = Number(opt('rate-ms', 1500));
const SIZE = Number(opt('size-mib', 256)) * 2 ** 20;
const PROFILE = opt('profile', null);
const STRACE = argv.includes('--strace');
const PHASES = new Set(opt('phases', 'setup,rate,64').split(','));
// dante is optional: left out when not installed (or --no-dante), and said so.
const DANTE = !argv.includes('--no-dante') && spawnSync('sh', ['-c', 'command -v danted']).status === 0;
// The floor of any relay on Node's `net` (bench/peers/node-floor.mjs, CONNECT and SOCKS5), one process and two on SO_REUSEPORT.
const FLOOR = !argv.includes('--no-floor');
/** --no-workers: no `proxyd --workers 2` and no floor x2 (the one-process comparison only: half the time). */
const WORKERS = !argv.includes('--no-workers');
const LOOPS = 8;
/** Warm-up per path (ms of the tunnels/s loops). */
// 8 s: a fresh Node daemon's tunnels/s climbs for its first ~6 s of these loops (its code still being optimised;
// the report's `warmUp` shows each path's tunnels/s second by second), squid's and dante's do not. Paths served by
// two processes (`--workers 2`, the floor x2) get twice as long: each process warms up on its half of the tunnels.
const WARM_MS = Number(opt('warm-ms', 8000));
/**
 * With --lead-ms, each tunnels/s round of a path opens with that much of the same loops, measured apart. Between
 * two rounds of a path every other path has its turn (about 28 s with every path, more with a lead-in): this tells
 * what a process does in the first second after such a pause from the rate it keeps up (docs/benchmarks/workers-reuseport.md,
 * "Run V"). With a lead-in, tunnels/s and CPU per tunnel are read over the --rate-ms after it, not right after the pause.
 */
const LEAD_MS = Number(opt('lead-ms', 0));
const log = (...a) => console.error('[setup]', ...a);
const { widenPorts, restorePorts } = portsWidener(log, !argv.includes('--no-widen'));

// ------------------------------------------------------------------ ports and deadlines

/** Sockets in TIME_WAIT now (IPv4 and IPv6), from /proc. */
function timeWait() {
  let n = 0;
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    try {
      for (const line of readFileSync(f, 'utf8').split('\n')) if (line.split(/\s+/)[4] === '06') n++;
    } catch {
      /* no such table */
    }
  }
  return n;
}

let portRange = null;
/** Before a phase: wait while TIME_WAIT holds more than half the ephemeral range (loopback connections each use one). */
async function pace(name) {
  if (!portRange) return;
  const room = portRange[1] - portRange[0] + 1;
  const t0 = Date.now();
  let said = false;
  while (timeWait() > room / 2) {
    if (!said)
      log(`pacing before ${name}: ${timeWait()} sockets in TIME_WAIT of ${room} ports; waiting for them to expire`);
    said = true;
    await sleep(1000);
  }
  if (said) log(`pacing: waited ${((Date.now() - t0) / 1000).toFixed(0)} s`);
}

/** Runs one phase under a deadline: one that does not finish ends the run with an error naming it. */
async function phase(name, ms, fn) {
  await pace(name);
  return within(fn(), ms, `phase "${name}" did not finish within ${ms / 1000} s`);
}

// ------------------------------------------------------------------ proxies

/** Counters of the daemon's /metrics that show writers meeting on the database's lock. */
async function lockCounters(api) {
  const text = await (await fetch(`${api}/metrics`)).text();
  const get = (name) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  return {
    connectionLogWriteRetries: get('proxyd_connection_log_write_retries_total'),
    usageFlushFailures: get('proxyd_usage_flush_failures_total'),
    connectionLogRecords: get('proxyd_connection_log_records_total'),
  };
}

// ------------------------------------------------------------------ client

/**
 * One connection through `path` (null: direct) to the target, then `payload` sent: resolves with the set-up
 * time (ms to the handshake's end) and the socket, once `want` bytes came back after the handshake.
 */
function open(pathSpec, tport, payload, want) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const s = net.connect({ port: pathSpec ? pathSpec.port : tport, host: '127.0.0.1', noDelay: true });
    let buf = Buffer.alloc(0);
    let stage = pathSpec ? 'hs' : 'data';
    let got = 0;
    let setup = pathSpec ? 0 : NaN;
    s.setTimeout(15_000, () => (s.destroy(), reject(new Error(`timeout (${pathSpec?.label ?? 'direct'})`))));
    s.on('error', reject);
    const a = pathSpec?.auth;
    const start = () => {
      stage = 'data';
      setup = performance.now() - t0;
      buf = Buffer.alloc(0);
      s.write(payload);
      if (want === 0) resolve({ setup, socket: s });
    };
    s.on('connect', () => {
      if (!pathSpec) {
        setup = performance.now() - t0;
        s.write(payload);
        if (want === 0) resolve({ setup, socket: s });
        return;
      }
      if (pathSpec.kind === 'connect') {
        const h = a
          ? `Proxy-Authorization: Basic ${Buffer.from(`${a.user}:${a.password}`).toString('base64')}\r\n`
          : '';
        s.write(`CONNECT 127.0.0.1:${tport} HTTP/1.1\r\nHost: 127.0.0.1:${tport}\r\n${h}\r\n`);
      } else s.write(Buffer.from([5, 1, a ? 2 : 0]));
    });
    let socksStep = 0;
    s.on('data', (d) => {
      if (stage === 'data') {
        got += d.length;
        if (got >= want) resolve({ setup, socket: s });
        return;
      }
      buf = Buffer.concat([buf, d]);
      if (pathSpec.kind === 'connect') {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        if (!buf.subarray(0, 12).toString().startsWith('HTTP/1.1 200'))
          return reject(new Error(buf.subarray(0, 40).toString()));
        return start();
      }
      // SOCKS5: method choice, (RFC 1929 answer), the CONNECT reply (10 bytes for IPv4).
      for (;;) {
        if (socksStep === 0 && buf.length >= 2) {
          buf = buf.subarray(2);
          socksStep = a ? 1 : 2;
          if (a) {
            const u = Buffer.from(a.user);
            const p = Buffer.from(a.password);
            s.write(Buffer.concat([Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]));
          } else s.write(Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, tport >> 8, tport & 255]));
        } else if (socksStep === 1 && buf.length >= 2) {
          if (buf[1] !== 0) return reject(new Error('socks auth refused'));
          buf = buf.subarray(2);
          socksStep = 2;
          s.write(Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, tport >> 8, tport & 255]));
        } else if (socksStep === 2 && buf.length >= 10) {
          if (buf[1] !== 0) return reject(new Error(`socks reply ${buf[1]}`));
          return start();
        } else return;
      }
    });
  });
}

/** Set-up to the first echoed byte (ms). */
async function echoOnce(p, tport) {
  const t0 = performance.now();
  const { socket } = await open(p, tport, Buffer.from('Ex'), 1);
  const ms = performance.now() - t0;
  socket.destroy();
  return ms;
}

async function setupSample(paths, tport, n) {
  const res = new Map(paths.map((p) => [p.label, []]));
  const direct = [];
  for (let i = 0; i < n; i++) {
    for (const p of paths) {
      direct.push(await echoOnce(null, tport));
      res.get(p.label).push(await echoOnce(p, tport));
    }
  }
  return { res, direct };
}

async function rate(p, tport, ms) {
  const done = await countFor(ms, LOOPS, () => echoOnce(p, tport));
  rate.last = done;
  return done / (ms / 1000);
}

/** System calls per tunnel of a process (every thread of it and of its children) through one round of `run`. */
async function straceRound(pid, run) {
  const tids = [];
  const collect = (p) => {
    for (const t of readdirSync(`/proc/${p}/task`)) tids.push(t);
    try {
      for (const c of readFileSync(`/proc/${p}/task/${p}/children`, 'utf8').split(/\s+/).filter(Boolean)) collect(c);
    } catch {
      /* no children file */
    }
  };
  collect(pid);
  const out = path.join(os.tmpdir(), `setup-strace-${pid}-${Date.now()}.txt`);
  const st = spawn('strace', ['-c', '-f', '-q', '-o', out, ...tids.flatMap((t) => ['-p', t])], { stdio: 'ignore' });
  await sleep(500); // attached
  await run();
  const tunnels = rate.last;
  await new Promise((r) => (st.once('exit', r), st.kill('SIGINT')));
  const byCall = {};
  let total = 0;
  for (const line of readFileSync(out, 'utf8').split('\n')) {
    const m = /^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$/.exec(line);
    if (!m) continue;
    if (m[2] === 'total') total = Number(m[1]);
    else byCall[m[2]] = +(Number(m[1]) / tunnels).toFixed(1);
  }
  const top = Object.entries(byCall)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 12);
  return { total: +(total / tunnels).toFixed(1), top: Object.fromEntries(top) };
}

/** 64 tunnels uploading SIZE bytes in all: MB/s. */
async function upload64(p, tport) {
  const each = Math.floor(SIZE / 64);
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      const { socket } = await open(p, tport, len64('U', each), 0);
      await pumpUpload(socket, each);
    }),
  );
  return SIZE / 1e6 / ((performance.now() - t0) / 1000);
}

// ------------------------------------------------------------------ profile

function summarizeProfile(file) {
  const prof = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const self = new Map();
  const dt = prof.timeDeltas;
  for (let i = 0; i < prof.samples.length; i++) {
    const n = byId.get(prof.samples[i]);
    const f = n.callFrame;
    const where = f.url ? `${f.url.replace(/^file:\/\//, '').replace(`${ROOT}/`, '')}:${f.lineNumber + 1}` : '';
    const key = `${f.functionName || '(anonymous)'} ${where}`.trim();
    self.set(key, (self.get(key) ?? 0) + (dt[i] ?? 0));
  }
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const busy = total - (self.get('(idle)') ?? 0);
  const idle = total - busy;
  const top = [...self.entries()]
    .filter(([k]) => k !== '(idle)')
    .sort((a, b) => b[1] - a[1])
    .slice(0, 25);
  return {
    total,
    busy,
    idlePctOfTotal: +((idle / total) * 100).toFixed(1),
    top: top.map(([k, v]) => ({ fn: k, pctOfBusy: +((v / busy) * 100).toFixed(1) })),
  };
}

// ------------------------------------------------------------------ main

async function main() {
  const load0 = os.loadavg();
  portRange = widenPorts();
  if (!DANTE) log('dante: not run (not installed, or --no-dante)');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'setup-bench-'));
  const running = [];
  const target = spawn(
    process.execPath,
    [path.join(ROOT, 'bench/gateway.mjs'), '--role', 'target', '--port', String(await freePort())],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const stopAll = () => {
    target.kill('SIGTERM');
    for (const x of running) (x.kill ?? (() => x.p.kill('SIGTERM')))();
    restorePorts();
  };
  // Interrupted or stopped (SIGTERM too): every proxy goes and the port range comes back.
  for (const sig of ['SIGINT', 'SIGTERM']) process.once(sig, () => (stopAll(), process.exit(130)));
  try {
    const report = await phase('start', 120_000, async () => {
      const tport = JSON.parse(
        await new Promise((r) => createInterface({ input: target.stdout }).once('line', r)),
      ).port;
      const ours = await startProxyd(dir);
      running.push(ours);
      const ours2 = WORKERS ? await startProxyd(dir, { workers: 2 }) : null;
      if (ours2) running.push(ours2);
      const squid = await startSquid(dir);
      running.push(squid);
      const dante = DANTE ? await startDante(dir) : null;
      if (dante) running.push(dante);
      const floor = FLOOR ? await startFloor(1, { socks: true }) : null;
      if (floor) running.push(floor);
      const floor2 = FLOOR && WORKERS ? await startFloor(2, { socks: true }) : null;
      if (floor2) running.push(floor2);
      return { tport, ours, ours2, squid, dante, floor, floor2 };
    }).then((started) => measure(started, load0, dir));
    console.log(JSON.stringify(report, null, 2));
  } finally {
    stopAll();
  }
}

async function measure({ tport, ours, ours2, squid, dante, floor, floor2 }, load0, dir) {
  const paths = [...ours.paths, ...squid.paths, ...(dante?.paths ?? []), ...(floor?.paths ?? [])];
  const all = [...paths, ...(ours2?.paths ?? []), ...(floor2?.paths ?? [])];
  // Warm: every path through WARM_MS of the tunnels/s loops, as a daemon in service has run its connection path hot
  // (a Node daemon's first ~6,000 tunnels run as unoptimised code, slower and keeping more alive: decisions.md#d-039,
  // "GC: tunnels that outlived young collections"; the peers warm alike).
  const warmUp = {};
  await phase('warm-up', 60_000 + all.length * WARM_MS * 2, async () => {
    // In one-second slices, so the report shows when each path stopped getting faster.
    for (const p of all) {
      warmUp[p.label] = [];
      // Two processes share a path's tunnels, and each warms up on its own: twice the time, so each sees as many.
      const ms = (ours2?.paths.includes(p) ?? false) || (floor2?.paths.includes(p) ?? false) ? 2 * WARM_MS : WARM_MS;
      for (let left = ms; left > 0; left -= 1000) {
        const slice = Math.min(1000, left);
        warmUp[p.label].push(Math.round((await countFor(slice, LOOPS, () => echoOnce(p, tport))) / (slice / 1000)));
      }
    }
  });
  const report = { direct: {}, rows: [], warmUp };
  let res = null;
  let direct = [];
  if (PHASES.has('setup')) {
    log(`set-up: ${LAT_N} per path, alternating with direct`);
    ({ res, direct } = await phase('set-up', 30_000 + LAT_N * paths.length * 20, () =>
      setupSample(paths, tport, LAT_N),
    ));
  }
  const rates = new Map([...all, { label: 'direct' }].map((p) => [p.label, []]));
  const cpuPer = new Map(all.map((p) => [p.label, []]));
  const leads = new Map(all.map((p) => [p.label, []]));
  const pidOf = new Map(
    [
      [ours, [ours.p.pid]],
      ...(ours2 ? [[ours2, [ours2.p.pid]]] : []),
      [squid, [squid.p.pid]],
      ...(dante ? [[dante, [dante.p.pid]]] : []),
      ...[floor, floor2].filter(Boolean).map((f) => [f, f.pids]),
    ].flatMap(([x, pids]) => x.paths.map((p) => [p.label, pids])),
  );
  let locks = null;
  if (PHASES.has('rate')) {
    log(
      `tunnels/s: ${REPS} rounds of ${RATE_MS} ms per path (and direct), alternating${LEAD_MS > 0 ? `, each after a lead-in of ${LEAD_MS} ms` : ''}`,
    );
    const before = ours2 ? await lockCounters(ours2.api) : null;
    for (let r = 0; r < REPS; r++) {
      await phase(`tunnels/s round ${r + 1}`, 60_000 + all.length * 2 * (LEAD_MS + RATE_MS + 20_000), async () => {
        for (const p of all) {
          rates.get('direct').push(await rate(null, tport, RATE_MS));
          if (LEAD_MS > 0) leads.get(p.label).push(await rate(p, tport, LEAD_MS));
          const c0 = treeCpu(pidOf.get(p.label));
          rates.get(p.label).push(await rate(p, tport, RATE_MS));
          cpuPer.get(p.label).push(((treeCpu(pidOf.get(p.label)) - c0) / rate.last) * 1e6);
        }
      });
    }
    await sleep(1500); // the last records written
    if (ours2) {
      const after = await lockCounters(ours2.api);
      locks = Object.fromEntries(Object.keys(after).map((k) => [k, after[k] - before[k]]));
      log(`--workers 2 through the tunnels/s rounds: ${JSON.stringify(locks)}`);
    }
  }
  const up = new Map(paths.map((p) => [p.label, []]));
  if (PHASES.has('64')) {
    log(`64 tunnels: ${SIZE / 2 ** 20} MiB up in all, ${REPS} rounds, each paired with 64 direct connections`);
    for (let r = 0; r < REPS; r++) {
      await phase(`64 tunnels round ${r + 1}`, 60_000 + paths.length * 2 * 60_000, async () => {
        for (const p of paths) {
          const d = await upload64(null, tport);
          up.get(p.label).push((await upload64(p, tport)) / d);
        }
      });
    }
  }
  const load1 = os.loadavg();
  const maybe = (xs, f) => (xs && xs.length ? f(xs) : undefined);
  /** A path's tunnels/s figures: the same for the single-process paths and the two-process ones. */
  const rateFields = (label) => ({
    tunnelsPerSec: maybe(rates.get(label), (v) => Math.round(med(v))),
    tunnelsRange: maybe(rates.get(label), (v) => range(v, 0)),
    cpuUsPerTunnel: maybe(cpuPer.get(label), (v) => Math.round(med(v))),
    leadTunnelsPerSec: maybe(leads.get(label), (v) => Math.round(med(v))),
  });
  const rows = paths.map((p) => {
    const xs = res?.get(p.label);
    return {
      path: p.label,
      setupAddedP50: maybe(xs, (v) => +(med(v) - med(direct)).toFixed(3)),
      setupAddedP99: maybe(xs, (v) => +(pct(v, 99) - pct(direct, 99)).toFixed(3)),
      ...rateFields(p.label),
      conc64VsDirect: maybe(up.get(p.label), (v) => +med(v).toFixed(2)),
      conc64Range: maybe(up.get(p.label), (v) => range(v)),
    };
  });
  for (const p of [...(ours2?.paths ?? []), ...(floor2?.paths ?? [])])
    rows.push({ path: p.label, ...rateFields(p.label) });
  Object.assign(report, {
    ...runInfo(argv, load0, load1),
    portRange: portRange?.join('-') ?? null,
    direct: {
      p50: maybe(direct, (v) => +med(v).toFixed(3)),
      p99: maybe(direct, (v) => +pct(v, 99).toFixed(3)),
      tunnelsPerSec: maybe(rates.get('direct'), (v) => Math.round(med(v))),
    },
    rows,
    workers2LockCounters: locks,
  });
  if (STRACE) {
    report.syscallsPerTunnel = {};
    for (const p of paths) {
      const r = await phase(`strace ${p.label}`, 120_000, () =>
        straceRound(pidOf.get(p.label)[0], () => rate(p, tport, RATE_MS)),
      );
      report.syscallsPerTunnel[p.label] = r;
      log(`strace ${p.label}: ${r.total} system calls per tunnel`);
    }
  }
  for (const x of [ours, ours2, squid, dante, floor, floor2].filter(Boolean))
    await phase('stop', 30_000, () => x.stop());

  if (PROFILE) {
    mkdirSync(PROFILE, { recursive: true });
    log('profile: one more daemon under --cpu-prof, 8 loops of CONNECT tunnels with credentials for 5 s');
    await phase('profile', 120_000, async () => {
      const prof = await startProxyd(dir, { profileDir: PROFILE });
      for (let i = 0; i < 300; i++) await echoOnce(prof.paths[0], tport);
      await rate(prof.paths[0], tport, 5000);
      await prof.stop();
    });
    // The main thread's profile (CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile, thread 0): the reload worker's
    // thread writes one of its own.
    const file = readdirSync(PROFILE)
      .filter((f) => /\.0\.\d+\.cpuprofile$/.test(f))
      .map((f) => path.join(PROFILE, f))
      .sort()
      .pop();
    report.profile = { file, ...summarizeProfile(file) };
  }
  return report;
}

// ------------------------------------------------------------------ --dedicated

/**
 * `--dedicated` (docs/benchmarks/dedicated.md, "Dedicated addresses"): what the dedicated-address lookup adds to set-up. Two
 * daemons on one egress pool of 11,264 loopback addresses (127.1.0.0 - 127.1.43.255): one with no address assigned,
 * one with 10,000 assigned over 1,000 accounts (10 each; the bench user's account is one of them). Paths: the bench
 * user on the first (the shared pool, no reservation), the same user on the second (an owner: leaves from its own 10),
 * and another account's user on the second (the shared rotation over the 1,264 addresses left). Set-up added p50/p99
 * (alternating with a direct connection) and tunnels/s with CPU per tunnel, alternating between the paths. A third
 * daemon with a pool of 10 addresses and nothing dedicated is the baseline of leaving from 10 addresses at all.
 */
async function mainDedicated() {
  const load0 = os.loadavg();
  portRange = widenPorts();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'setup-dedicated-'));
  const running = [];
  const target = spawn(
    process.execPath,
    [path.join(ROOT, 'bench/gateway.mjs'), '--role', 'target', '--port', String(await freePort())],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const stopAll = () => {
    target.kill('SIGTERM');
    for (const x of running) x.p.kill('SIGTERM');
    restorePorts();
  };
  for (const sig of ['SIGINT', 'SIGTERM']) process.once(sig, () => (stopAll(), process.exit(130)));
  const POOL = Array.from({ length: 11 }, (_, i) => `127.1.${i * 4}.0/22`).join(',');
  const poolArgs = ['--egress-pool', POOL, '--node-name', 'bench'];
  try {
    const tport = JSON.parse(await new Promise((r) => createInterface({ input: target.stdout }).once('line', r))).port;
    const none = await phase('start (none)', 180_000, () => startProxyd(dir, { name: 'proxyd-none', args: poolArgs }));
    running.push(none);
    const ded = await phase('start (dedicated)', 180_000, () =>
      startProxyd(dir, { name: 'proxyd-dedicated', args: poolArgs }),
    );
    running.push(ded);
    // The baseline of leaving from 10 addresses at all: a pool of 10, nothing dedicated (each address's ports in
    // TIME_WAIT fill up as fast as an owner's 10 dedicated ones do).
    const ten = await phase('start (pool of 10)', 60_000, () =>
      startProxyd(dir, {
        name: 'proxyd-pool10',
        args: ['--egress-pool', '127.2.0.0-127.2.0.9', '--node-name', 'bench10'],
      }),
    );
    running.push(ten);
    // Another account's user on the dedicated daemon (the shared rotation), made as the operator makes one.
    const dataDir = path.join(dir, 'proxyd-dedicated');
    const admin = (a, input = '') => {
      const r = spawnSync(process.execPath, [path.join(ROOT, 'bin/proxyd'), 'admin', ...a, '--data-dir', dataDir], {
        input,
        encoding: 'utf8',
      });
      if (r.status !== 0) throw new Error(r.stderr);
      return JSON.parse(r.stdout);
    };
    admin(
      ['account', 'create', '--email', 'shared@example.com', '--password-stdin', '--verified'],
      'bench password 123\n',
    );
    const shared = {
      user: 'shared-user',
      password: admin(['proxy-user', 'create', '--email', 'shared@example.com', '--username', 'shared-user']).password,
    };
    // 10,000 addresses over 1,000 accounts, through the store the admin commands use (1,000 commands would take minutes).
    const t0 = performance.now();
    const { openStore } = await import(path.join(ROOT, 'dist/daemon/store/index.js'));
    const store = await openStore({ dataDir });
    const toIp = (n) => `127.1.${n >> 8}.${n & 255}`;
    const bench = await store.accounts.findByEmail('bench@example.com');
    // --dedicated-aa: the same two daemons with nothing assigned (an A/A run: what differs between the two anyway).
    for (let a = 0; a < (argv.includes('--dedicated-aa') ? 0 : 1000); a++) {
      const id = a === 0 ? bench.id : (await store.accounts.create(`owner-${a}@example.com`, 'x', true)).id;
      await store.egress.assign(
        id,
        'bench',
        Array.from({ length: 10 }, (_, k) => toIp(a * 10 + k)),
      );
    }
    await store.close();
    log(`assigned 10,000 addresses over 1,000 accounts in ${Math.round(performance.now() - t0)} ms`);
    await sleep(1500); // every node reads the change within 1 s
    const paths = [
      { ...none.paths[0], label: 'none: CONNECT' },
      { ...none.paths[1], label: 'none: SOCKS5' },
      { ...ded.paths[0], label: 'dedicated, owner: CONNECT' },
      { ...ded.paths[1], label: 'dedicated, owner: SOCKS5' },
      { ...ded.paths[0], label: 'dedicated, shared user: CONNECT', auth: shared },
      { ...ded.paths[1], label: 'dedicated, shared user: SOCKS5', auth: shared },
      { ...ten.paths[0], label: 'pool of 10: CONNECT' },
      { ...ten.paths[1], label: 'pool of 10: SOCKS5' },
    ];
    const pidOf = new Map(
      paths.map((p) => [
        p.label,
        [p.label.startsWith('none') ? none.p.pid : p.label.startsWith('pool') ? ten.p.pid : ded.p.pid],
      ]),
    );
    log(`warm-up: ${WARM_MS} ms of tunnels/s per path`);
    for (const p of paths) await phase(`warm ${p.label}`, WARM_MS + 60_000, () => rate(p, tport, WARM_MS));
    const rates = new Map(paths.map((p) => [p.label, []]));
    const cpuPer = new Map(paths.map((p) => [p.label, []]));
    const sets = new Map(paths.map((p) => [p.label, []]));
    const directs = [];
    for (let r = 0; r < REPS; r++) {
      const { res, direct } = await phase(`set-up round ${r + 1}`, 60_000 + LAT_N * paths.length * 20, () =>
        setupSample(paths, tport, LAT_N),
      );
      directs.push(...direct);
      for (const p of paths) sets.get(p.label).push(...res.get(p.label));
      await phase(`tunnels/s round ${r + 1}`, 60_000 + paths.length * (RATE_MS + 20_000), async () => {
        for (const p of paths) {
          const c0 = treeCpu(pidOf.get(p.label));
          rates.get(p.label).push(await rate(p, tport, RATE_MS));
          cpuPer.get(p.label).push(((treeCpu(pidOf.get(p.label)) - c0) / rate.last) * 1e6);
        }
      });
    }
    const load1 = os.loadavg();
    const rows = paths.map((p) => {
      const xs = sets.get(p.label);
      return {
        path: p.label,
        setupAddedP50: +(med(xs) - med(directs)).toFixed(3),
        setupAddedP99: +(pct(xs, 99) - pct(directs, 99)).toFixed(3),
        tunnelsPerSec: Math.round(med(rates.get(p.label))),
        tunnelsRange: range(rates.get(p.label), 0),
        cpuUsPerTunnel: Math.round(med(cpuPer.get(p.label))),
        cpuRange: range(cpuPer.get(p.label), 0),
      };
    });
    // Where the owner's and the shared user's tunnels left from, as the daemon counts them (the pool's split).
    const text = await (await fetch(`${ded.api}/metrics`)).text();
    const states = Object.fromEntries(
      [...text.matchAll(/^proxyd_egress_addresses\{state="(\w+)"\} (\d+)$/gm)].map((m) => [m[1], Number(m[2])]),
    );
    console.log(
      JSON.stringify(
        {
          ...runInfo(argv, load0, load1),
          direct: { p50: +med(directs).toFixed(3), p99: +pct(directs, 99).toFixed(3) },
          egressAddresses: states,
          rows,
        },
        null,
        2,
      ),
    );
  } finally {
    stopAll();
  }
}

await (argv.includes('--dedicated') ? mainDedicated() : main()).catch((e) => {
  console.error(`[setup] failed: ${e.message}`);
  process.exitCode = 1;
});
