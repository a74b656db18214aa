#!/usr/bin/env node
// Where a tunnel's CPU goes, function by function, in proxyd and in the bare relay (bench/peers/node-floor.mjs),
// from Linux perf's samples: cpu-clock at 2 kHz with call graphs (V8 keeps frame pointers; `--perf-basic-prof`
// names the JIT's code). A sample counts once for every function on its stack, so a row is the time spent in
// that function and what it called ("inclusive"), in µs per tunnel.
//
//   node bench/perf-split.mjs [--reps 3] [--tunnels 40000] [--warm 20000] [--top 30] [--kind connect|socks5] [--json]
//
// Each daemon runs as bench/instructions.mjs runs it (proxyd: SQLite, metering and the connection log on,
// credentials on every tunnel; the floor: CONNECT without credentials): --warm tunnels unrecorded, then
// `perf record -p PID` over --tunnels tunnels (8 loops: connect, handshake, a byte echoed, close); --reps rounds,
// the two daemons alternating, each row the median of its rounds. Prints each daemon's µs a tunnel, proxyd's own
// functions (dist/, inclusive), and the functions both run where proxyd spends more in the function itself (Node's
// and the kernel's code, which proxyd drives differently: its own samples, not its callees'). Sampled: a row moves by a few tenths of a µs between rounds, a total by several µs (the load
// generator shares the machine). Needs perf (Debian's linux-perf) and a kernel that lets this user sample its
// own processes (kernel.perf_event_paranoid ≤ 2).
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { benchUser, freePort, sleep, tunnelOnce } from './lib/tunnel-bench.mjs';

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

if (spawnSync('sh', ['-c', 'command -v perf']).status !== 0) {
  log('perf is not installed (apt-get install linux-perf)');
  process.exit(2);
}

