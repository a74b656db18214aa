#!/usr/bin/env node
// What --workers 2 buys over one worker: API requests/s (authenticated list) and gateway throughput
// (CONNECT tunnels streaming from a loopback sink). Run after `npm run build`:
//   node bench/workers.mjs [--seconds 5] [--concurrency 32] [--tunnels 8]
// The load generator runs on the same machine, so on 2 cores it competes with the daemon for CPU.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PROXYD = path.join(ROOT, 'bin/proxyd');
const arg = (name, def) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const SECONDS = arg('seconds', 5);
const CONCURRENCY = arg('concurrency', 32);
const TUNNELS = arg('tunnels', 8);
const TOKENS = arg('tokens', 800);

function adminJson(dataDir, args, input = '') {
  const r = spawnSync(process.execPath, [PROXYD, 'admin', ...args, '--data-dir', dataDir], { input, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout);
}

async function startDaemon(workers, redisUrl) {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'proxyd-bench-'));
  adminJson(
    dataDir,
    ['account', 'create', '--email', 'bench@example.com', '--password-stdin', '--verified'],
    'bench password 123\n',
  );
  const { token } = adminJson(dataDir, ['token', 'reset', '--email', 'bench@example.com']);
  const pu = adminJson(dataDir, ['proxy-user', 'create', '--email', 'bench@example.com', '--username', 'bench']);
  // Production limits (60 lists per token per rolling minute), with enough accounts that no token hits
  // its limit: one token under a raised limit would make the sliding-window log itself the benchmark.
  const { openStore } = await import(path.join(ROOT, 'dist/daemon/store/index.js'));
  const { mintToken } = await import(path.join(ROOT, 'dist/daemon/secrets.js'));
  const store = await openStore({ dataDir });
  const tokens = [];
  for (let i = 0; i < TOKENS; i++) {
    const a = await store.accounts.create(`load${i}@example.com`, 'unused', true);
    const t = mintToken();
    await store.tokens.replace(a.id, t.accessKey, t.secretHash);
    tokens.push(t.token);
  }
  await store.close();
  const proc = spawn(
    process.execPath,
    [
      PROXYD,
      'serve',
      '--data-dir',
      dataDir,
      '--api-listen',
      '127.0.0.1:0',
      '--http-proxy-listen',
      '127.0.0.1:0',
      '--socks-listen',
      '127.0.0.1:0',
      '--workers',
      String(workers),
      ...(redisUrl ? ['--redis-url', redisUrl] : []),
      '--allow-private-targets',
      '--log-level',
      'warn',
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const ready = await new Promise((resolve) =>
    createInterface({ input: proc.stdout }).once('line', (l) => resolve(JSON.parse(l))),
  );
  return {
    ready,
    token,
    tokens,
    proxyAuth: Buffer.from(`bench:${pu.password}`).toString('base64'),
    stop: () =>
      new Promise((r) => {
        proc.once('exit', r);
        proc.kill('SIGTERM');
      }),
  };
}

async function apiRps(d) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  let calls = 0;
  const url = () =>
    new URL(
      `${d.ready.api}/openapi/v1/proxy/whitelist/list?api_key=${encodeURIComponent(d.tokens[Math.floor(calls++ / 55) % d.tokens.length])}`,
    );
  const get = () =>
    new Promise((resolve, reject) => {
      http
        .get(url(), { agent }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode));
        })
        .on('error', reject);
    });
  // Warm up (JIT, connections spread over workers).
  const warmUntil = Date.now() + 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < warmUntil) await get();
    }),
  );
  let ok = 0;
  let other = 0;
  const lat = [];
  const until = Date.now() + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < until) {
        const t = performance.now();
        const s = await get();
        lat.push(performance.now() - t);
        if (s === 200) ok++;
        else other++;
      }
    }),
  );
  agent.destroy();
  lat.sort((a, b) => a - b);
  return {
    rps: Math.round(ok / SECONDS),
    errors: other,
    p50: lat[Math.floor(lat.length * 0.5)].toFixed(1),
    p99: lat[Math.floor(lat.length * 0.99)].toFixed(1),
  };
}

