#!/usr/bin/env node
// Does a node run for hours? Three proxyd nodes on one PostgreSQL (a cluster of the bench's own), a steady
// mix for --minutes: whitelist list calls, whitelist add/delete pairs, CONNECT tunnels with credentials
// opening, echoing and closing, a few long-lived tunnels reopened every minute, and one database restart
// (immediate stop, --outage seconds, start) half-way. Each minute, per node: RSS and open descriptors
// (from /proc), heap used and event-loop delay p99 (from /metrics). At the end: per node, the change of
// RSS, heap and descriptors over the run after --warmup minutes (a least-squares slope, as % of the mean
// over that span) and every error outside the outage. Run after `npm run build`:
//   node bench/soak.mjs [--minutes 30] [--warmup 5] [--nodes 3] [--outage 8] [--rate 20]
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { pgCluster } from './lib/pg-cluster.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PROXYD = path.join(ROOT, 'bin/proxyd');
const argv = process.argv.slice(2);
const opt = (name, def) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? Number(argv[i + 1]) : def;
};
const MINUTES = opt('minutes', 30);
const WARMUP = opt('warmup', Math.min(5, Math.max(1, Math.floor(MINUTES / 6))));
const NODES = opt('nodes', 3);
const OUTAGE_S = opt('outage', 8);
const RATE = opt('rate', 20); // tunnels per second, in all
const LONG_TUNNELS = 4;
const log = (o) => console.log(JSON.stringify(o));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const pg = await pgCluster({ fsync: 'off', synchronous_commit: 'off' });
const dbUrl = pg.url.replace(/\/postgres$/, '/proxyd_soak');
spawnSync('runuser', [
  '-u',
  'postgres',
  '--',
  '/usr/lib/postgresql/15/bin/createdb',
  '-h',
  '127.0.0.1',
  '-p',
  String(pg.port),
  'proxyd_soak',
]);

function admin(args, input = '') {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'proxyd-soak-admin-'));
  const r = spawnSync(process.execPath, [PROXYD, 'admin', ...args, '--data-dir', dataDir, '--database-url', dbUrl], {
    input,
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`admin ${args[0]} ${args[1]}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

admin(
  ['account', 'create', '--email', 'soak@example.com', '--password-stdin', '--verified'],
  'soak console password\n',
);
const { token } = admin(['token', 'reset', '--email', 'soak@example.com']);
const pu = admin(['proxy-user', 'create', '--email', 'soak@example.com', '--username', 'soak']);
const proxyAuth = Buffer.from(`soak:${pu.password}`).toString('base64');

// The tunnels' target: an echo server in this process.
const echo = net.createServer((s) => s.pipe(s).on('error', () => {})).listen(0, '127.0.0.1');
await new Promise((r) => echo.once('listening', r));
const target = `127.0.0.1:${echo.address().port}`;

async function startNode(i) {
  const dataDir = mkdtempSync(path.join(tmpdir(), `proxyd-soak-${i}-`));
  const proc = spawn(
    PROXYD,
    [
      'serve',
      '--data-dir',
      dataDir,
      '--database-url',
      dbUrl,
      '--api-listen',
      '127.0.0.1:0',
      '--http-proxy-listen',
      '127.0.0.1:0',
      '--socks-listen',
      '127.0.0.1:0',
      '--allow-private-targets',
      '--log-level',
      'warn',
      '--rate-limits',
      'list=1000000,add=1000000,delete=1000000,invalid=1000000',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const logs = [];
  createInterface({ input: proc.stderr }).on('line', (l) => logs.push(l));
  const ready = await new Promise((resolve, reject) => {
    createInterface({ input: proc.stdout }).once('line', (l) => resolve(JSON.parse(l)));
    proc.once('exit', (c) => reject(new Error(`node ${i} exited ${c}: ${logs.join('\n')}`)));
  });
  const [host, port] = ready.httpProxy.split(':');
  return { i, proc, logs, api: ready.api, proxy: { host, port: Number(port) }, pid: ready.pid };
}
const nodes = [];
for (let i = 0; i < NODES; i++) nodes.push(await startNode(i));

// Errors by kind; those inside the outage window (stop → start + 2 s) are counted apart, as expected.
let outage = null;
const errors = {};
const expected = {};
const counts = { list: 0, add: 0, delete: 0, tunnels: 0 };
function fail(kind) {
  const now = Date.now();
  const bucket = outage && now >= outage.from && now <= (outage.to ?? Infinity) + 2000 ? expected : errors;
  bucket[kind] = (bucket[kind] ?? 0) + 1;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
function api(node, method, route, body) {
  return new Promise((resolve) => {
    const data = body ? JSON.stringify(body) : undefined;
    const req = http.request(
      `${node.api}/openapi/v1/proxy/whitelist/${route}?api_key=${encodeURIComponent(token)}`,
      { method, agent, timeout: 10_000, headers: data ? { 'content-type': 'application/json' } : {} },
      (res) => {
        let text = '';
        res
          .setEncoding('utf8')
          .on('data', (d) => (text += d))
          .on('end', () => {
            try {
              resolve({ status: res.statusCode, code: JSON.parse(text).code });
            } catch {
              resolve({ status: res.statusCode, code: -1 });
            }
          });
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout'))).on('error', () => resolve({ status: 0, code: -1 }));
    req.end(data);
  });
}

/** CONNECT through a node, `bytes` echoed; resolves true on success. `holdMs` keeps the tunnel open. */
function tunnel(node, bytes, holdMs = 0) {
  return new Promise((resolve) => {
    const s = net.connect(node.proxy.port, node.proxy.host);
    let head = '';
    let got = 0;
    let phase = 'head';
    const done = (ok) => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(15_000 + holdMs, () => done(false));
    s.on('error', () => done(false));
    s.on('connect', () =>
      s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\nProxy-Authorization: Basic ${proxyAuth}\r\n\r\n`),
    );
    s.on('data', (d) => {
      if (phase === 'head') {
        head += d.toString('latin1');
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        if (!/^HTTP\/1\.1 200/.test(head)) return done(false);
        phase = 'body';
        got += head.length - end - 4;
        s.write(Buffer.alloc(bytes, 0x61));
      } else got += d.length;
      if (phase === 'body' && got >= bytes) {
        phase = 'hold';
        setTimeout(() => done(true), holdMs);
      }
    });
  });
}

