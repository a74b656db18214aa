#!/usr/bin/env node
// A/B of two gateway versions on a noisy machine: both run at once and transfers alternate between
// them (A, B, A, B...), so outside load hits both alike. Per version: throughput (median and range)
// and the gateway's CPU seconds per GiB relayed (from /proc/<pid>/stat), which load barely moves.
//
//   node bench/gateway-ab.mjs [--a <git rev>] [--size-mib 256] [--reps 6] [--conc 1,64]
//   node bench/gateway-ab.mjs --setup [--a <git rev>] [--reps 6]   # new tunnels: CPU µs per tunnel, tunnels/s
//
// A = the gateway sources at a git revision (default HEAD), B = the working tree.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { cpuOf } from './lib/tunnel-bench.mjs';
import { len64 } from './target-protocol.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const arg = (n, d) => (args.includes(n) ? args[args.indexOf(n) + 1] : d);
const REV = arg('--a', 'HEAD');
const SIZE = Number(arg('--size-mib', '256')) * 2 ** 20;
const REPS = Number(arg('--reps', '6'));
const CONC = arg('--conc', '1,64').split(',').map(Number);
const WORK = path.join(ROOT, 'node_modules/.cache/gateway-ab');

function compile(src, out) {
  execFileSync(
    process.execPath,
    [
      path.join(ROOT, 'node_modules/typescript/bin/tsc'),
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

function build() {
  rmSync(WORK, { recursive: true, force: true });
  // Outside node_modules (tsc emits nothing for files under it), with the project's packages linked in.
  const aSrc = mkdtempSync(path.join(os.tmpdir(), 'gateway-ab-'));
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(aSrc, 'node_modules'));
  execFileSync('sh', ['-c', `git -C "${ROOT}" archive ${REV} src/gateway | tar -x -C "${aSrc}"`]);
  compile(path.join(aSrc, 'src/gateway'), path.join(WORK, 'a'));
  compile(path.join(ROOT, 'src/gateway'), path.join(WORK, 'b'));
  rmSync(aSrc, { recursive: true, force: true });
}

async function child(argv) {
  const p = spawn(process.execPath, argv, { stdio: ['pipe', 'pipe', 'inherit'] });
  const line = await new Promise((r) => createInterface({ input: p.stdout }).once('line', r));
  return { p, info: JSON.parse(line) };
}

const cpu = (pid) => {
  const { user, system } = cpuOf(pid);
  return user + system;
};

async function tunnel(port, target) {
  const s = net.connect({ port, host: '127.0.0.1', noDelay: true });
  await new Promise((r, j) => {
    s.once('connect', r);
    s.once('error', j);
  });
  s.write(`CONNECT 127.0.0.1:${target} HTTP/1.1\r\n\r\n`);
  await new Promise((r) => s.once('data', r)); // the 200 (nothing else comes before our command)
  return s;
}

async function down(port, target, n) {
  const s = await tunnel(port, target);
  let got = 0;
  await new Promise((r) => {
    s.on('data', (d) => {
      got += d.length;
      if (got >= n) r();
    });
    s.write(len64('D', n));
  });
  s.destroy();
}

async function up(port, target, n) {
  const s = await tunnel(port, target);
  const chunk = Buffer.alloc(1 << 20, 0x62);
  s.write(len64('U', n));
  for (let left = n; left > 0; left -= chunk.length)
    if (!s.write(left >= chunk.length ? chunk : chunk.subarray(0, left))) await new Promise((r) => s.once('drain', r));
  await new Promise((r) => s.once('data', r));
  s.destroy();
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

build();
const bench = path.join(ROOT, 'bench/gateway.mjs');
const target = await child([bench, '--role', 'target']);
const gws = {};
for (const v of ['a', 'b'])
  gws[v] = await child(['--max-semi-space-size=8', bench, '--role', 'gateway', '--build', path.join(WORK, v)]);
// New tunnels: 8 loops each open a CONNECT tunnel, echo one byte, close; 2000 tunnels per turn.
async function churn(port, targetPort, n) {
  let left = n;
  const loop = async () => {
    while (left-- > 0) {
      const s = await tunnel(port, targetPort);
      s.write('Ex');
      await new Promise((r) => s.once('data', r));
      s.destroy();
    }
  };
  await Promise.all(Array.from({ length: 8 }, loop));
}

if (args.includes('--setup')) {
  const r = { a: { rate: [], cpu: 0, n: 0 }, b: { rate: [], cpu: 0, n: 0 } };
  for (let i = 0; i < REPS; i++) {
    for (const v of i % 2 ? ['b', 'a'] : ['a', 'b']) {
      const g = gws[v];
      const c0 = cpu(g.p.pid);
      const t0 = performance.now();
      await churn(g.info.http, target.info.port, 2000);
      r[v].rate.push(2000 / ((performance.now() - t0) / 1000));
      r[v].cpu += cpu(g.p.pid) - c0;
      r[v].n += 2000;
    }
  }
  for (const v of ['a', 'b']) {
    const x = r[v];
    console.log(
      `${v === 'a' ? `A (${REV})` : 'B (tree)'}: ${median(x.rate).toFixed(0)} tunnels/s (${Math.min(...x.rate).toFixed(0)}–${Math.max(...x.rate).toFixed(0)}), CPU ${((x.cpu / x.n) * 1e6).toFixed(0)} µs per tunnel`,
    );
  }
}
for (const conc of args.includes('--setup') ? [] : CONC) {
  const r = { a: { mbs: [], cpu: 0 }, b: { mbs: [], cpu: 0 } };
  for (let i = 0; i < REPS; i++) {
    for (const v of i % 2 ? ['b', 'a'] : ['a', 'b']) {
      const g = gws[v];
      const c0 = cpu(g.p.pid);
      const t0 = performance.now();
      const each = Math.floor(SIZE / conc);
      await Promise.all(Array.from({ length: conc }, () => up(g.info.http, target.info.port, each)));
      await Promise.all(Array.from({ length: conc }, () => down(g.info.http, target.info.port, each)));
      r[v].mbs.push((2 * each * conc) / ((performance.now() - t0) / 1000) / 1e6);
      r[v].cpu += cpu(g.p.pid) - c0;
    }
  }
  for (const v of ['a', 'b']) {
    const x = r[v];
    console.log(
      `${v === 'a' ? `A (${REV})` : 'B (tree)'} conc ${conc}: ${median(x.mbs).toFixed(0)} MB/s (${Math.min(...x.mbs).toFixed(0)}–${Math.max(...x.mbs).toFixed(0)}), CPU ${(x.cpu / ((2 * SIZE * REPS) / 2 ** 30)).toFixed(3)} s/GiB`,
    );
  }
}
for (const c of [target, gws.a, gws.b]) c.p.stdin.end();
