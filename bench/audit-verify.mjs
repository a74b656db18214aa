#!/usr/bin/env node
// `proxyd admin audit verify` over a large audit log: records per second of the whole command (a process, as an
// operator runs it: open, read every chain in order, hash every record, check every head). The log is written
// directly (sealed as the store seals records) over `--accounts` chains, then checked; SQLite always, PostgreSQL
// too with --database-url (a database of the bench's own, created then dropped).
//
// Also the cost of one record on its own: `--appends N` records appended through the store one by one (each its own
// transaction: the head's lock, the record, the new head), p50/p99.
//
//   node bench/audit-verify.mjs [--records 1000000] [--accounts 1000] [--runs 3] [--appends 2000] [--database-url postgres://…]
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PROXYD = path.join(ROOT, 'bin/proxyd');
const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const RECORDS = Number(args.records ?? 1_000_000);
const ACCOUNTS = Number(args.accounts ?? 1_000);
const RUNS = Number(args.runs ?? 3);
const APPENDS = Number(args.appends ?? 2000);

const { openStore } = await import(path.join(ROOT, 'dist/daemon/store/index.js'));
const { sealRecord, GENESIS_HASH } = await import(path.join(ROOT, 'dist/daemon/store/audit-chain.js'));

/** Every record, sealed in chain order per account (ids interleaved across accounts, as time would write them). */
function* records() {
  const heads = new Map();
  const t0 = Date.UTC(2026, 0, 1);
  for (let i = 0; i < RECORDS; i++) {
    const accountId = (i % ACCOUNTS) + 1;
    const head = heads.get(accountId) ?? { seq: 0, hash: GENESIS_HASH };
    const entry = {
      accountId,
      actor: {
        type: i % 3 === 0 ? 'token' : 'console',
        id: i % 3 === 0 ? `ak${accountId.toString(16).padStart(20, '0')}` : 'a1b2c3d4e5f60718',
      },
      sourceIp: `198.51.${(i >> 8) & 255}.${i & 255}`,
      requestId: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
      action: i % 3 === 0 ? 'whitelist.added' : 'console.login',
      target: null,
      details: i % 3 === 0 ? { ips: [`203.0.113.${i & 255}`], requested: 1 } : { method: 'password' },
    };
    const { record, detailsJson } = sealRecord(head, i + 1, t0 + i * 1000, entry);
    heads.set(accountId, { seq: record.seq, hash: record.hash });
    yield { record, detailsJson, heads };
  }
}

/** `APPENDS` records through the store (one account per ten, as a busy fleet's), each timed. */
async function appendTimes(store) {
  const ids = [];
  for (let i = 0; i < Math.max(1, APPENDS / 10); i++) {
    const a = await store.accounts.create(`append${i}@example.com`, 'x', true);
    ids.push(a.id);
  }
  const ms = [];
  for (let i = 0; i < APPENDS; i++) {
    const t0 = performance.now();
    await store.audit.append({
      accountId: ids[i % ids.length],
      actor: { type: 'console', id: 'a1b2c3d4e5f60718' },
      sourceIp: '198.51.100.7',
      requestId: `r-${i}`,
      action: 'console.login',
      target: null,
      details: { method: 'password' },
    });
    ms.push(performance.now() - t0);
  }
  ms.sort((a, b) => a - b);
  const pct = (p) => +ms[Math.min(ms.length - 1, Math.floor((p / 100) * ms.length))].toFixed(3);
  return { appends: APPENDS, p50_ms: pct(50), p99_ms: pct(99) };
}

function verifyRuns(argsFor) {
  const out = [];
  for (let r = 0; r < RUNS; r++) {
    const t0 = performance.now();
    const p = spawnSync(process.execPath, [PROXYD, 'admin', 'audit', 'verify', ...argsFor], {
      encoding: 'utf8',
      maxBuffer: 1 << 20,
    });
    const ms = performance.now() - t0;
    const json = JSON.parse(p.stdout);
    if (p.status !== 0 || !json.ok || json.records !== RECORDS)
      throw new Error(`verify failed: ${p.status} ${p.stdout} ${p.stderr}`);
    out.push({ seconds: +(ms / 1000).toFixed(2), records_per_s: Math.round(RECORDS / (ms / 1000)) });
  }
  return out;
}

