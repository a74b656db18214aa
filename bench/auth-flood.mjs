#!/usr/bin/env node
// A good client's set-up to a hostname target (CONNECT localhost:PORT, resolved by the gateway) quiet and
// under a flood of wrong proxy passwords from many loopback sources (127.0.0.2 …), alternating quiet and
// flooded rounds. Run after `npm run build`:
//   node bench/auth-flood.mjs [--sources 48] [--interval-ms 100] [--rounds 3] [--samples 300]
//   (--interval-ms 0: each source sends its next attempt as soon as the last is answered; --ip-target: the
//   good client asks for 127.0.0.1 instead of localhost)
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import net from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PROXYD = path.join(ROOT, 'bin/proxyd');
const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(`--${name}`) ? Number(argv[argv.indexOf(`--${name}`) + 1]) : def);
const SOURCES = opt('sources', 48);
const INTERVAL = opt('interval-ms', 100);
const ROUNDS = opt('rounds', 3);
const SAMPLES = opt('samples', 300);

const dataDir = mkdtempSync(path.join(tmpdir(), 'proxyd-flood-bench-'));
const adminJson = (args, input = '') =>
  JSON.parse(
    spawnSync(process.execPath, [PROXYD, 'admin', ...args, '--data-dir', dataDir], { input, encoding: 'utf8' }).stdout,
  );
adminJson(
  ['account', 'create', '--email', 'bench@example.com', '--password-stdin', '--verified'],
  'bench password 123\n',
);
const pu = adminJson(['proxy-user', 'create', '--email', 'bench@example.com', '--username', 'gooduser']);
adminJson(['proxy-user', 'create', '--email', 'bench@example.com', '--username', 'victim']);
const good = Buffer.from(`gooduser:${pu.password}`).toString('base64');
const proc = spawn(
  PROXYD,
  [
    'serve',
    '--data-dir',
    dataDir,
    '--api-listen',
    '127.0.0.1:0',
    '--http-proxy-listen',
    '127.0.0.1:0',
    '--socks-listen',
    '127.0.0.1:0',
    '--allow-private-targets',
    '--log-level',
    'warn',
  ],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);
const ready = await new Promise((r) => createInterface({ input: proc.stdout }).once('line', (l) => r(JSON.parse(l))));
const [phost, pport] = ready.httpProxy.split(':');
const echo = net.createServer((s) => s.on('error', () => {}).pipe(s)).listen(0, '127.0.0.1');
await new Promise((r) => echo.once('listening', r));
// --ip-target: the same flood, the good client's target given as an address (no name to resolve), for comparison.
const target = `${argv.includes('--ip-target') ? '127.0.0.1' : 'localhost'}:${echo.address().port}`;

function connectOnce(auth, localAddress = '127.0.0.1') {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const s = net.connect({ port: Number(pport), host: phost, localAddress });
    let head = '';
    const done = (status) => (s.destroy(), resolve({ ms: performance.now() - t0, status }));
    s.setTimeout(10_000, () => done(0));
    s.on('error', () => done(0));
    s.on('connect', () =>
      s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`),
    );
    s.on('data', (b) => {
      head += b.toString('latin1');
      if (head.includes('\r\n')) done(Number(head.split(' ')[1]));
    });
  });
}
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)];
async function sample() {
  const xs = [];
  for (let i = 0; i < SAMPLES; i++) {
    const r = await connectOnce(good);
    if (r.status !== 200) throw new Error(`good client got ${r.status}`);
    xs.push(r.ms);
  }
  return { p50: +pct(xs, 50).toFixed(2), p99: +pct(xs, 99).toFixed(2) };
}

await sample(); // warm-up: the good password is verified once and cached
const load0 = loadavg()[0];
const rows = [];
for (let round = 0; round < ROUNDS; round++) {
  const quiet = await sample();
  let flooding = true;
  let attempts = 0;
  const statuses = new Set();
  const flood = Array.from({ length: SOURCES }, async (_, i) => {
    const bad = Buffer.from(`${i % 2 ? 'victim' : `nouser${i}`}:wrong ${i}`).toString('base64');
    while (flooding) {
      const r = await connectOnce(bad, `127.0.0.${i + 2}`);
      attempts++;
      statuses.add(r.status);
      if (INTERVAL) await new Promise((res) => setTimeout(res, Math.max(0, INTERVAL - r.ms)));
    }
  });
  await new Promise((r) => setTimeout(r, 300));
  const t0 = Date.now();
  const a0 = attempts;
  const flooded = await sample();
  const rate = Math.round(((attempts - a0) / (Date.now() - t0)) * 1000);
  flooding = false;
  await Promise.all(flood);
  rows.push({ round, quiet, flooded, attempts_per_s: rate, flood_answers: [...statuses] });
  console.log(JSON.stringify(rows.at(-1)));
}
const med = (k, f) => {
  const xs = rows.map((r) => r[k][f]).sort((a, b) => a - b);
  return xs[Math.floor(xs.length / 2)];
};
console.log(
  JSON.stringify({
    summary: true,
    sources: SOURCES,
    interval_ms: INTERVAL,
    quiet_p50: med('quiet', 'p50'),
    quiet_p99: med('quiet', 'p99'),
    flooded_p50: med('flooded', 'p50'),
    flooded_p99: med('flooded', 'p99'),
    loadavg_before: load0,
    loadavg_after: loadavg()[0],
  }),
);
proc.kill('SIGTERM');
echo.close();
