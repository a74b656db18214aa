#!/usr/bin/env node
// Instructions per tunnel of the whole daemon, counted by valgrind (callgrind): user-space instructions do not
// depend on what else the machine is doing, so a change worth 2 % shows where a timed run's ±10 % hides it.
// (Kernel time and cache misses are not counted: confirm a cut with bench/setup.mjs before calling it faster.)
//
//   node bench/instructions.mjs [--rev REV] [--floor] [--tunnels 2000] [--warm 2000] [--reps 2] [--kind connect|socks5]
//                               [--idle-ms 1000] [--args "PROXYD OPTIONS"] [--node-flags "NODE FLAGS"] [--keep DIR]
//
// Measures `proxyd serve` of this tree (run `npm run build` first) and, with --rev, the same at a git revision
// (built into node_modules/.cache/instructions/REV), and with --floor the bare relay bench/peers/node-floor.mjs
// (CONNECT without credentials). The daemon runs as bench/setup.mjs runs it (SQLite, metering and the connection
// log on, credentials on every tunnel); the client and the target run outside valgrind. Per daemon: --warm
// tunnels uncounted, --idle-ms of nothing, then counting on for --tunnels (8 loops: connect, handshake, a byte
// echoed, close). --args: more `proxyd serve` options for every daemon measured, not the floor (e.g.
// "--connection-log-sink off"); --node-flags: more Node/V8 flags for every process measured (e.g.
// "--no-memory-reducer"). --keep DIR: each run's callgrind output is kept there (`callgrind_annotate FILE` names the native functions: V8's collector,
// SQLite, libc; the JIT's code shows as ???).
// A window in which V8 runs a full collection counts ~65–80k more per tunnel: each of --reps is printed, with the
// smallest, and each also without its full collections' instructions (kOutsideFullGc: what a change to the code
// path does, whether or not a collection fell in the window). Needs valgrind (Debian's package).
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import {
  constants as fsConstants,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { buildRev } from './lib/build-rev.mjs';
import { benchDaemon, freePort, readyOf, sleep, tunnelLoops } from './lib/tunnel-bench.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1] : def);
const REV = opt('rev', null);
const TUNNELS = Number(opt('tunnels', 2000));
const WARM = Number(opt('warm', 2000));
const REPS = Number(opt('reps', 2));
const KIND = opt('kind', 'connect');
/** Quiet between the warm tunnels and the counted ones (a longer pause: what the first tunnels after an idle spell cost). */
const IDLE_MS = Number(opt('idle-ms', 1000));
const DAEMON_ARGS = opt('args', '').split(' ').filter(Boolean);
const NODE_FLAGS = opt('node-flags', '').split(' ').filter(Boolean);
const KEEP = opt('keep', null) && path.resolve(opt('keep', null));
/** Runs of this invocation so far (the kept files' names). */
let kept = 0;
const stamp = new Date().toISOString().replace(/[:.]/g, '-');
const log = (...a) => console.error('[instructions]', ...a);

if (spawnSync('sh', ['-c', 'command -v valgrind']).status !== 0) {
  log('valgrind is not installed (apt-get install valgrind)');
  process.exit(2);
}

/** One daemon (or the floor) under callgrind with counting off; resolves with its port and credentials. */
async function start(tree, dir) {
  const out = path.join(dir, 'callgrind.out');
  const vg = [
    '--tool=callgrind',
    '--instr-atstart=no',
    '--smc-check=all-non-file',
    `--callgrind-out-file=${out}`,
    process.execPath,
    '--max-semi-space-size=8',
    ...NODE_FLAGS,
  ];
  let auth = null;
  let args;
  let port = 0;
  if (tree === 'floor') {
    port = await freePort();
    args = [...vg, path.join(ROOT, 'bench/peers/node-floor.mjs'), String(port)];
  } else {
    const daemon = benchDaemon(path.join(tree, 'bin/proxyd'), path.join(dir, 'data'), DAEMON_ARGS);
    auth = daemon.auth;
    args = [...vg, ...daemon.args];
  }
  const p = spawn('valgrind', args, { stdio: ['ignore', 'pipe', 'ignore'] });
  const ready = await readyOf(p, `${tree} under valgrind`, 180_000, port);
  const at = KIND === 'socks5' && tree !== 'floor' ? ready.socks5 : ready.httpProxy;
  return {
    p,
    out,
    auth,
    label: tree,
    port: Number(at.slice(at.lastIndexOf(':') + 1)),
    kind: tree === 'floor' ? 'connect' : KIND,
  };
}

/**
 * Instructions of V8's full (mark-compact) collections in a callgrind output: concurrent marking, sweeping and the
 * atomic pause (inclusive costs, from callgrind_annotate). Whether one falls in a window is luck of timing (one is
 * ~130M instructions, 65k a tunnel over 2,000), so runs are also compared without them. An approximation, low:
 * marking already under way when counting began is not credited to its job, and what else a collection brings
 * (evacuation on helper threads, incremental steps, write barriers while marking, more young collections) stays in.
 */
function fullGcOf(file) {
  const out = execFileSync('callgrind_annotate', ['--inclusive=yes', '--threshold=100', file], {
    encoding: 'utf8',
    maxBuffer: 1 << 28,
  });
  const incl = (re) =>
    Math.max(
      0,
      ...out
        .split('\n')
        .filter((l) => re.test(l))
        .map((l) => Number(l.trim().split(' ')[0].replaceAll(',', ''))),
    );
  return (
    incl(/ConcurrentMarking::JobTaskMajor::Run\(/) +
    incl(/Sweeper::MajorSweeperJob::Run\(/) +
    incl(/Heap::MarkCompact\(\)/)
  );
}

/** Instructions per tunnel of one daemon (and of them, its full collections'): warm, then count through TUNNELS tunnels. */
async function measure(tree, tport) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'instructions-'));
  let d = null;
  try {
    d = await start(tree, dir);
    await tunnelLoops(d, tport, WARM);
    await sleep(IDLE_MS);
    execFileSync('callgrind_control', ['-i', 'on', String(d.p.pid)], { stdio: 'ignore' });
    await tunnelLoops(d, tport, TUNNELS);
    execFileSync('callgrind_control', ['-i', 'off', String(d.p.pid)], { stdio: 'ignore' });
    execFileSync('callgrind_control', ['-d', String(d.p.pid)], { stdio: 'ignore' });
    // The dump is written by the daemon's next scheduled valgrind turn: wait for its totals line.
    for (const until = Date.now() + 30_000; Date.now() < until; await sleep(250)) {
      for (const f of readdirSync(dir).filter((n) => n.startsWith('callgrind.out'))) {
        const m = /^totals: (\d+)/m.exec(readFileSync(path.join(dir, f), 'utf8'));
        if (m && Number(m[1]) > 0) {
          if (KEEP) {
            mkdirSync(KEEP, { recursive: true });
            // Named for the daemon and when this invocation started: a later run into the same folder adds, never replaces.
            const who = tree === 'floor' ? 'floor' : tree === ROOT ? 'tree' : path.basename(tree);
            const to = path.join(KEEP, `callgrind.${stamp}.${who}.${++kept}.out`);
            copyFileSync(path.join(dir, f), to, fsConstants.COPYFILE_EXCL);
            log(`kept ${to}`);
          }
          return { total: Number(m[1]) / TUNNELS, fullGc: fullGcOf(path.join(dir, f)) / TUNNELS };
        }
      }
    }
    throw new Error('callgrind wrote no totals within 30 s');
  } finally {
    d?.p.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

const trees = [
  ['this tree', ROOT],
  ...(REV ? [[REV, buildRev(REV, 'instructions')]] : []),
  ...(argv.includes('--floor') ? [['node floor', 'floor']] : []),
];
const target = spawn(
  process.execPath,
  [path.join(ROOT, 'bench/gateway.mjs'), '--role', 'target', '--port', String(await freePort())],
  { stdio: ['pipe', 'pipe', 'inherit'] },
);
try {
  const tport = JSON.parse(await new Promise((r) => createInterface({ input: target.stdout }).once('line', r))).port;
  const res = new Map(trees.map(([label]) => [label, []]));
  for (let r = 0; r < REPS; r++) {
    for (const [label, tree] of r % 2 ? [...trees].reverse() : trees) {
      const per = await measure(tree, tport);
      res.get(label).push(per);
      log(
        `${label}: ${(per.total / 1000).toFixed(1)}k instructions per tunnel, ${((per.total - per.fullGc) / 1000).toFixed(1)}k outside full collections`,
      );
    }
  }
  const k = (x) => +(x / 1000).toFixed(1);
  const rows = [...res].map(([label, xs]) => ({
    daemon: label,
    kInstructionsPerTunnel: xs.map((x) => k(x.total)),
    least: k(Math.min(...xs.map((x) => x.total))),
    kOutsideFullGc: xs.map((x) => k(x.total - x.fullGc)),
    leastOutsideFullGc: k(Math.min(...xs.map((x) => x.total - x.fullGc))),
  }));
  console.log(
    JSON.stringify(
      {
        kind: KIND,
        tunnels: TUNNELS,
        warm: WARM,
        idleMs: IDLE_MS,
        args: DAEMON_ARGS.join(' '),
        nodeFlags: NODE_FLAGS.join(' '),
        when: new Date().toISOString(),
        node: process.version,
        rows,
      },
      null,
      2,
    ),
  );
} finally {
  target.kill('SIGTERM');
}
