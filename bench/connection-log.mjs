#!/usr/bin/env node
// What the connection log costs (docs/benchmarks/connection-log.md, "Connection log"). Run after `npm run build`.
//
//   node bench/connection-log.mjs [--reps 5] [--samples 400] [--conc 16] [--secs 3]
//     Two daemons at once on one machine, one with the log (default) and one without
//     (--connection-log-retention 0), measured in alternating rounds (on, off, on, off …) so outside load hits
//     both alike: set-up p50/p99 (CONNECT with credentials → 200, one at a time) and tunnels per second
//     (--conc clients each opening a tunnel, one byte each way, closing, for --secs). Medians and ranges.
//
//   node bench/connection-log.mjs --flood [--rate 10000] [--secs 30] [--log-off]
//     One daemon with the log: a second process sends refused attempts (wrong passwords) at --rate per second
//     for --secs while this one measures a good client's set-up p50/p99 every few seconds, and the daemon's
//     RSS and the log's buffered/dropped/written counters. Then the same good-client sample quiet.
import { fork, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { cpuOf } from './lib/tunnel-bench.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PROXYD = path.join(ROOT, 'bin/proxyd');
const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(`--${name}`) ? Number(argv[argv.indexOf(`--${name}`) + 1]) : def);

// ---- the flood generator (a child process of this script; main() runs at the end of the file) ----
if (argv[0] === '--flood-worker') {
  const [, port, rate, secs] = argv.map(Number);
  const wrong = Buffer.from('victim:not-the-password').toString('base64');
  const req = `CONNECT 127.0.0.1:9 HTTP/1.1\r\nProxy-Authorization: Basic ${wrong}\r\n\r\n`;
  let sent = 0;
  let answered = 0;
  let inflight = 0;
  const start = performance.now();
  const one = () => {
    inflight++;
    sent++;
    const s = net.connect(port, '127.0.0.1');
    s.on('connect', () => s.write(req));
    s.once('data', () => {
      answered++;
      s.destroy();
    });
    s.on('error', () => {});
    s.on('close', () => inflight--);
  };
  const timer = setInterval(() => {
    const due = Math.floor(((performance.now() - start) / 1000) * rate);
    while (sent < due && inflight < 2000) one();
    if (performance.now() - start > secs * 1000) {
      clearInterval(timer);
      setTimeout(() => {
        process.send({ sent, answered, seconds: (performance.now() - start) / 1000 });
        process.exit(0);
      }, 1000);
    }
  }, 5);
}

function startDaemon(extra) {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'proxyd-connlog-bench-'));
  const admin = (args, input = '') =>
    JSON.parse(
      spawnSync(process.execPath, [PROXYD, 'admin', ...args, '--data-dir', dataDir], { input, encoding: 'utf8' })
        .stdout,
    );
  admin(
    ['account', 'create', '--email', 'bench@example.com', '--password-stdin', '--verified'],
    'bench password 123\n',
  );
  const pu = admin(['proxy-user', 'create', '--email', 'bench@example.com', '--username', 'gooduser']);
  admin(['proxy-user', 'create', '--email', 'bench@example.com', '--username', 'victim']);
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
      ...extra,
    ],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  return new Promise((resolve) =>
    createInterface({ input: proc.stdout }).once('line', (l) => {
      const ready = JSON.parse(l);
      resolve({
        proc,
        ready,
        port: Number(ready.httpProxy.split(':')[1]),
        auth: Buffer.from(`gooduser:${pu.password}`).toString('base64'),
        dataDir,
      });
    }),
  );
}

const pct = (xs, p) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.max(0, Math.ceil((p / 100) * xs.length) - 1))];
const median = (xs) => pct(xs, 50);
const fmt = (x, d = 2) => x.toFixed(d);