/** A loopback sink: every connection gets an endless stream of 64 KiB chunks. */
function startSource() {
  const chunk = Buffer.alloc(64 * 1024, 120);
  const server = net.createServer((s) => {
    s.on('error', () => {});
    const pump = () => {
      while (s.write(chunk));
    };
    s.on('drain', pump);
    pump();
  });
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r(server)));
}

async function gatewayThroughput(d, sourcePort) {
  const [host, port] = d.ready.httpProxy.split(':');
  let bytes = 0;
  let counting = false;
  const sockets = await Promise.all(
    Array.from(
      { length: TUNNELS },
      () =>
        new Promise((resolve, reject) => {
          const s = net.connect({ host, port: Number(port) }, () => {
            s.write(
              `CONNECT 127.0.0.1:${sourcePort} HTTP/1.1\r\nHost: 127.0.0.1:${sourcePort}\r\nProxy-Authorization: Basic ${d.proxyAuth}\r\n\r\n`,
            );
          });
          let head = '';
          const onHead = (buf) => {
            head += buf.toString('latin1');
            const end = head.indexOf('\r\n\r\n');
            if (end < 0) return;
            s.off('data', onHead);
            if (!/^HTTP\/1\.[01] 200/.test(head)) return reject(new Error(head.split('\r\n')[0]));
            s.on('data', (b) => {
              if (counting) bytes += b.length;
            });
            resolve(s);
          };
          s.on('data', onHead);
          s.on('error', reject);
        }),
    ),
  );
  await new Promise((r) => setTimeout(r, 1000));
  counting = true;
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  counting = false;
  const secs = (performance.now() - t0) / 1000;
  for (const s of sockets) s.destroy();
  return { MiBps: Math.round(bytes / secs / 1024 / 1024) };
}

/** New tunnels per second: each connection does CONNECT, reads the 200, closes. */
async function gatewayConnRate(d, sourcePort) {
  const [host, port] = d.ready.httpProxy.split(':');
  const one = () =>
    new Promise((resolve) => {
      const s = net.connect({ host, port: Number(port) }, () =>
        s.write(
          `CONNECT 127.0.0.1:${sourcePort} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic ${d.proxyAuth}\r\n\r\n`,
        ),
      );
      s.once('data', (b) => {
        s.destroy();
        resolve(b.toString('latin1').startsWith('HTTP/1.1 200'));
      });
      s.on('error', () => resolve(false));
    });
  let ok = 0;
  const until = Date.now() + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (Date.now() < until) if (await one()) ok++;
    }),
  );
  return { tunnelsPerSec: Math.round(ok / SECONDS) };
}

/** A throwaway redis-server on a free port (the limiter store for the `+redis` rows). */
async function startRedis() {
  const probe = await new Promise((r) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => r(p));
    });
  });
  const proc = spawn(
    'redis-server',
    ['--port', String(probe), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  await new Promise((r) => setTimeout(r, 300));
  return { url: `redis://127.0.0.1:${probe}`, stop: () => proc.kill('SIGKILL') };
}

const source = await startSource();
const sourcePort = source.address().port;
const redis = process.argv.includes('--no-redis') ? null : await startRedis();
const rows = [];
const runs = [
  { workers: 1, limiter: 'memory' },
  { workers: 2, limiter: 'sqlite' },
  ...(redis
    ? [
        { workers: 1, limiter: 'redis' },
        { workers: 2, limiter: 'redis' },
      ]
    : []),
];
for (const { workers, limiter } of runs) {
  const d = await startDaemon(workers, limiter === 'redis' ? redis.url : undefined);
  const api = await apiRps(d);
  const gw = await gatewayThroughput(d, sourcePort);
  const cr = await gatewayConnRate(d, sourcePort);
  rows.push({ workers, limiter, ...api, ...gw, ...cr });
  await d.stop();
}
redis?.stop();
source.close();
console.log(
  `node ${process.version}, ${SECONDS} s per measurement, API concurrency ${CONCURRENCY}, ${TUNNELS} tunnels`,
);
console.table(rows);
console.log(JSON.stringify(rows));
