#!/usr/bin/env node
// Batch creation of proxy users through the customer API (POST /openapi/v1/proxy/users/batch, 100 a batch): users
// per second on SQLite and on PostgreSQL (a cluster of the bench's own: bench/lib/pg-cluster.mjs), each against a
// `proxyd serve` of its own started here with the key limits lifted (the default is 30 writes a minute per key).
// Every user gets a generated password (scrypt, as in production): hashing is most of the work.
//
//   npm run build && node bench/users-batch.mjs [--users 10000] [--concurrency 2] [--only sqlite|postgres]
//
// Prints what one password hash costs alone, then one JSON line per backend: users, seconds, users/s, the batches'
// p50/p99 in ms, and that the count is exact.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { pgCluster } from './lib/pg-cluster.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PROXYD = path.join(ROOT, 'bin/proxyd');
const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const USERS = Number(args.users ?? 10_000);
const CONCURRENCY = Number(args.concurrency ?? 2);
const BATCH = 100;

const { openStore } = await import(path.join(ROOT, 'dist/daemon/store/index.js'));
const { ApiKeyService } = await import(path.join(ROOT, 'dist/daemon/services/api-keys.js'));
const { hashPassword } = await import(path.join(ROOT, 'dist/daemon/secrets.js'));

function pct(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function startDaemon(dataDir, databaseUrl) {
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
      '--key-limits',
      '100000,100000',
      '--log-level',
      'warn',
      ...(databaseUrl ? ['--database-url', databaseUrl] : []),
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const ready = await new Promise((resolve, reject) => {
    createInterface({ input: proc.stdout }).once('line', (l) => resolve(JSON.parse(l)));
    proc.once('exit', (code) => reject(new Error(`proxyd exited ${code}`)));
  });
  return { proc, api: ready.api };
}

async function runOne(backend, databaseUrl) {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'proxyd-bench-users-'));
  // The account and its key made in the store, as the console makes them.
  const store = await openStore({ dataDir, databaseUrl, migrate: true });
  const account = await store.accounts.create('bench@example.com', await hashPassword('bench password 1'), true);
  const ctx = { actor: { type: 'operator', id: 'bench' }, sourceIp: null, requestId: null };
  const { key } = await new ApiKeyService(store).create(
    account.id,
    { name: 'bench', scopes: ['users:read', 'users:write'], expiresAtMs: null, allowedIps: [] },
    ctx,
  );
  await store.close();
  const d = await startDaemon(dataDir, databaseUrl);
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const batches = Math.ceil(USERS / BATCH);
  let next = 0;
  let created = 0;
  const times = [];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (let b = next++; b < batches; b = next++) {
        const items = Array.from({ length: Math.min(BATCH, USERS - b * BATCH) }, (_, i) => ({
          username: `bench-${b}-${i}`,
        }));
        const s = performance.now();
        const r = await fetch(`${d.api}/openapi/v1/proxy/users/batch`, {
          method: 'POST',
          headers: { ...headers, 'idempotency-key': `bench-${b}` },
          body: JSON.stringify({ items }),
        });
        const body = await r.json();
        times.push(performance.now() - s);
        if (body.code !== 200) throw new Error(`batch ${b}: ${body.code} ${body.message}`);
        created += body.data.success_count;
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const total = (await (await fetch(`${d.api}/openapi/v1/proxy/users?page_size=1`, { headers })).json()).data.total;
  d.proc.kill('SIGTERM');
  await new Promise((r) => d.proc.once('exit', r));
  rmSync(dataDir, { recursive: true, force: true });
  times.sort((a, b) => a - b);
  return {
    backend,
    users: USERS,
    concurrency: CONCURRENCY,
    seconds: Number(seconds.toFixed(1)),
    users_per_s: Math.round(created / seconds),
    batch_p50_ms: Math.round(pct(times, 50)),
    batch_p99_ms: Math.round(pct(times, 99)),
    exact: created === USERS && total === USERS,
  };
}

// What one password hash costs here (scrypt N=16384, r=8: the production parameters), alone: the ceiling of users/s
// is about the cores free divided by it.
{
  const n = 20;
  const t = performance.now();
  for (let i = 0; i < n; i++) await hashPassword(`bench password ${i}`);
  console.log(JSON.stringify({ scrypt_ms_per_hash: Number(((performance.now() - t) / n).toFixed(1)) }));
}

if (args.only !== 'postgres') console.log(JSON.stringify(await runOne('sqlite')));
if (args.only !== 'sqlite') {
  const pg = await pgCluster({ shared_buffers: '128MB' });
  try {
    console.log(JSON.stringify(await runOne('postgres', pg.url)));
  } finally {
    pg.destroy();
  }
}
