#!/usr/bin/env node
// Memory of idle tunnels in a fresh gateway process (bench/gateway.mjs measures after its throughput
// and churn phases, when the heap has already grown): 9,900 idle CONNECT tunnels opened, then closed,
// twice. Per step: PSS of the gateway, and its V8 heap (after a forced GC) to tell JS objects from
// native memory (sockets' C++ side, allocator retention). Run `node bench/gateway.mjs --quick --only x`
// once first, or give --build with a compiled gateway.
//
//   node bench/gateway-memory.mjs [--tunnels 9900] [--cycles 2]
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const arg = (n, d) => (args.includes(n) ? args[args.indexOf(n) + 1] : d);
const N = Number(arg('--tunnels', '9900'));
const CYCLES = Number(arg('--cycles', '2'));
const BUILD = path.resolve(arg('--build', path.join(ROOT, 'node_modules/.cache/gateway-bench')));
const bench = path.join(ROOT, 'bench/gateway.mjs');

async function child(argv) {
  const p = spawn(process.execPath, argv, { stdio: ['pipe', 'pipe', 'inherit'] });
  const q = [];
  createInterface({ input: p.stdout }).on('line', (l) => q.shift()?.(l));
  const next = () => new Promise((r) => q.push(r));
  return { p, info: JSON.parse(await next()), next };
}

const target = await child([bench, '--role', 'target']);
const gw = await child(['--expose-gc', '--max-semi-space-size=8', bench, '--role', 'gateway', '--build', BUILD]);
const pssKiB = () => Number(/^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${gw.p.pid}/smaps_rollup`, 'utf8'))[1]);
async function measure(step, tunnels) {
  gw.p.stdin.write('gc\n');
  await gw.next();
  gw.p.stdin.write('mem\n');
  const m = JSON.parse(await gw.next());
  const MiB = (b) => +(b / 2 ** 20).toFixed(1);
  const row = {
    step,
    tunnels,
    pssMiB: MiB(pssKiB() * 1024),
    rssMiB: MiB(m.rss),
    heapTotalMiB: MiB(m.heapTotal),
    heapUsedMiB: MiB(m.heapUsed),
  };
  console.log(JSON.stringify(row));
  return row;
}
async function open() {
  const s = net.connect(gw.info.http, '127.0.0.1');
  s.on('error', () => {});
  await new Promise((r) => s.once('connect', r));
  s.write(`CONNECT 127.0.0.1:${target.info.port} HTTP/1.1\r\n\r\n`);
  await new Promise((r) => s.once('data', r));
  return s;
}

await new Promise((r) => setTimeout(r, 300));
const base = await measure('base', 0);
for (let c = 1; c <= CYCLES; c++) {
  const socks = [];
  while (socks.length < N)
    socks.push(...(await Promise.all(Array.from({ length: Math.min(200, N - socks.length) }, open))));
  await new Promise((r) => setTimeout(r, 500));
  const open_ = await measure(`open ${c}`, N);
  console.log(
    JSON.stringify({
      perTunnelKiB: {
        pss: +(((open_.pssMiB - base.pssMiB) * 1024) / N).toFixed(2),
        heapUsed: +(((open_.heapUsedMiB - base.heapUsedMiB) * 1024) / N).toFixed(2),
      },
    }),
  );
  for (const s of socks) s.destroy();
  await new Promise((r) => setTimeout(r, 2000));
  await measure(`closed ${c}`, 0);
}
target.p.stdin.end();
gw.p.stdin.end();
