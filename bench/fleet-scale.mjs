#!/usr/bin/env node
// How far one PostgreSQL goes for a fleet (docs/benchmarks/fleet-scale.md, "Fleet scale"; SPEC 18): N simulated nodes in this
// process, each running the real usage meter (metering/meter.ts: its timers, its flush ids, its cadence) and the
// real connection-log writer (observe/connection-log.ts) over a real PostgresStore of its own, against one
// throwaway PostgreSQL. Every user is active every second (the worst case for the bound "rows per active
// user-second"), each on one node, with --domains target domains per user.
//
// Reports, over the measurement window (after --warmup s):
//   - rows written, from PostgreSQL's own counters (pg_stat_user_tables: n_tup_ins + n_tup_upd), per table family,
//     and per active user-second (connection_log apart: it grows with connections, not users);
//   - usage flush latency p50/p99/max (addFlush, as the meter calls it) and flushes that failed;
//   - visibility: a probe user per node (an account without a limit) relays one connection at random instants;
//     a reader polls that account's hour buckets every 100 ms: p50/p95/max from a connection to the read that sees it;
//   - connection-log records generated / written / dropped (the writer's counters: what /metrics exports) and the
//     largest buffer seen;
//   - the database's CPU (all processes of the postgres user, from /proc) and this process's CPU.
//
// Run after `npm run build` (PROXYD_DIST=path/to/dist measures another build, e.g. the base commit's):
//   node bench/fleet-scale.mjs [--nodes 10] [--users 60000] [--secs 120] [--warmup 20] [--domains 1]
//        [--limited 0] [--conn-rate 0]
// --limited F: the fraction of accounts with a traffic limit (flushed every second by the meter; the plan
//   enforcer is not simulated). --conn-rate R: connection-log records per second, fleet-wide.
import { loadavg } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import postgres from '#postgres';
import { pgCluster, postgresCpu } from './lib/pg-cluster.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DIST = path.resolve(process.env.PROXYD_DIST ?? path.join(ROOT, 'dist'));
const load = (p) => import(pathToFileURL(path.join(DIST, p)).href);
const la = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
const { PostgresStore } = await load('daemon/store/postgres/index.js');
const { UsageMeter, PG_CADENCE } = await load('daemon/metering/meter.js');
const { ConnectionLogWriter } = await load('daemon/observe/connection-log.js');

const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(`--${name}`) ? Number(argv[argv.indexOf(`--${name}`) + 1]) : def);
const NODES = opt('nodes', 10);
const USERS = opt('users', 60_000);
const SECS = opt('secs', 120);
const WARMUP = opt('warmup', 20);
const DOMAINS = opt('domains', 1);
const LIMITED = opt('limited', 0);
const CONN_RATE = opt('conn-rate', 0);
const USERS_PER_ACCOUNT = 10;
const PROBE_ACCOUNT = 9_000_000;

const pct = (xs, p) =>
  xs.length === 0
    ? NaN
    : [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.max(0, Math.ceil((p / 100) * xs.length) - 1))];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Rows inserted and updated per table family, from PostgreSQL's counters (stats flushed by the backends first). */
async function rowCounters(sql) {
  await sql`SELECT pg_stat_clear_snapshot()`;
  const rows = await sql`SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables`;
  const out = { usage: 0, connection_log: 0, other: 0, byTable: {} };
  for (const r of rows) {
    const n = Number(r.n_tup_ins) + Number(r.n_tup_upd);
    const family = r.relname.startsWith('connection_log')
      ? 'connection_log'
      : r.relname.startsWith('usage_')
        ? 'usage'
        : 'other';
    out[family] += n;
    const key = family === 'connection_log' ? 'connection_log' : r.relname;
    out.byTable[key] = (out.byTable[key] ?? 0) + n;
  }
  return out;
}

