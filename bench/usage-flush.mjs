#!/usr/bin/env node
// The write load of usage metering on one PostgreSQL (docs/benchmarks/usage-flushes.md, "Usage flushes"): N simulated nodes,
// each flushing once a second the usage of M active users (every user active every second: the worst case),
// through the real store (`addFlush`: one transaction, the flush id, three bucket upserts per user). Reports
// flushes/s, bucket rows written/s, flush latency p50/p99/max, and the database's CPU (all its processes, from
// /proc) per second of the run. Since issue 37 a flush writes one minute row per user (hours and days are rolled up
// later: bench/fleet-scale.mjs measures the whole, with the meter's cadence). Run after `npm run build`:
// With --domains K each user's usage is split over K target domains (one domain row per user and domain: the
// per-domain counting of usage_domains); K = 0 sends deltas without a target (before per-domain counting, only
// `other` rows).
//   node bench/usage-flush.mjs [--nodes 10] [--users 10000] [--secs 20] [--domains 1]
import { loadavg } from 'node:os';
import { PostgresStore } from '../dist/daemon/store/postgres/index.js';
import { pgCluster, postgresCpu } from './lib/pg-cluster.mjs';

const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(`--${name}`) ? Number(argv[argv.indexOf(`--${name}`) + 1]) : def);
const NODES = opt('nodes', 10);
const USERS = opt('users', 10_000);
const SECS = opt('secs', 20);
const DOMAINS = opt('domains', 1);

const pct = (xs, p) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.max(0, Math.ceil((p / 100) * xs.length) - 1))];

console.log(
  `nodes ${NODES}, active users per node ${USERS}, domains per user ${DOMAINS}, ${SECS} s; load average before ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`,
);
const pg = await pgCluster({ shared_buffers: '256MB', synchronous_commit: 'on' });
try {
  const stores = [];
  for (let i = 0; i < NODES; i++) stores.push(await PostgresStore.open(pg.url, { migrate: i === 0 }));
  const latencies = [];
  let flushes = 0;
  let failed = 0;
  let seq = 0;
  const cpu0 = postgresCpu();
  const t0 = Date.now();
  await Promise.all(
    stores.map(async (store, n) => {
      // Nodes start spread over the first second, as real ones would.
      await new Promise((r) => setTimeout(r, (1000 / NODES) * n));
      while (Date.now() - t0 < SECS * 1000) {
        const started = Date.now();
        const deltas = Array.from({ length: USERS }, (_, u) =>
          DOMAINS === 0
            ? [
                {
                  accountId: 1 + (u % 5000),
                  subject: `user:u${u}`,
                  bytesUp: 1000 + u,
                  bytesDown: 5000 + u,
                  connections: 1,
                },
              ]
            : Array.from({ length: DOMAINS }, (_, k) => ({
                accountId: 1 + (u % 5000),
                subject: `user:u${u}`,
                target: `site${k}.example`,
                bytesUp: 1000 + u,
                bytesDown: 5000 + u,
                connections: 1,
              })),
        ).flat();
        try {
          const r = await store.usage.addFlush(`node${n}`, `bench-${n}-${++seq}`, started, deltas);
          if (r === 'ok') flushes++;
          else failed++;
        } catch {
          failed++;
        }
        latencies.push(Date.now() - started);
        const wait = 1000 - (Date.now() - started);
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
    }),
  );
  const elapsed = (Date.now() - t0) / 1000;
  const cpu = postgresCpu() - cpu0;
  console.log(
    `flushes: ${flushes} in ${elapsed.toFixed(1)} s (${(flushes / elapsed).toFixed(1)}/s; wanted ${NODES}/s), failed ${failed}`,
  );
  console.log(
    `bucket rows upserted: ${Math.round((flushes * USERS) / elapsed)}/s (${USERS} users, a minute row each per flush)`,
  );
  console.log(`domain rows upserted: ${Math.round((flushes * USERS * Math.max(1, DOMAINS)) / elapsed)}/s`);
  console.log(
    `flush latency: p50 ${pct(latencies, 50)} ms, p99 ${pct(latencies, 99)} ms, max ${Math.max(...latencies)} ms`,
  );
  console.log(`database CPU: ${(cpu / elapsed).toFixed(2)} cores on average (2-core machine, shared with this bench)`);
  for (const s of stores) await s.close();
} finally {
  pg.destroy();
  console.log(
    `load average after ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );
}
