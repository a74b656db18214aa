#!/usr/bin/env node
// Where a tunnel's CPU goes, per process, one worker against two: user and system time and context switches
// (voluntary and involuntary, every thread) per tunnel, read from /proc around a tunnels/s round of each daemon
// and kind, and with two workers the primary's own share (docs/benchmarks/workers-reuseport.md, "Two processes warm up apart").
//
//   node bench/process-split.mjs [--warm-ms 8000] [--round-ms 4000] [--kinds connect,socks5] [--floor]
//
// --floor: the same for the bare relay bench/peers/node-floor.mjs (CONNECT and SOCKS5, no credentials checked,
// no bookkeeping), one process against two on SO_REUSEPORT: what a second process costs any relay on `net`.
//
// Daemons run as bench/setup.mjs runs them (lib/peers.mjs); a two-worker daemon warms twice as long (each
// worker warms on its half of the tunnels). 8 loops: connect, handshake, a byte echoed, close. Run `npm run build` first.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { startFloor, startProxyd } from './lib/peers.mjs';
import { portsWidener } from './lib/ports.mjs';
import { countFor, cpuOf, freePort, runInfo, tunnelOnce } from './lib/tunnel-bench.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1] : def);
const WARM_MS = Number(opt('warm-ms', 8000));
const ROUND_MS = Number(opt('round-ms', 4000));
const KINDS = opt('kinds', 'connect,socks5').split(',');
const FLOOR = argv.includes('--floor');

/** [user µs, system µs, voluntary switches, involuntary switches] of a process, all its threads. */
function sample(pid) {
  const { user, system } = cpuOf(pid);
  let vol = 0;
  let inv = 0;
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    const s = readFileSync(`/proc/${pid}/task/${t}/status`, 'utf8');
    vol += Number(/\nvoluntary_ctxt_switches:\s+(\d+)/.exec(s)[1]);
    inv += Number(/nonvoluntary_ctxt_switches:\s+(\d+)/.exec(s)[1]);
  }
  return [user * 1e6, system * 1e6, vol, inv];
}
const children = (pid) =>
  readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(/\s+/).filter(Boolean).map(Number);

const load0 = os.loadavg();
const { widenPorts, restorePorts } = portsWidener((...a) => console.error('[process-split]', ...a));
widenPorts();
const dir = mkdtempSync(path.join(os.tmpdir(), 'process-split-'));
const target = spawn(
  process.execPath,
  [path.join(ROOT, 'bench/gateway.mjs'), '--role', 'target', '--port', String(await freePort())],
  { stdio: ['pipe', 'pipe', 'inherit'] },
);
const running = [];
for (const sig of ['SIGINT', 'SIGTERM'])
  process.once(sig, () => (running.forEach((d) => void d.stop()), target.kill(), restorePorts(), process.exit(130)));
const rows = [];
try {
  const tport = JSON.parse(await new Promise((r) => createInterface({ input: target.stdout }).once('line', r))).port;
  for (const relay of FLOOR ? ['proxyd', 'node floor'] : ['proxyd']) {
    for (const workers of [1, 2]) {
      for (const kind of KINDS) {
        const floor = relay === 'node floor';
        const d = floor
          ? await startFloor(workers, { socks: true })
          : await startProxyd(dir, { workers, name: `w${workers}-${kind}` });
        running.push(d);
        const p = d.paths.find((x) => x.kind === kind);
        await countFor(workers * WARM_MS, 8, () => tunnelOnce(p, tport));
        // proxyd: the primary, then its workers; the floor: its processes (none stands in front of the others).
        const procs = floor ? d.pids : workers === 1 ? [d.p.pid] : [d.p.pid, ...children(d.p.pid)];
        const before = procs.map(sample);
        const n = await countFor(ROUND_MS, 8, () => tunnelOnce(p, tport));
        const after = procs.map(sample);
        const per = (k, from = 0) =>
          +(procs.slice(from).reduce((acc, _, i) => acc + after[i + from][k] - before[i + from][k], 0) / n).toFixed(2);
        const serving = floor || workers === 1 ? 0 : 1; // the processes that carry tunnels (proxyd's primary carries none)
        rows.push({
          relay,
          workers,
          kind,
          tunnelsPerSec: Math.round(n / (ROUND_MS / 1000)),
          userUs: per(0, serving),
          systemUs: per(1, serving),
          switches: +(per(2, serving) + per(3, serving)).toFixed(2),
          ...(workers > 1 && !floor
            ? { primaryUs: +((after[0][0] + after[0][1] - before[0][0] - before[0][1]) / n).toFixed(1) }
            : {}),
        });
        await d.stop();
        running.pop();
      }
    }
  }
  console.log(JSON.stringify({ rows, ...runInfo(argv, load0, os.loadavg()) }, null, 2));
} finally {
  target.kill();
  restorePorts();
}
