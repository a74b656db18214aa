// What the tunnel benches (bench/setup.mjs, bench/hop.mjs) share: a free loopback port, percentiles over
// samples, loops that repeat a call for a while, a report's opening fields, the CPU seconds of a process tree
// from /proc, and the client side of an upload to the target (bench/target-protocol.mjs's U: the bytes, then
// one "K" back). The target itself is bench/gateway.mjs's target role (`--role target [--host H] [--port P]`).
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A port free on `host` right now (the kernel's pick). */
export async function freePort(host = '127.0.0.1') {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, host, r));
  const port = s.address().port;
  await new Promise((r) => s.close(r));
  return port;
}

/** The p-th percentile of `xs` (nearest rank). */
export const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.max(0, Math.ceil((p / 100) * xs.length) - 1))];
export const med = (xs) => pct(xs, 50);
/** "min–max" with `d` decimals. */
export const range = (xs, d = 2) => `${Math.min(...xs).toFixed(d)}–${Math.max(...xs).toFixed(d)}`;

/** `loops` loops each running `once()` one call after another until `ms` have passed: how many calls finished. */
export async function countFor(ms, loops, once) {
  let done = 0;
  const until = performance.now() + ms;
  await Promise.all(Array.from({ length: loops }, async () => {
    while (performance.now() < until) {
      await once();
      done++;
    }
  }));
  return done;
}

/** A report's opening fields: when, the arguments, the machine, and its load average before and after. */
export const runInfo = (argv, loadBefore, loadAfter) => ({
  when: new Date().toISOString(),
  args: argv.join(' '),
  cpu: `${os.cpus().length} x ${os.cpus()[0].model}`,
  node: process.version,
  loadBefore: loadBefore.map((x) => +x.toFixed(2)),
  loadAfter: loadAfter.map((x) => +x.toFixed(2)),
});

const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;

/** CPU seconds (user + system) of the processes `pids` and their live descendants. */
export function treeCpu(pids) {
  const kids = new Map();
  const cpu = new Map();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const st = readFileSync(`/proc/${d}/stat`, 'utf8');
      const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
      const ppid = Number(f[1]);
      if (!kids.has(ppid)) kids.set(ppid, []);
      kids.get(ppid).push(Number(d));
      cpu.set(Number(d), (Number(f[11]) + Number(f[12])) / CLK_TCK);
    } catch {
      /* gone */
    }
  }
  let total = 0;
  const walk = (q) => {
    total += cpu.get(q) ?? 0;
    for (const k of kids.get(q) ?? []) walk(k);
  };
  pids.forEach(walk);
  return total;
}

const UPLOAD_CHUNK = Buffer.alloc(256 * 1024, 0x62);

/**
 * Writes `size` bytes on `socket` (a tunnel whose U<size> is already sent, its handshake done) as fast as it
 * drains; resolves when the target's answer arrives (the socket is then destroyed), rejects on an error.
 */
export function pumpUpload(socket, size) {
  return new Promise((resolve, reject) => {
    socket.removeAllListeners('data');
    socket.on('data', () => (socket.destroy(), resolve()));
    socket.on('error', reject);
    let left = size;
    const pump = () => {
      while (left > 0) {
        const n = Math.min(left, UPLOAD_CHUNK.length);
        left -= n;
        if (!socket.write(n === UPLOAD_CHUNK.length ? UPLOAD_CHUNK : UPLOAD_CHUNK.subarray(0, n))) return void socket.once('drain', pump);
      }
    };
    pump();
  });
}