console.log(
  `fleet-scale: dist ${path.relative(ROOT, DIST) || '.'}, nodes ${NODES}, active users ${USERS} (fleet-wide, each on one node, every second), domains per user ${DOMAINS}, limited accounts ${LIMITED}, connection log ${CONN_RATE}/s, warm-up ${WARMUP} s + ${SECS} s measured`,
);
console.log(`load average before ${la()}`);
const pg = await pgCluster({ shared_buffers: '256MB', synchronous_commit: 'on' });
const admin = postgres(pg.url, { max: 1, onnotice: () => {} });
try {
  const stores = [];
  for (let i = 0; i < NODES; i++) stores.push(await PostgresStore.open(pg.url, { migrate: i === 0 }));
  let measuring = false;
  /** Flush latencies, those carrying per-domain usage apart (on PostgreSQL once a minute per node). */
  const latencies = [];
  const domainLatencies = [];
  const rollUps = [];
  let flushes = 0;
  let failed = 0;
  const meters = [];
  const writers = [];
  const probes = [];
  const accounts = Math.ceil(USERS / USERS_PER_ACCOUNT);
  const limitedUpTo = Math.round(accounts * LIMITED);
  for (let n = 0; n < NODES; n++) {
    const store = stores[n];
    // The node's users, as the gateway would hand them over each second (one delta per user and domain).
    const deltas = [];
    for (let u = n; u < USERS; u += NODES) {
      const accountId = 1 + Math.floor(u / USERS_PER_ACCOUNT);
      for (let k = 0; k < Math.max(1, DOMAINS); k++) {
        deltas.push({
          accountId,
          subject: `user:u${u}`,
          target: DOMAINS === 0 ? null : `www.site${(u + k) % 500}.example:443`,
          bytesUp: 1000 + k,
          bytesDown: 50_000 + u,
          connections: 1,
        });
      }
    }
    const probe = { emitted: [], pending: 0, seen: 0 };
    probes.push(probe);
    const collect = () => {
      const out = deltas.slice();
      if (probe.pending > 0) {
        out.push({
          accountId: PROBE_ACCOUNT,
          subject: `user:probe${n}`,
          target: 'probe.example:443',
          bytesUp: probe.pending,
          bytesDown: 0,
          connections: probe.pending,
        });
        probe.pending = 0;
      }
      return out;
    };
    // The store as the meter sees it, with each flush timed.
    const usage = Object.create(store.usage);
    usage.addFlush = async (...args) => {
      const t = performance.now();
      let r;
      try {
        r = await store.usage.addFlush(...args);
      } catch (e) {
        r = 'error';
        if (measuring) failed++;
        throw e;
      } finally {
        if (measuring) (args[4]?.deltas?.length > 0 ? domainLatencies : latencies).push(performance.now() - t);
      }
      if (measuring) {
        if (r === 'ok') flushes++;
        else if (r !== 'duplicate') failed++;
      }
      return r;
    };
    // Roll-ups (one node of the fleet at a time), timed.
    if (store.usage.rollUp) {
      usage.rollUp = async () => {
        const t = performance.now();
        const r = await store.usage.rollUp();
        if (measuring && r !== 'skipped') rollUps.push({ ms: performance.now() - t, rows: r });
        return r;
      };
    }
    // The cadence serve.ts gives a node on PostgreSQL (none before it existed: every second, everything).
    const meter = new UsageMeter(usage, collect, {
      ...(PG_CADENCE ?? {}),
      urgent: (accountId) => accountId <= limitedUpTo,
    });
    meters.push(meter);
    if (CONN_RATE > 0) {
      const w = new ConnectionLogWriter(store.connectionLog, `node${n}`, {});
      writers.push(w);
    }
  }
  // Nodes start spread over the first second (their flush phases: the meter's own).
  for (let n = 0; n < NODES; n++) {
    meters[n].start();
    writers[n]?.start();
    await sleep(1000 / NODES);
  }
  // Probe connections: one per node at random instants, 100–300 ms apart.
  let probing = true;
  for (const p of probes) {
    (async () => {
      while (probing) {
        await sleep(100 + Math.random() * 200);
        if (!measuring) continue;
        p.emitted.push(performance.now());
        p.pending++;
      }
    })();
  }
  const visibility = [];
  const reader = (async () => {
    while (probing) {
      await sleep(100);
      if (!measuring) continue;
      const now = Date.now();
      try {
        const rows = await stores[0].usage.query({
          accountId: PROBE_ACCOUNT,
          period: 'hour',
          fromMs: Math.floor(now / 3_600_000) * 3_600_000 - 3_600_000,
          toMs: now + 3_600_000,
          by: 'subject',
        });
        const at = performance.now();
        for (const r of rows) {
          const p = probes[Number(r.subject.slice('user:probe'.length))];
          while (p.seen < r.connections && p.seen < p.emitted.length) visibility.push(at - p.emitted[p.seen++]);
        }
      } catch {
        /* counted as slow: the next read sees it */
      }
    }
  })();
  // Connection-log records: each node's share, every 10 ms.
  let generated = 0;
  let maxBuffered = 0;
  let connTimer = null;
  if (CONN_RATE > 0) {
    let seq = 0;
    const t0 = performance.now();
    connTimer = setInterval(() => {
      const due = Math.floor(((performance.now() - t0) / 1000) * CONN_RATE);
      while (seq < due) {
        const n = seq % NODES;
        const u = seq % USERS;
        writers[n].record({
          startedAt: Date.now(),
          requestId: `r${n}-${seq}-${t0.toFixed(0)}`,
          protocol: 'connect',
          sourceIp: `10.${(u >> 16) & 255}.${(u >> 8) & 255}.${u & 255}`,
          username: `u${u}`,
          accountId: 1 + Math.floor(u / USERS_PER_ACCOUNT),
          target: `www.site${u % 500}.example:443`,
          reason: null,
          bytesUp: 1000,
          bytesDown: 50_000,
          durationMs: 1200,
        });
        seq++;
        if (measuring) generated++;
      }
      for (const w of writers) maxBuffered = measuring ? Math.max(maxBuffered, w.buffered) : maxBuffered;
    }, 10);
  }
  await sleep(WARMUP * 1000);
  const written0 = writers.reduce((s, w) => s + w.written, 0);
  const dropped0 = writers.reduce((s, w) => s + w.dropped, 0);
  const rows0 = await rowCounters(admin);
  const cpu0 = postgresCpu();
  const own0 = process.cpuUsage();
  const t0 = performance.now();
  measuring = true;
  await sleep(SECS * 1000);
  measuring = false;
  const elapsed = (performance.now() - t0) / 1000;
  const cpu = postgresCpu() - cpu0;
  const own = process.cpuUsage(own0);
  const written = writers.reduce((s, w) => s + w.written, 0) - written0;
  const dropped = writers.reduce((s, w) => s + w.dropped, 0) - dropped0;
  // Let the backends report their counters (PostgreSQL flushes table statistics at most once a second per backend).
  await sleep(1500);
  const rows1 = await rowCounters(admin);
  probing = false;
  if (connTimer) clearInterval(connTimer);
  await reader;
  const d = (k) => rows1[k] - rows0[k];
  const perTable = Object.fromEntries(
    Object.keys(rows1.byTable)
      .map((k) => [k, Math.round((rows1.byTable[k] - (rows0.byTable[k] ?? 0)) / elapsed)])
      .filter(([, v]) => v > 0),
  );
  const userSeconds = USERS * elapsed;
  console.log(`window ${elapsed.toFixed(1)} s`);
  console.log(
    `rows written/s (pg_stat_user_tables, ins+upd): usage ${Math.round(d('usage') / elapsed)}, connection_log ${Math.round(d('connection_log') / elapsed)}, other ${Math.round(d('other') / elapsed)}; by table ${JSON.stringify(perTable)}`,
  );
  console.log(
    `rows per active user-second (all tables but connection_log): ${((d('usage') + d('other')) / userSeconds).toFixed(3)}`,
  );
  const all = [...latencies, ...domainLatencies];
  const lat = (xs) =>
    xs.length === 0
      ? 'none'
      : `p50 ${pct(xs, 50).toFixed(0)} ms, p99 ${pct(xs, 99).toFixed(0)} ms, max ${Math.max(...xs).toFixed(0)} ms`;
  console.log(
    `usage flushes: ${flushes} ok (${(flushes / elapsed).toFixed(1)}/s), ${failed} failed; latency ${lat(all)}`,
  );
  if (PG_CADENCE)
    console.log(
      `  of which without per-domain usage (${latencies.length}): ${lat(latencies)}; with it (${domainLatencies.length}): ${lat(domainLatencies)}`,
    );
  if (rollUps.length > 0)
    console.log(
      `roll-ups: ${rollUps.length}, minute rows folded ${rollUps.map((r) => r.rows).join(', ')}, in ${rollUps.map((r) => r.ms.toFixed(0)).join(', ')} ms`,
    );
  const unseen = probes.reduce((s, p) => s + p.emitted.length - p.seen, 0);
  console.log(
    `visibility (probe connection → seen in the hour buckets): p50 ${(pct(visibility, 50) / 1000).toFixed(2)} s, p95 ${(pct(visibility, 95) / 1000).toFixed(2)} s, max ${(Math.max(...visibility) / 1000).toFixed(2)} s (${visibility.length} seen, ${unseen} not yet at the end)`,
  );
  if (CONN_RATE > 0)
    console.log(
      `connection log: generated ${generated} (${Math.round(generated / elapsed)}/s), written ${written} (${Math.round(written / elapsed)}/s), dropped ${dropped}, largest buffer ${maxBuffered}`,
    );
  console.log(
    `database CPU: ${(cpu / elapsed).toFixed(2)} cores on average; this process (the simulated nodes): ${((own.user + own.system) / 1e6 / elapsed).toFixed(2)} cores`,
  );
  for (const m of meters) await m.stop(2_000).catch(() => {});
  for (const w of writers) await w.stop?.().catch?.(() => {});
  for (const s of stores) await s.close();
} finally {
  await admin.end({ timeout: 1 }).catch(() => {});
  pg.destroy();
  console.log(`load average after ${la()}`);
}
process.exit(0);
