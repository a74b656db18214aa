// The proxies the benches start (bench/setup.mjs, bench/daemon-ab.mjs): proxyd as the benches run it, squid and
// dante from bench/peers/ configurations, and the bare Node relay bench/peers/node-floor.mjs. Each returns its
// process, its paths ({ label, kind, port, auth }) and a stop().
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { benchDaemon, freePort, readyOf, sleep } from './tunnel-bench.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

async function waitPort(port, ms = 20_000) {
  const until = Date.now() + ms;
  for (;;) {
    const ok = await new Promise((r) => {
      const s = net.connect(port, '127.0.0.1', () => (s.destroy(), r(true)));
      s.on('error', () => r(false));
    });
    if (ok) return;
    if (Date.now() > until) throw new Error(`port ${port} never opened`);
    await sleep(50);
  }
}

function fill(name, vars) {
  let text = readFileSync(path.join(ROOT, 'bench/peers', name), 'utf8');
  for (const [k, v] of Object.entries(vars)) text = text.replaceAll(`{{${k}}}`, String(v));
  const out = path.join(vars.DIR, name);
  writeFileSync(out, text);
  return out;
}

/** The Node flags of the processes the benches start: the young generation's size, then PROXYD_BENCH_NODE_FLAGS. */
const nodeFlags = () => [
  '--max-semi-space-size=8',
  ...(process.env.PROXYD_BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean),
];

/**
 * `proxyd serve` of `tree` (this one by default) as the benches run it: SQLite, metering and the connection log on,
 * a bench user whose credentials every tunnel presents; `name` tells data dirs apart when several run at once;
 * `args`: more `serve` options. PROXYD_BENCH_NODE_FLAGS (space-separated) adds Node flags, e.g. `--perf-basic-prof` for
 * `perf record` to name JavaScript functions.
 */
export async function startProxyd(
  dir,
  {
    tree = ROOT,
    workers = 1,
    profileDir = null,
    args = [],
    name = `proxyd-w${workers}${profileDir ? '-prof' : ''}`,
  } = {},
) {
  const daemon = benchDaemon(path.join(tree, 'bin/proxyd'), path.join(dir, name), [
    '--workers',
    String(workers),
    ...args,
  ]);
  const auth = daemon.auth;
  const node = [...nodeFlags(), ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [])];
  const p = spawn(process.execPath, [...node, ...daemon.args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const ready = await readyOf(p, `proxyd --workers ${workers}`, 60_000);
  return {
    p,
    api: ready.api,
    paths: [
      {
        label: `proxyd${workers > 1 ? ` --workers ${workers}` : ''} CONNECT`,
        kind: 'connect',
        port: Number(ready.httpProxy.split(':')[1]),
        auth,
      },
      {
        label: `proxyd${workers > 1 ? ` --workers ${workers}` : ''} SOCKS5`,
        kind: 'socks5',
        port: Number(ready.socks5.split(':')[1]),
        auth,
      },
    ],
    stop: () => new Promise((r) => (p.exitCode !== null ? r() : (p.once('exit', r), p.kill('SIGTERM')))),
  };
}

export async function startSquid(dir) {
  const port = await freePort();
  const d = path.join(dir, 'squid');
  mkdirSync(d, { recursive: true });
  execFileSync('chmod', ['777', d]);
  const p = spawn('squid', ['-N', '-f', fill('squid.conf', { PORT: port, DIR: d })], { stdio: 'ignore' });
  await waitPort(port);
  return {
    p,
    paths: [{ label: 'squid CONNECT', kind: 'connect', port }],
    stop: () => new Promise((r) => (p.exitCode !== null ? r() : (p.once('exit', r), p.kill('SIGTERM')))),
  };
}

/**
 * The floor of a Node relay (bench/peers/node-floor.mjs): `procs` processes on one port with SO_REUSEPORT when
 * more than one (as `--workers` does), no credentials checked, under the same Node flags as proxyd. With
 * `socks`, a SOCKS5 path too (its own port; the client's RFC 1929 exchange taken unchecked).
 */
export async function startFloor(procs = 1, { socks = false } = {}) {
  const port = await freePort();
  const socksPort = socks ? await freePort() : 0;
  const script = path.join(ROOT, 'bench/peers/node-floor.mjs');
  const ps = [];
  try {
    for (let i = 0; i < procs; i++) {
      const p = spawn(
        process.execPath,
        [
          ...nodeFlags(),
          script,
          String(port),
          ...(procs > 1 ? ['reuse'] : []),
          ...(socks ? [`socks=${socksPort}`] : []),
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      ps.push(p);
      await new Promise((resolve, reject) => {
        p.once('exit', (c) => reject(new Error(`node floor exited ${c}`)));
        createInterface({ input: p.stdout }).once('line', resolve);
      });
    }
  } catch (e) {
    for (const p of ps) p.kill('SIGTERM'); // the ones already started go too
    throw e;
  }
  const stopOne = (p) => new Promise((r) => (p.exitCode !== null ? r() : (p.once('exit', r), p.kill('SIGTERM'))));
  return {
    p: ps[0],
    pids: ps.map((p) => p.pid),
    kill: () => ps.forEach((p) => p.kill('SIGTERM')),
    paths: [
      { label: `node floor${procs > 1 ? ` x${procs}` : ''} CONNECT`, kind: 'connect', port },
      ...(socks
        ? [
            {
              label: `node floor${procs > 1 ? ` x${procs}` : ''} SOCKS5`,
              kind: 'socks5',
              port: socksPort,
              auth: { user: 'floor', password: 'unchecked' },
            },
          ]
        : []),
    ],
    stop: () => Promise.all(ps.map(stopOne)),
  };
}

export async function startDante(dir) {
  const port = await freePort();
  const d = path.join(dir, 'dante');
  mkdirSync(d, { recursive: true });
  const p = spawn('danted', ['-f', fill('danted.conf', { PORT: port, DIR: d }), '-p', path.join(d, 'danted.pid')], {
    stdio: 'ignore',
  });
  await waitPort(port);
  return {
    p,
    paths: [{ label: 'dante SOCKS5', kind: 'socks5', port }],
    stop: () => new Promise((r) => (p.exitCode !== null ? r() : (p.once('exit', r), p.kill('SIGTERM')))),
  };
}
