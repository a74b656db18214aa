#!/usr/bin/env node
// Where a tunnel's CPU goes, function by function, in proxyd and in the bare relay (bench/peers/node-floor.mjs),
// from Linux perf's samples: cpu-clock at 2 kHz with call graphs (V8 keeps frame pointers; `--perf-basic-prof`
// names the JIT's code). A sample counts once for every function on its stack, so a row is the time spent in
// that function and what it called ("inclusive"), in µs per tunnel.
//
//   node bench/perf-split.mjs [--reps 3] [--tunnels 40000] [--warm 20000] [--top 30] [--kind connect|socks5] [--json]
//
// Each daemon starts as bench/setup.mjs starts it (bench/lib/peers.mjs; proxyd: SQLite, metering and the connection
// log on, credentials on every tunnel; the floor: no admission, its SOCKS5 taking any RFC 1929 credentials): --warm
// tunnels unrecorded, then `perf record -p PID` from half a second before --tunnels tunnels (8 loops: connect,
// handshake, a byte echoed, close) until they are done, so a total also holds the daemon's timers of that
// half-second; --reps rounds, the two daemons alternating, each row the median of its rounds. Prints each
// daemon's µs a tunnel, proxyd's own functions (dist/, inclusive, and as a share of proxyd's median), and the
// functions both run where proxyd spends more in the function itself (Node's and the kernel's code, which proxyd
// drives differently: its own samples, not its callees'). Sampled, on a machine the load generator shares: a
// row moves by a few tenths of a µs between rounds, a total by a quarter or more (the shares move far less).
// Needs perf (Debian's linux-perf) and a kernel that lets this user sample its own processes
// (kernel.perf_event_paranoid at most 2).
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { startFloor, startProxyd } from './lib/peers.mjs';
import { freePort, sleep, tunnelLoops, within } from './lib/tunnel-bench.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1] : def);
const TUNNELS = Number(opt('tunnels', 40_000));
const WARM = Number(opt('warm', 20_000));
const TOP = Number(opt('top', 30));
const REPS = Number(opt('reps', 3));
const KIND = opt('kind', 'connect');
const HZ = 2000;
const log = (...a) => console.error('[perf-split]', ...a);
// Every process bench/lib/peers.mjs starts (proxyd and the floor alike) names its JIT code for perf.
process.env.PROXYD_BENCH_NODE_FLAGS = [process.env.PROXYD_BENCH_NODE_FLAGS, '--perf-basic-prof']
  .filter(Boolean)
  .join(' ');

if (spawnSync('sh', ['-c', 'command -v perf']).status !== 0) {
  log('perf is not installed (apt-get install linux-perf)');
  process.exit(2);
}

/** proxyd or the floor (bench/lib/peers.mjs, under --perf-basic-prof for JIT names): its process and the path measured. */
async function start(which, dir) {
  const x = which === 'floor' ? await startFloor(1, { socks: KIND === 'socks5' }) : await startProxyd(dir);
  return { p: x.p, d: x.paths.find((path) => path.kind === KIND) };
}

/** A JIT frame's name without its tier mark (`*` optimised, `+` Maglev, `^` baseline, `~` interpreted) or this tree's path. */
function frameName(sym) {
  let s = sym.replace(`file://${ROOT}/dist/`, '').replace(`${ROOT}/`, '');
  const m = /^JS:([*+^~]?)'?/.exec(s);
  if (m) s = `JS:${s.slice(m[0].length)}`;
  return s;
}

/** Samples per function from `perf script`'s stacks: on the stack (inclusive), and at its top (self). */
async function inclusive(file) {
  const counts = new Map();
  const selfCounts = new Map();
  let samples = 0;
  let stack = new Set();
  let leaf = null;
  const flush = () => {
    if (stack.size === 0) return;
    samples++;
    for (const f of stack) counts.set(f, (counts.get(f) ?? 0) + 1);
    selfCounts.set(leaf, (selfCounts.get(leaf) ?? 0) + 1);
    stack = new Set();
    leaf = null;
  };
  const ps = spawn('perf', ['script', '-i', file, '-F', 'ip,sym'], { stdio: ['ignore', 'pipe', 'ignore'] });
  for await (const line of createInterface({ input: ps.stdout })) {
    const t = line.trim();
    if (t === '') flush();
    else {
      const sp = t.indexOf(' ');
      const name = frameName(sp < 0 ? t : t.slice(sp + 1));
      leaf ??= name;
      stack.add(name);
    }
  }
  flush();
  return { samples, counts, selfCounts };
}

