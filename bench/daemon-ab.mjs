#!/usr/bin/env node
// A/B of whole daemons on a noisy machine: this tree's `proxyd serve` beside the same at a git revision (and,
// if asked, squid and the bare relay bench/peers/node-floor.mjs), all running at once, rounds alternating
// between them (A, B, …, then backwards) so outside load hits every one alike. Per daemon: tunnels/s and CPU
// per tunnel split into user and system time (/proc/<pid>/stat over each round), medians and ranges.
//
//   node bench/daemon-ab.mjs --rev REV [--squid] [--floor] [--reps 8] [--round-ms 1500] [--warm-ms 8000] [--kind connect|socks5]
//
// The daemons run as bench/setup.mjs runs them (SQLite, metering and the connection log on, credentials on every
// tunnel; squid and the floor without). 8 loops: connect, handshake, a byte echoed, close. Run `npm run build`
// first; the revision is built into node_modules/.cache/daemon-ab/<sha>.
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { buildRev } from './lib/build-rev.mjs';
import { startFloor, startProxyd, startSquid } from './lib/peers.mjs';
import { portsWidener } from './lib/ports.mjs';
import { countFor, cpuOf, freePort, med, runInfo, sleep, tunnelOnce } from './lib/tunnel-bench.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1] : def);
const REV = opt('rev', null);
const REPS = Number(opt('reps', 8));
const ROUND_MS = Number(opt('round-ms', 1500));
/** Warm-up per daemon (ms of the loops), as bench/setup.mjs: a fresh daemon gets faster for its first ~6 s. */
const WARM_MS = Number(opt('warm-ms', 8000));
const KIND = opt('kind', 'connect');
if (!REV) {
  console.error(
    'usage: node bench/daemon-ab.mjs --rev REV [--squid] [--floor] [--reps 8] [--round-ms 1500] [--warm-ms 8000] [--kind connect|socks5]',
  );
  process.exit(2);
}

const dir = mkdtempSync(path.join(os.tmpdir(), 'daemon-ab-'));
/** What to stop at the end: the target, and every started proxy (its stop()). */
const procs = [];

/** A started proxy as a row of this bench: its path of the kind measured, and the pid whose CPU counts. */
function row(label, started, kind) {
  procs.push(started);
  const p = started.paths.find((x) => x.kind === kind) ?? started.paths[0];
  return { ...p, label, pid: started.p.pid };
}

const load0 = os.loadavg();
// Tens of thousands of connections a minute: as root the ephemeral range is widened for the run (else it may run out).
const { widenPorts, restorePorts } = portsWidener((...a) => console.error('[daemon-ab]', ...a));
widenPorts();
// Interrupted or stopped: the proxies go too, and the port range comes back.
for (const sig of ['SIGINT', 'SIGTERM'])
  process.once(sig, () => (procs.forEach((p) => void p.stop()), restorePorts(), process.exit(130)));
const target = spawn(
  process.execPath,
  [path.join(ROOT, 'bench/gateway.mjs'), '--role', 'target', '--port', String(await freePort())],
  { stdio: ['pipe', 'pipe', 'inherit'] },
);
procs.push({ stop: () => target.kill('SIGTERM') });
try {
  const tport = JSON.parse(await new Promise((r) => createInterface({ input: target.stdout }).once('line', r))).port;
  const daemons = [
    row(REV, await startProxyd(dir, { tree: buildRev(REV, 'daemon-ab'), name: 'rev' }), KIND),
    row('this tree', await startProxyd(dir, { name: 'tree' }), KIND),
  ];
  if (argv.includes('--squid')) daemons.push(row('squid', await startSquid(dir), 'connect'));
  if (argv.includes('--floor')) daemons.push(row('node floor', await startFloor(1), 'connect'));
  // Warm: past the first thousands of tunnels, which run as unoptimised code (docs/decisions.md#d-039, "GC: …").
  for (const d of daemons) await countFor(WARM_MS, 8, () => tunnelOnce(d, tport));
  const res = new Map(daemons.map((d) => [d.label, { rate: [], cpu: [], user: [], sys: [] }]));
  for (let r = 0; r < REPS; r++) {
    for (const d of r % 2 ? [...daemons].reverse() : daemons) {
      const { user: u0, system: s0 } = cpuOf(d.pid);
      const n = await countFor(ROUND_MS, 8, () => tunnelOnce(d, tport));
      const { user: u1, system: s1 } = cpuOf(d.pid);
      const x = res.get(d.label);
      x.rate.push(n / (ROUND_MS / 1000));
      x.user.push(((u1 - u0) * 1e6) / n);
      x.sys.push(((s1 - s0) * 1e6) / n);
      x.cpu.push(((u1 - u0 + s1 - s0) * 1e6) / n);
      await sleep(200);
    }
  }
  const sum = (xs) => ({
    median: Math.round(med(xs)),
    range: `${Math.round(Math.min(...xs))}–${Math.round(Math.max(...xs))}`,
  });
  const rows = [...res].map(([daemon, x]) => ({
    daemon,
    tunnelsPerSec: sum(x.rate),
    cpuUsPerTunnel: sum(x.cpu),
    userUs: sum(x.user),
    systemUs: sum(x.sys),
  }));
  console.log(
    JSON.stringify({ kind: KIND, reps: REPS, roundMs: ROUND_MS, rows, ...runInfo(argv, load0, os.loadavg()) }, null, 2),
  );
} finally {
  await Promise.all(procs.map((p) => p.stop()));
  restorePorts();
}