/** One tunnel: CONNECT → 200 (set-up ms), then optionally one byte each way, then close. */
function tunnel(d, target, roundTrip) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const s = net.connect({ port: d.port, host: '127.0.0.1' });
    let head = '';
    let setup = 0;
    s.setNoDelay(true);
    s.setTimeout(10_000, () => (s.destroy(), reject(new Error('timeout'))));
    s.on('error', reject);
    s.on('connect', () =>
      s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\nProxy-Authorization: Basic ${d.auth}\r\n\r\n`),
    );
    s.on('data', (b) => {
      if (setup === 0) {
        head += b.toString('latin1');
        if (!head.includes('\r\n\r\n')) return;
        if (!head.startsWith('HTTP/1.1 200')) return reject(new Error(head.split('\r\n')[0]));
        setup = performance.now() - t0;
        if (!roundTrip) return (s.destroy(), resolve(setup));
        s.write('x');
        return;
      }
      s.destroy();
      resolve(setup);
    });
  });
}

async function setupSample(d, target, n) {
  const xs = [];
  for (let i = 0; i < n; i++) xs.push(await tunnel(d, target, false));
  return xs;
}

/** Tunnels per second and the daemon's CPU µs per tunnel over the run. */
async function tunnelsPerSecond(d, target, conc, secs) {
  let done = 0;
  const cpu0 = cpuSeconds(d.proc.pid);
  const until = performance.now() + secs * 1000;
  await Promise.all(
    Array.from({ length: conc }, async () => {
      while (performance.now() < until) {
        await tunnel(d, target, true);
        done++;
      }
    }),
  );
  return { tps: done / secs, cpuUs: ((cpuSeconds(d.proc.pid) - cpu0) / done) * 1e6 };
}

async function metrics(d) {
  const text = await (await fetch(`${d.ready.api}/metrics`)).text();
  const m = (name) => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(text)?.[1] ?? NaN);
  return {
    buffered: m('proxyd_connection_log_buffered'),
    dropped: m('proxyd_connection_log_dropped_total'),
    written: m('proxyd_connection_log_records_total'),
  };
}

/** CPU seconds (user + system) a process has used. */
function cpuSeconds(pid) {
  const { user, system } = cpuOf(pid);
  return user + system;
}
const rssMiB = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;

async function main() {
  const echo = net.createServer((s) => s.on('error', () => {}).pipe(s)).listen(0, '127.0.0.1');
  await new Promise((r) => echo.once('listening', r));
  const target = `127.0.0.1:${echo.address().port}`;
  const load0 = loadavg();
  console.log(`node ${process.version}; load average before ${load0.map((x) => x.toFixed(2)).join(' ')}`);

  if (argv.includes('--flood')) {
    const RATE = opt('rate', 10_000);
    const SECS = opt('secs', 30);
    // --log-off: the same flood against a daemon without the log, for comparison.
    const d = await startDaemon(argv.includes('--log-off') ? ['--connection-log-retention', '0'] : []);
    await setupSample(d, target, 50); // warm: the good user's password is verified and cached
    const quiet = await setupSample(d, target, 400);
    const rss0 = rssMiB(d.proc.pid);
    console.log(`quiet: set-up p50 ${fmt(median(quiet))} ms p99 ${fmt(pct(quiet, 99))} ms; RSS ${fmt(rss0, 1)} MiB`);
    const worker = fork(
      fileURLToPath(import.meta.url),
      ['--flood-worker', String(d.port), String(RATE), String(SECS)],
      { stdio: 'inherit' },
    );
    const result = new Promise((r) => worker.once('message', r));
    const flooded = [];
    let rssMax = rss0;
    let bufferedMax = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < SECS * 1000 - 2000) {
      flooded.push(...(await setupSample(d, target, 50)));
      rssMax = Math.max(rssMax, rssMiB(d.proc.pid));
      bufferedMax = Math.max(bufferedMax, (await metrics(d)).buffered);
      await new Promise((r) => setTimeout(r, 500));
    }
    const r = await result;
    await new Promise((res) => setTimeout(res, 1500));
    const after = await setupSample(d, target, 400);
    const m = await metrics(d);
    const rows = spawnSync('sqlite3', [path.join(d.dataDir, 'proxyd.db'), 'SELECT count(*) FROM connection_log'], {
      encoding: 'utf8',
    }).stdout.trim();
    console.log(
      `flood: ${r.sent} refused attempts sent in ${fmt(r.seconds, 1)} s (${Math.round(r.answered / r.seconds)}/s answered)`,
    );
    console.log(
      `good client during the flood: set-up p50 ${fmt(median(flooded))} ms p99 ${fmt(pct(flooded, 99))} ms (${flooded.length} samples)`,
    );
    console.log(`good client after: p50 ${fmt(median(after))} ms p99 ${fmt(pct(after, 99))} ms`);
    console.log(
      `daemon RSS: ${fmt(rss0, 1)} MiB quiet, ${fmt(rssMax, 1)} MiB max during the flood, ${fmt(rssMiB(d.proc.pid), 1)} MiB after`,
    );
    console.log(
      `log: buffered max ${bufferedMax}, dropped ${m.dropped}, written ${m.written}${rows ? ` (${rows} rows)` : ''}`,
    );
    d.proc.kill('SIGTERM');
  } else {
    const REPS = opt('reps', 5);
    const SAMPLES = opt('samples', 400);
    const CONC = opt('conc', 16);
    const SECS = opt('secs', 3);
    const on = await startDaemon([]);
    const off = await startDaemon(['--connection-log-retention', '0']);
    for (const d of [on, off]) await setupSample(d, target, 100);
    const res = { on: { p50: [], p99: [], tps: [], cpu: [] }, off: { p50: [], p99: [], tps: [], cpu: [] } };
    const paired = [];
    for (let rep = 0; rep < REPS; rep++) {
      for (const [name, d] of rep % 2 === 0
        ? [
            ['on', on],
            ['off', off],
          ]
        : [
            ['off', off],
            ['on', on],
          ]) {
        const xs = await setupSample(d, target, SAMPLES);
        const { tps, cpuUs } = await tunnelsPerSecond(d, target, CONC, SECS);
        res[name].p50.push(median(xs));
        res[name].p99.push(pct(xs, 99));
        res[name].tps.push(tps);
        res[name].cpu.push(cpuUs);
        console.log(
          `rep ${rep + 1} log ${name}: set-up p50 ${fmt(median(xs))} p99 ${fmt(pct(xs, 99))} ms, ${Math.round(tps)} tunnels/s, ${Math.round(cpuUs)} CPU µs/tunnel`,
        );
      }
      paired.push({
        p50: res.on.p50[rep] - res.off.p50[rep],
        tps: res.on.tps[rep] / res.off.tps[rep] - 1,
        cpu: res.on.cpu[rep] / res.off.cpu[rep] - 1,
      });
    }
    const range = (xs, d = 2) => `${fmt(Math.min(...xs), d)}–${fmt(Math.max(...xs), d)}`;
    for (const name of ['on', 'off']) {
      const r = res[name];
      console.log(
        `log ${name}: set-up p50 ${fmt(median(r.p50))} ms (${range(r.p50)}), p99 ${fmt(median(r.p99))} ms (${range(r.p99)}), tunnels/s ${Math.round(median(r.tps))} (${range(r.tps, 0)}), CPU µs/tunnel ${Math.round(median(r.cpu))} (${range(r.cpu, 0)})`,
      );
    }
    const pp = (k) => paired.map((x) => x[k]);
    console.log(
      `paired per round (on − off): set-up p50 median ${fmt(median(pp('p50')), 3)} ms (${range(pp('p50'), 3)}); tunnels/s median ${fmt(median(pp('tps')) * 100, 1)} % (${fmt(Math.min(...pp('tps')) * 100, 1)}–${fmt(Math.max(...pp('tps')) * 100, 1)} %); CPU/tunnel median ${fmt(median(pp('cpu')) * 100, 1)} % (${fmt(Math.min(...pp('cpu')) * 100, 1)}–${fmt(Math.max(...pp('cpu')) * 100, 1)} %)`,
    );
    const m = await metrics(on);
    console.log(`log on: ${m.written} records written, ${m.dropped} dropped`);
    for (const d of [on, off]) d.proc.kill('SIGTERM');
  }
  echo.close();
  console.log(
    `load average after ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );
}

if (argv[0] !== '--flood-worker') {
  await main().catch((e) => {
    console.error(e);
    process.exit(1);
  });
  process.exit(0); // the daemons were sent SIGTERM; do not wait on their pipes
}
