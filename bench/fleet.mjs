#!/usr/bin/env node
// The fleet's admission view (docs/operations.md, Fleet). Run after `npm run build`:
//   node --expose-gc bench/fleet.mjs [--ips 100000] [--users 10000] [--nodes 3] [--changes 200] [--connects 2000]
//   node --expose-gc bench/fleet.mjs --database-url postgres://USER@HOST:PORT/postgres   (PostgreSQL: the URL's
//     role must be allowed CREATE DATABASE; the bench makes its own databases there and drops them at the end)
// 1. In process: the view with --ips whitelist IPs and --users proxy users — heap it holds, full-reload time.
// 2. Two spawned daemons, one on a near-empty data dir (1 IP, 1 user) and one on the full one: RSS and
//    CONNECT set-up latency (PROXY header as a whitelisted source; credentials), interleaved, as ratios.
// 3. --nodes daemons on one database (SQLite: --shared-data-dir; PostgreSQL: one database, a data dir each): whitelist add/delete through node 1's API,
//    time until every other node's gateway admits/refuses; p50/p99 over --changes changes.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PROXYD = path.join(ROOT, 'bin/proxyd');
const argv = process.argv.slice(2);
const opt = (name, def) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : def;
};
const IPS = Number(opt('ips', 100_000));
const USERS = Number(opt('users', 10_000));
const NODES = Number(opt('nodes', 3));
const CHANGES = Number(opt('changes', 200));
const CONNECTS = Number(opt('connects', 2000));
const DATABASE_URL = opt('database-url', undefined);
const LIMITS = ['--rate-limits', 'list=100000,add=100000,delete=100000,invalid=100000'];
const PASSWORD = 'bench proxy password';

const dist = (p) => import(path.join(ROOT, 'dist', p));
const { openStore } = await dist('daemon/store/index.js');
const { AdmissionView } = await dist('daemon/admission/view.js');
const { StoreAdmissionFeed } = await dist('daemon/admission/feed.js');
const { hashPassword } = await dist('daemon/secrets.js');

const ipOf = (i) => `${11 + Math.floor(i / 65536)}.${Math.floor(i / 256) % 256}.${i % 256}.7`;
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};
const ms = (x) => +x.toFixed(2);
const log = (o) => console.log(JSON.stringify(o));

// PostgreSQL: databases this run made (dropped at the end), by the data dir that stands for each.
const databases = new Map();
let pgAdmin = null;

/** A data dir, and on PostgreSQL a fresh database of its own; the store config for both. */
async function newDatabase(prefix) {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  if (!DATABASE_URL) return { dataDir: dir };
  const { default: postgres } = await import('#postgres');
  pgAdmin ??= postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
  const name = `proxyd_bench_${process.pid}_${databases.size}`;
  await pgAdmin.unsafe(`CREATE DATABASE ${name}`);
  const u = new URL(DATABASE_URL);
  u.pathname = `/${name}`;
  databases.set(dir, { name, url: u.toString() });
  return { dataDir: dir, databaseUrl: u.toString() };
}

const storeConfig = (dir) => ({ dataDir: dir, databaseUrl: databases.get(dir)?.url });

/** `n` calls of `fn(i)`, `width` at a time. */
async function inParallel(n, width, fn) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, n) }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

/** A database with `ips` whitelist IPs over 1,000 accounts and `users` proxy users (one shared hash: seeding speed). */
async function seed(ips, users) {
  const cfg = await newDatabase('proxyd-fleet-bench-');
  const store = await openStore(cfg);
  const hash = await hashPassword(PASSWORD);
  const accounts = Math.max(1, Math.min(1000, Math.max(ips, users)));
  const ids = [];
  await inParallel(
    accounts,
    8,
    async (i) => (ids[i] = (await store.accounts.create(`a${i}@example.com`, 'unused', true)).id),
  );
  await inParallel(users, 8, (i) => store.proxyUsers.create(ids[i % accounts], `user${i}`, hash));
  await inParallel(ips, 8, (i) => store.whitelist.claimIp(ids[i % accounts], ipOf(i), ''));
  await store.close();
  return cfg.dataDir;
}

function heapMb() {
  globalThis.gc?.();
  globalThis.gc?.();
  return process.memoryUsage().heapUsed / 2 ** 20;
}