async function measure(which, tport) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'perf-split-'));
  let daemon = null;
  let rec = null;
  try {
    daemon = await start(which, dir);
    const { d } = daemon;
    await tunnelLoops(d, tport, WARM);
    const file = path.join(dir, 'perf.data');
    rec = spawn('perf', ['record', '-e', 'cpu-clock', '-F', String(HZ), '-g', '-p', String(daemon.p.pid), '-o', file], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let recErr = '';
    rec.stderr.on('data', (b) => (recErr += b));
    // perf ends on our SIGINT by raising it again: that is its normal end.
    const recorded = new Promise((resolve) =>
      rec.once('exit', (code, signal) => resolve(signal === 'SIGINT' ? 0 : code)),
    );
    const why = () => recErr.trim().split('\n').pop() ?? '';
    await sleep(500); // perf attaches
    if (rec.exitCode !== null)
      throw new Error(
        `perf record exited ${rec.exitCode}: ${why()} (sampling needs kernel.perf_event_paranoid at most 2)`,
      );
    const t0 = Date.now();
    await tunnelLoops(d, tport, TUNNELS);
    const ms = Date.now() - t0;
    rec.kill('SIGINT');
    const code = await within(recorded, 60_000, 'perf record after SIGINT: no end within 60 s');
    if (code !== 0) throw new Error(`perf record exited ${code}: ${why()}`);
    const { samples, counts, selfCounts } = await inclusive(file);
    if (samples === 0) throw new Error(`${which}: perf recorded no samples`);
    const us = (n) => (n * 1e6) / HZ / TUNNELS;
    log(`${which}: ${TUNNELS} tunnels in ${ms} ms, ${samples} samples, ${us(samples).toFixed(1)} µs a tunnel`);
    return {
      samples,
      usPerTunnel: us(samples),
      tunnelsPerSec: Math.round((TUNNELS * 1000) / ms),
      us: new Map([...counts].map(([k, v]) => [k, us(v)])),
      self: new Map([...selfCounts].map(([k, v]) => [k, us(v)])),
    };
  } finally {
    if (rec && rec.exitCode === null) rec.kill('SIGKILL');
    if (daemon) {
      daemon.p.kill('SIGKILL');
      // V8 writes its map of JIT names to /tmp whatever TMPDIR says.
      rmSync(`/tmp/perf-${daemon.p.pid}.map`, { force: true });
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

const med = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const r2 = (x) => +x.toFixed(2);
const target = spawn(
  process.execPath,
  [path.join(ROOT, 'bench/gateway.mjs'), '--role', 'target', '--port', String(await freePort())],
  { stdio: ['pipe', 'pipe', 'inherit'] },
);
try {
  const tport = JSON.parse(await new Promise((r) => createInterface({ input: target.stdout }).once('line', r))).port;
  const runs = { proxyd: [], floor: [] };
  for (let r = 0; r < REPS; r++)
    for (const which of r % 2 ? ['floor', 'proxyd'] : ['proxyd', 'floor'])
      runs[which].push(await measure(which, tport));
  /** A function's median µs over the rounds (0 in a round that did not sample it), inclusive or its own. */
  const median = (which, name, of = 'us') => med(runs[which].map((m) => m[of].get(name) ?? 0));
  const total = (which) => runs[which].map((m) => m.usPerTunnel);
  const names = (which) => new Set(runs[which].flatMap((m) => [...m.us.keys()]));
  const ourCode = (name) => name.startsWith('JS:') && / (gateway|daemon|contract)\//.test(name);
  const whole = med(total('proxyd'));
  const own = [...names('proxyd')]
    .filter(ourCode)
    .map((name) => ({
      name,
      us: r2(median('proxyd', name)),
      share: +((100 * median('proxyd', name)) / whole).toFixed(1),
    }))
    .sort((a, b) => b.us - a.us)
    .slice(0, TOP);
  const floorNames = names('floor');
  const more = [...names('proxyd')]
    .filter((name) => floorNames.has(name) && !ourCode(name))
    .map((name) => ({ name, proxyd: r2(median('proxyd', name, 'self')), floor: r2(median('floor', name, 'self')) }))
    .map((x) => ({ ...x, more: r2(x.proxyd - x.floor) }))
    .sort((a, b) => b.more - a.more)
    .slice(0, TOP);
  const out = {
    kind: KIND,
    reps: REPS,
    tunnels: TUNNELS,
    warm: WARM,
    when: new Date().toISOString(),
    node: process.version,
    load: os.loadavg().map((x) => +x.toFixed(2)),
    usPerTunnel: { proxyd: total('proxyd').map(r2), floor: total('floor').map(r2) },
    tunnelsPerSecUnderPerf: {
      proxyd: runs.proxyd.map((m) => m.tunnelsPerSec),
      floor: runs.floor.map((m) => m.tunnelsPerSec),
    },
    own,
    more,
  };
  if (argv.includes('--json')) console.log(JSON.stringify(out, null, 2));
  else {
    console.log(
      `µs a tunnel, all samples: proxyd ${out.usPerTunnel.proxyd.join(' / ')} (median ${r2(med(total('proxyd')))}), floor ${out.usPerTunnel.floor.join(' / ')} (median ${r2(med(total('floor')))})`,
    );
    console.log(
      "\nproxyd's own functions (inclusive µs a tunnel, median; % of proxyd's median, steadier than µs on a shared machine):",
    );
    for (const x of own) console.log(`${String(x.us).padStart(8)} ${`${x.share} %`.padStart(7)}  ${x.name}`);
    console.log(
      '\nfunctions both run, where proxyd spends more in the function itself (self µs: proxyd, floor, difference):',
    );
    for (const x of more)
      console.log(
        `${String(x.proxyd).padStart(8)} ${String(x.floor).padStart(8)} ${`+${x.more}`.padStart(8)}  ${x.name}`,
      );
  }
} finally {
  target.kill('SIGTERM');
}