/** proxyd (or the floor) with JIT names for perf; resolves once it listens. */
async function start(which, dir) {
  const node = [process.execPath, '--perf-basic-prof', '--max-semi-space-size=8'];
  let auth = null;
  let port = 0;
  let args;
  if (which === 'floor') {
    port = await freePort();
    args = [...node, path.join(ROOT, 'bench/peers/node-floor.mjs'), String(port)];
  } else {
    const proxyd = path.join(ROOT, 'bin/proxyd');
    const dataDir = path.join(dir, 'data');
    mkdirSync(dataDir);
    auth = benchUser(proxyd, dataDir);
    args = [...node, proxyd, 'serve', '--data-dir', dataDir, '--api-listen', '127.0.0.1:0', '--http-proxy-listen', '127.0.0.1:0',
      '--socks-listen', '127.0.0.1:0', '--allow-private-targets', '--log-level', 'warn'];
  }
  const p = spawn(args[0], args.slice(1), { stdio: ['ignore', 'pipe', 'ignore'] });
  const ready = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${which}: no ready line within 30 s`)), 30_000);
    p.once('exit', (c) => reject(new Error(`${which} exited ${c}`)));
    createInterface({ input: p.stdout }).on('line', (l) => {
      if (l === 'ready') resolve({ httpProxy: `127.0.0.1:${port}` });
      else if (l.startsWith('{')) resolve(JSON.parse(l));
      else return;
      clearTimeout(timer);
    });
  });
  const kind = which === 'floor' ? 'connect' : KIND;
  const at = kind === 'socks5' ? ready.socks5 : ready.httpProxy;
  return { p, auth, label: which, kind, port: Number(at.slice(at.lastIndexOf(':') + 1)) };
}

async function tunnels(d, tport, n) {
  let left = n;
  await Promise.all(Array.from({ length: 8 }, async () => {
    while (left-- > 0) await tunnelOnce(d, tport, 60_000);
  }));
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
  const d = await start(which, dir);
  try {
    await tunnels(d, tport, WARM);
    const file = path.join(dir, 'perf.data');
    const rec = spawn('perf', ['record', '-e', 'cpu-clock', '-F', String(HZ), '-g', '-p', String(d.p.pid), '-o', file], { stdio: 'ignore' });
    await sleep(500);
    const t0 = Date.now();
    await tunnels(d, tport, TUNNELS);
    const ms = Date.now() - t0;
    rec.kill('SIGINT');
    await new Promise((r) => rec.once('exit', r));
    const { samples, counts, selfCounts } = await inclusive(file);
    const us = (n) => (n * 1e6) / HZ / TUNNELS;
    log(`${which}: ${TUNNELS} tunnels in ${ms} ms, ${samples} samples, ${us(samples).toFixed(1)} µs a tunnel`);
    return { samples, usPerTunnel: us(samples), tunnelsPerSec: Math.round((TUNNELS * 1000) / ms), us: new Map([...counts].map(([k, v]) => [k, us(v)])), self: new Map([...selfCounts].map(([k, v]) => [k, us(v)])) };
  } finally {
    d.p.kill('SIGKILL');
    rmSync(path.join(os.tmpdir(), `perf-${d.p.pid}.map`), { force: true });
    rmSync(dir, { recursive: true, force: true });
  }
}

const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
const r2 = (x) => +x.toFixed(2);
const target = spawn(process.execPath, [path.join(ROOT, 'bench/gateway.mjs'), '--role', 'target', '--port', String(await freePort())], { stdio: ['pipe', 'pipe', 'inherit'] });
try {
  const tport = JSON.parse(await new Promise((r) => createInterface({ input: target.stdout }).once('line', r))).port;
  const runs = { proxyd: [], floor: [] };
  for (let r = 0; r < REPS; r++) for (const which of r % 2 ? ['floor', 'proxyd'] : ['proxyd', 'floor']) runs[which].push(await measure(which, tport));
  /** A function's median µs over the rounds (0 in a round that did not sample it), inclusive or its own. */
  const median = (which, name, of = 'us') => med(runs[which].map((m) => m[of].get(name) ?? 0));
  const total = (which) => runs[which].map((m) => m.usPerTunnel);
  const names = (which) => new Set(runs[which].flatMap((m) => [...m.us.keys()]));
  const ourCode = (name) => name.startsWith('JS:') && / (gateway|daemon|contract)\//.test(name);
  const whole = med(total('proxyd'));
  const own = [...names('proxyd')]
    .filter(ourCode)
    .map((name) => ({ name, us: r2(median('proxyd', name)), share: +((100 * median('proxyd', name)) / whole).toFixed(1) }))
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
    kind: KIND, reps: REPS, tunnels: TUNNELS, warm: WARM, when: new Date().toISOString(), node: process.version, load: os.loadavg().map((x) => +x.toFixed(2)),
    usPerTunnel: { proxyd: total('proxyd').map(r2), floor: total('floor').map(r2) },
    tunnelsPerSecUnderPerf: { proxyd: runs.proxyd.map((m) => m.tunnelsPerSec), floor: runs.floor.map((m) => m.tunnelsPerSec) },
    own, more,
  };
  if (argv.includes('--json')) console.log(JSON.stringify(out, null, 2));
  else {
    console.log(`µs a tunnel, all samples: proxyd ${out.usPerTunnel.proxyd.join(' / ')} (median ${r2(med(total('proxyd')))}), floor ${out.usPerTunnel.floor.join(' / ')} (median ${r2(med(total('floor')))})`);
    console.log("\nproxyd's own functions (inclusive µs a tunnel, median; % of proxyd's median, steadier than µs on a shared machine):");
    for (const x of own) console.log(`${String(x.us).padStart(8)} ${`${x.share} %`.padStart(7)}  ${x.name}`);
    console.log('\nfunctions both run, where proxyd spends more in the function itself (self µs: proxyd, floor, difference):');
    for (const x of more) console.log(`${String(x.proxyd).padStart(8)} ${String(x.floor).padStart(8)} ${`+${x.more}`.padStart(8)}  ${x.name}`);
  }
} finally {
  target.kill('SIGTERM');
}