async function sqliteRun() {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'proxyd-bench-audit-'));
  const appendDir = mkdtempSync(path.join(tmpdir(), 'proxyd-bench-append-'));
  const appendStore = await openStore({ dataDir: appendDir });
  const append = await appendTimes(appendStore);
  await appendStore.close();
  rmSync(appendDir, { recursive: true, force: true });
  await (await openStore({ dataDir })).close();
  const { default: Database } = await import('better-sqlite3');
  // Statements and the database are pinned, as the store does (src/daemon/store/sqlite/statements.ts says why).
  const { pin, stmt } = await import(path.join(ROOT, 'dist/daemon/store/sqlite/statements.js'));
  const db = pin(new Database(path.join(dataDir, 'proxyd.db')));
  db.exec('PRAGMA journal_mode = WAL');
  const ins = stmt(
    db,
    'INSERT INTO audit_log (id, account_id, seq, time_ms, actor_type, actor_id, source_ip, request_id, action, target, details, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
  );
  const t0 = performance.now();
  let heads = null;
  const write = db.transaction((batch) => {
    for (const { record: r, detailsJson } of batch)
      ins.run(
        r.id,
        r.accountId,
        r.seq,
        r.timeMs,
        r.actor.type,
        r.actor.id,
        r.sourceIp,
        r.requestId,
        r.action,
        r.target,
        detailsJson,
        r.prevHash,
        r.hash,
      );
  });
  let batch = [];
  for (const x of records()) {
    batch.push(x);
    heads = x.heads;
    if (batch.length === 50_000) {
      write(batch);
      batch = [];
    }
  }
  write(batch);
  const putHead = stmt(
    db,
    'INSERT INTO audit_heads (account_id, seq, hash, anchor_seq, anchor_hash) VALUES (?, ?, ?, 0, ?)',
  );
  db.transaction(() => {
    for (const [id, h] of heads) putHead.run(id, h.seq, h.hash, GENESIS_HASH);
  })();
  db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  db.close();
  const writeS = (performance.now() - t0) / 1000;
  const runs = verifyRuns(['--data-dir', dataDir]);
  rmSync(dataDir, { recursive: true, force: true });
  return {
    backend: 'sqlite',
    append,
    records: RECORDS,
    accounts: ACCOUNTS,
    written_in_s: +writeS.toFixed(1),
    verify: runs,
  };
}

async function postgresRun(serverUrl) {
  const { connect } = await import(path.join(ROOT, 'dist/daemon/store/postgres/db.js'));
  const admin = connect(serverUrl, 1);
  const name = `proxyd_bench_audit_${Date.now()}`;
  await admin.unsafe(`CREATE DATABASE ${name}`);
  const u = new URL(serverUrl);
  u.pathname = `/${name}`;
  const url = u.toString();
  try {
    const appendStore = await openStore({ dataDir: tmpdir(), databaseUrl: url });
    const append = await appendTimes(appendStore);
    await appendStore.close();
    const sql = connect(url, 1);
    await sql.unsafe('TRUNCATE audit_log, audit_heads');
    const t0 = performance.now();
    let heads = null;
    let batch = [];
    const flush = async () => {
      const rows = batch.map(({ record: r, detailsJson }) => [
        r.id,
        r.accountId,
        r.seq,
        r.timeMs,
        r.actor.type,
        r.actor.id,
        r.sourceIp,
        r.requestId,
        r.action,
        r.target,
        detailsJson,
        r.prevHash,
        r.hash,
      ]);
      await sql`INSERT INTO audit_log (id, account_id, seq, time_ms, actor_type, actor_id, source_ip, request_id, action, target, details, prev_hash, hash)
        SELECT (x->>0)::bigint, (x->>1)::int, (x->>2)::bigint, (x->>3)::bigint, x->>4, x->>5, x->>6, x->>7, x->>8, x->>9, x->>10, x->>11, x->>12
          FROM jsonb_array_elements(${JSON.stringify(rows)}::text::jsonb) x`;
      batch = [];
    };
    for (const x of records()) {
      batch.push(x);
      heads = x.heads;
      if (batch.length === 20_000) await flush();
    }
    await flush();
    const hs = [...heads].map(([id, h]) => [id, h.seq, h.hash]);
    await sql`INSERT INTO audit_heads (account_id, seq, hash, anchor_seq, anchor_hash)
      SELECT (x->>0)::int, (x->>1)::bigint, x->>2, 0, ${GENESIS_HASH} FROM jsonb_array_elements(${JSON.stringify(hs)}::text::jsonb) x`;
    await sql`SELECT setval('audit_log_id_seq', ${RECORDS})`;
    await sql.unsafe('VACUUM ANALYZE audit_log');
    await sql.end();
    const writeS = (performance.now() - t0) / 1000;
    return {
      backend: 'postgres',
      append,
      records: RECORDS,
      accounts: ACCOUNTS,
      written_in_s: +writeS.toFixed(1),
      verify: verifyRuns(['--database-url', url]),
    };
  } finally {
    await admin.unsafe(`DROP DATABASE ${name} WITH (FORCE)`);
    await admin.end();
  }
}

const results = [await sqliteRun()];
if (args['database-url']) results.push(await postgresRun(args['database-url']));
console.log(JSON.stringify(results, null, 2));