async function inProcess(dir) {
  const store = await openStore(storeConfig(dir));
  const before = heapMb();
  const view = new AdmissionView(new StoreAdmissionFeed(store.changeLog), { staleAdmissionSec: 300, pollMs: 0 });
  const t0 = performance.now();
  await view.start();
  const firstLoad = performance.now() - t0;
  const heldMb = heapMb() - before;
  const status = view.status();
  view.close();
  const reloads = [];
  const snapshots = [];
  for (let i = 0; i < 5; i++) {
    const s0 = performance.now();
    await store.changeLog.snapshot();
    snapshots.push(performance.now() - s0);
    const v = new AdmissionView(new StoreAdmissionFeed(store.changeLog), { staleAdmissionSec: 300, pollMs: 0 });
    const r0 = performance.now();
    await v.start();
    reloads.push(performance.now() - r0);
    v.close();
  }
  await store.close();
  return {
    ips: status.ips,
    users: status.users,
    heap_mb: +heldMb.toFixed(1),
    gc_exposed: typeof globalThis.gc === 'function',
    first_load_ms: ms(firstLoad),
    reload_ms_median: ms(pct(reloads, 50)),
    snapshot_query_ms_median: ms(pct(snapshots, 50)),
  };
}

async function startNode(dataDir, extra = []) {
  const url = databases.get(dataDir)?.url;
  // PostgreSQL: a data dir of its own per node (what a fleet host has), the database shared.
  const db = url
    ? ['--data-dir', mkdtempSync(path.join(tmpdir(), 'proxyd-fleet-node-')), '--database-url', url]
    : ['--data-dir', dataDir, '--shared-data-dir'];
  const proc = spawn(
    process.execPath,
    [
      PROXYD,
      'serve',
      ...db,
      '--api-listen',
      '127.0.0.1:0',
      '--http-proxy-listen',
      '127.0.0.1:0',
      '--socks-listen',
      '127.0.0.1:0',
      '--allow-private-targets',
      '--proxy-protocol-from',
      '127.0.0.1/32',
      '--log-level',
      'warn',
      ...LIMITS,
      ...extra,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const ready = await new Promise((resolve, reject) => {
    createInterface({ input: proc.stdout }).once('line', (l) => resolve(JSON.parse(l)));
    proc.once('exit', (c) => reject(new Error(`proxyd exited ${c}`)));
  });
  return {
    ...ready,
    rssMb: () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${proc.pid}/status`, 'utf8'))[1]) / 1024,
    stop: () => new Promise((r) => (proc.exitCode !== null ? r() : (proc.once('exit', r), proc.kill('SIGTERM')))),
  };
}

function echoServer() {
  const s = net.createServer((c) => c.on('error', () => {}).pipe(c));
  return new Promise((r) => s.listen(0, '127.0.0.1', () => r(s)));
}

/** One CONNECT: ms until the status line, and its code. */
function connectOnce(gateway, target, as) {
  const [host, port] = gateway.split(':');
  return new Promise((resolve) => {
    const t0 = performance.now();
    const s = net.connect(Number(port), host);
    s.setNoDelay(true);
    let buf = '';
    const done = (code) => {
      s.destroy();
      resolve({ ms: performance.now() - t0, code });
    };
    s.on('error', () => done(0));
    s.on('connect', () => {
      const head = as.source ? `PROXY TCP4 ${as.source} 127.0.0.1 40000 ${port}\r\n` : '';
      const auth = as.user
        ? `Proxy-Authorization: Basic ${Buffer.from(`${as.user}:${PASSWORD}`).toString('base64')}\r\n`
        : '';
      s.write(`${head}CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${auth}\r\n`);
    });
    s.on('data', (d) => {
      buf += d.toString('latin1');
      const m = /^HTTP\/1\.1 (\d{3})/.exec(buf);
      if (m) done(Number(m[1]));
    });
  });
}

async function setupLatency(emptyDir, fullDir) {
  const echo = await echoServer();
  const target = `127.0.0.1:${echo.address().port}`;
  const empty = await startNode(emptyDir);
  const full = await startNode(fullDir);
  const rss = { empty_mb: +empty.rssMb().toFixed(1), full_mb: +full.rssMb().toFixed(1) };
  const out = {};
  for (const [name, pick] of [
    ['by_source_ip', (n, i) => ({ source: n === 'full' ? ipOf((i * 7919) % IPS) : ipOf(0) })],
    ['by_credentials', (n, i) => ({ user: n === 'full' ? `user${(i * 31) % Math.min(USERS, 200)}` : 'user0' })],
  ]) {
    const t = { empty: [], full: [] };
    // Warm-up (credential cache, JIT), then interleaved so both daemons see the same machine load.
    for (let i = 0; i < 200; i++)
      for (const [n, d] of [
        ['empty', empty],
        ['full', full],
      ])
        await connectOnce(d.httpProxy, target, pick(n, i));
    for (let i = 0; i < CONNECTS; i++) {
      for (const [n, d] of [
        ['empty', empty],
        ['full', full],
      ]) {
        const r = await connectOnce(d.httpProxy, target, pick(n, i));
        if (r.code !== 200) throw new Error(`${n} ${name}: HTTP ${r.code}`);
        t[n].push(r.ms);
      }
    }
    out[name] = {
      empty_p50_ms: ms(pct(t.empty, 50)),
      full_p50_ms: ms(pct(t.full, 50)),
      ratio_p50: +(pct(t.full, 50) / pct(t.empty, 50)).toFixed(2),
      empty_p99_ms: ms(pct(t.empty, 99)),
      full_p99_ms: ms(pct(t.full, 99)),
      ratio_p99: +(pct(t.full, 99) / pct(t.empty, 99)).toFixed(2),
    };
  }
  await Promise.all([empty.stop(), full.stop()]);
  echo.close();
  return { rss, ...out };
}

async function propagation() {
  const { dataDir: dir } = await newDatabase('proxyd-fleet-nodes-');
  const store = await openStore(storeConfig(dir));
  const { mintToken } = await dist('daemon/secrets.js');
  const a = await store.accounts.create('fleet@example.com', 'unused', true);
  const t = mintToken();
  await store.tokens.replace(a.id, t.accessKey, t.secretHash);
  await store.close();
  const echo = await echoServer();
  const target = `127.0.0.1:${echo.address().port}`;
  const nodes = [];
  for (let i = 0; i < NODES; i++) nodes.push(await startNode(dir));
  const api = (path, body) =>
    fetch(`${nodes[0].api}${path}?api_key=${encodeURIComponent(t.token)}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }).then((r) => r.json());
  const lat = [];
  for (let i = 0; i < CHANGES; i++) {
    const ip = `8.8.${Math.floor(i / 2) % 256}.${1 + (Math.floor(i / 512) % 250)}`;
    const adding = i % 2 === 0;
    const t0 = performance.now();
    const r = await api(
      adding ? '/openapi/v1/proxy/whitelist/add' : '/openapi/v1/proxy/whitelist/delete',
      adding ? { items: [{ ip }] } : { ips: [ip] },
    );
    if (r.code !== 200) throw new Error(`change ${i}: ${JSON.stringify(r)}`);
    const want = adding ? 200 : 407;
    const seen = await Promise.all(
      nodes.slice(1).map(async (n) => {
        for (;;) {
          if ((await connectOnce(n.httpProxy, target, { source: ip })).code === want) return performance.now() - t0;
          if (performance.now() - t0 > 10_000) return Infinity;
        }
      }),
    );
    lat.push(Math.max(...seen));
  }
  await Promise.all(nodes.map((n) => n.stop()));
  echo.close();
  return {
    nodes: NODES,
    changes: CHANGES,
    backend: DATABASE_URL ? 'postgresql' : 'sqlite (shared data dir)',
    p50_ms: ms(pct(lat, 50)),
    p99_ms: ms(pct(lat, 99)),
    max_ms: ms(Math.max(...lat)),
  };
}

log({ event: 'seeding', ips: IPS, users: USERS, backend: DATABASE_URL ? 'postgresql' : 'sqlite' });
const s0 = performance.now();
const fullDir = await seed(IPS, USERS);
const emptyDir = await seed(1, 1);
log({ event: 'seeded', ms: Math.round(performance.now() - s0) });
log({ event: 'view_in_process', ...(await inProcess(fullDir)) });
log({ event: 'connect_setup', connects: CONNECTS, ...(await setupLatency(emptyDir, fullDir)) });
log({ event: 'propagation', ...(await propagation()) });
for (const { name } of databases.values()) await pgAdmin.unsafe(`DROP DATABASE ${name} WITH (FORCE)`);
await pgAdmin?.end();