let running = true;
const loops = [];
// Tunnels: RATE per second over the nodes.
loops.push(
  (async () => {
    let n = 0;
    while (running) {
      const node = nodes[n++ % nodes.length];
      void tunnel(node, 16 * 1024).then((ok) => (ok ? counts.tunnels++ : fail('tunnel')));
      await sleep(1000 / RATE);
    }
  })(),
);
// Long-lived tunnels, reopened every minute.
for (let k = 0; k < LONG_TUNNELS; k++) {
  loops.push(
    (async () => {
      while (running) if (!(await tunnel(nodes[k % nodes.length], 1024, 60_000))) fail('long_tunnel');
    })(),
  );
}
// API: a list call every 100 ms; an add/delete pair every 500 ms (a public, non-mainland IP).
loops.push(
  (async () => {
    let n = 0;
    while (running) {
      const r = await api(nodes[n++ % nodes.length], 'GET', 'list');
      if (r.code === 200) counts.list++;
      else fail(`list_${r.status}`);
      await sleep(100);
    }
  })(),
);
loops.push(
  (async () => {
    let n = 0;
    while (running) {
      const ip = `9.9.${Math.floor(n / 250) % 250}.${(n % 250) + 1}`;
      const a = await api(nodes[n % nodes.length], 'POST', 'add', { items: [{ ip, remark: 'soak' }] });
      if (a.code === 200) counts.add++;
      else fail(`add_${a.status}_${a.code}`);
      const d = await api(nodes[(n + 1) % nodes.length], 'POST', 'delete', { ips: [ip] });
      if (d.code === 200) counts.delete++;
      else fail(`delete_${d.status}_${d.code}`);
      n++;
      await sleep(500);
    }
  })(),
);

async function metricsOf(node) {
  const text = await new Promise((resolve) => {
    http
      .get(`${node.api}/metrics`, { agent, timeout: 5000 }, (res) => {
        let t = '';
        res
          .setEncoding('utf8')
          .on('data', (d) => (t += d))
          .on('end', () => resolve(t));
      })
      .on('error', () => resolve(''));
  });
  const value = (name) => Number(text.match(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)`, 'm'))?.[1] ?? NaN);
  return {
    heapMb: value('proxyd_nodejs_heap_size_used_bytes') / 2 ** 20,
    loopP99Ms: value('proxyd_nodejs_eventloop_lag_p99_seconds') * 1000,
  };
}
function procOf(pid) {
  const rss = Number(readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1]) / 1024;
  return { rssMb: rss, fds: readdirSync(`/proc/${pid}/fd`).length };
}

const samples = nodes.map(() => []);
const started = Date.now();
log({
  event: 'start',
  minutes: MINUTES,
  warmup: WARMUP,
  nodes: NODES,
  rate: RATE,
  loadavg: loadavg().map((x) => +x.toFixed(2)),
});
const restartAt = Math.max(1, Math.floor(MINUTES / 2));
for (let minute = 1; minute <= MINUTES; minute++) {
  const due = started + minute * 60_000;
  if (minute === restartAt) {
    await sleep(20_000);
    outage = { from: Date.now() };
    pg.stop('immediate');
    await sleep(OUTAGE_S * 1000);
    pg.start();
    outage.to = Date.now();
    log({ event: 'database_restarted', down_s: +((outage.to - outage.from) / 1000).toFixed(1) });
  }
  await sleep(Math.max(0, due - Date.now()));
  for (const node of nodes) {
    const s = { minute, ...procOf(node.pid), ...(await metricsOf(node)) };
    samples[node.i].push(s);
    log({
      event: 'sample',
      node: node.i,
      ...Object.fromEntries(Object.entries(s).map(([k, v]) => [k, +v.toFixed(2)])),
    });
  }
}
running = false;

/** Least-squares slope of y over minutes, as the change over the span in % of the mean. */
function drift(points, key) {
  const xs = points.map((p) => p.minute);
  const ys = points.map((p) => p[key]);
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  const slope = xs.reduce((a, x, i) => a + (x - mx) * (ys[i] - my), 0) / xs.reduce((a, x) => a + (x - mx) ** 2, 0);
  return +(((slope * (xs[n - 1] - xs[0])) / my) * 100).toFixed(1);
}
const summary = nodes.map((node) => {
  const after = samples[node.i].filter((p) => p.minute > WARMUP);
  const last = after.at(-1);
  return {
    node: node.i,
    rss_drift_pct: drift(after, 'rssMb'),
    heap_drift_pct: drift(after, 'heapMb'),
    fds_drift_pct: drift(after, 'fds'),
    rss_mb_last: +last.rssMb.toFixed(1),
    fds_last: last.fds,
    loop_p99_ms_max: +Math.max(...after.map((p) => p.loopP99Ms)).toFixed(1),
    exited: node.proc.exitCode ?? node.proc.signalCode,
  };
});
log({
  event: 'summary',
  counts,
  errors,
  during_outage: expected,
  loadavg: loadavg().map((x) => +x.toFixed(2)),
  nodes: summary,
});
for (const node of nodes) node.proc.kill('SIGTERM');
await sleep(2000);
pg.destroy();
process.exit(0);
