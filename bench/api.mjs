#!/usr/bin/env node
// API latency against a running daemon on loopback: list p50/p99 under a fixed open-loop rate (the account token),
// the same load on a full audit page and on a key refused for its scope (API keys: what key authentication costs
// next to the token), and the duration of a 100-item add. Starts its own `proxyd serve` with the production limits and spreads the
// load over enough accounts that no token passes its limit (60 lists / 10 adds per rolling minute).
// With --database-url (a PostgreSQL server the bench may create a database on), the same run is made on a
// fresh database there (created, then dropped) right after the SQLite run, and both are printed side by side.
//
// The daemon runs with the Node flags of bin/proxyd's shebang (`--max-semi-space-size=8 --no-allocation-site-pretenuring`), as it runs when
// started as `proxyd`.
//
//   node bench/api.mjs [--rate 500] [--seconds 10] [--workers 1] [--pin] [--baseline] [--client raw|undici] [--trace F] [--add-rounds 20] [--database-url postgres://… [--only sqlite|postgres]]
//                      [--node-flags "--trace-gc-nvp" [--gc-log F]]
// --node-flags: more Node/V8 flags for the daemon (space-separated). --gc-log F: every line the daemon prints
// on stdout other than its ready line (such as a GC trace) goes to F.sqlite / F.postgres, with marks where
// the list phase starts and ends.
import { spawn, spawnSync } from 'node:child_process';
import { createWriteStream, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import { openLoop } from './lib/open-loop.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PROXYD = path.join(ROOT, 'bin/proxyd');
const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const rate = Number(args.rate ?? 500);
// --add-rounds N: how many 100-item adds are timed (one fresh token each: 10 adds a minute per token); 200 gives a p99.
const addRounds = Number(args['add-rounds'] ?? 20);
const seconds = Number(args.seconds ?? 10);
const workers = Number(args.workers ?? 1);
// --pin: the daemon on core 0, this load generator on core 1 (taskset), so neither steals the other's CPU.
const pin = args.pin !== undefined;
// --baseline: the same open-loop load against GET /healthz (no token, no database) to show what the
// load generator and the HTTP stack cost on their own on this machine.
const baseline = args.baseline !== undefined;
// --client raw (default): the lean generator of bench/lib/open-loop.mjs; --client undici: undici's request()
// on 64 keep-alive connections, the earlier generator, whose own CPU share shows in the tail on two cores.
const client = args.client ?? 'raw';
if (!['raw', 'undici'].includes(client)) throw new Error('--client is raw or undici');
if (args.only !== undefined && !['sqlite', 'postgres'].includes(args.only))
  throw new Error('--only is sqlite or postgres');
if (args.only === 'postgres' && !args['database-url']) throw new Error('--only postgres needs --database-url');

function pct(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

// `#!/usr/bin/env -S node --max-semi-space-size=8 --no-allocation-site-pretenuring`: what follows `node` on bin/proxyd's first line.
const shebang = readFileSync(PROXYD, 'utf8').split('\n')[0].split(/\s+/);
const SHEBANG_FLAGS = shebang.includes('node') ? shebang.slice(shebang.indexOf('node') + 1) : [];

async function startDaemon(dataDir, logFile, databaseUrl, backend) {
  const nodeFlags = [...SHEBANG_FLAGS, ...(args['node-flags'] ? args['node-flags'].split(' ').filter(Boolean) : [])];
  const proc = spawn(
    pin ? 'taskset' : process.execPath,
    [
      ...(pin ? ['-c', '0', process.execPath] : []),
      ...(args.prof ? ['--cpu-prof', `--cpu-prof-dir=${args.prof}`] : []),
      ...nodeFlags,
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
      '--log-level',
      'info',
      ...(databaseUrl ? ['--database-url', databaseUrl] : []),
    ],
    // Logs at the production default (info, one line per request) into a file, like a log sink would
    // take them; read afterwards for the server-side handling times.
    { stdio: ['ignore', 'pipe', openSync(logFile, 'w')] },
  );
  const gcLog = args['gc-log'] ? createWriteStream(`${args['gc-log']}.${backend}`) : null;
  const rl = createInterface({ input: proc.stdout });
  // The ready line is the first JSON object on stdout (a GC trace line may run into it: V8 writes its prefix
  // apart); every other line goes to the GC log.
  let isReady = false;
  const ready = await new Promise((resolve, reject) => {
    rl.on('line', (l) => {
      const at = isReady ? -1 : l.indexOf('{"');
      if (at >= 0) {
        try {
          resolve(JSON.parse(l.slice(at)));
          isReady = true;
          return;
        } catch {
          /* not the ready line */
        }
      }
      gcLog?.write(`${l}\n`);
    });
    proc.once('exit', (code, signal) => reject(new Error(`proxyd exited before it was ready (${code ?? signal})`)));
  });
  return { proc, ready, gcLog };
}

if (pin) spawnSync('taskset', ['-cp', '1', String(process.pid)]);
const { openStore } = await import(path.join(ROOT, 'dist/daemon/store/index.js'));
const { hashPassword, mintApiKey, mintToken } = await import(path.join(ROOT, 'dist/daemon/secrets.js'));
const pwHash = await hashPassword('bench-password');

/** Client-side latency of an open-loop phase and the daemon's own handling time of its route (its log lines). */
function phaseStats(r, logFile, route) {
  const lat = [...r.fromDue].sort((a, b) => a - b);
  const serverMs = readFileSync(logFile, 'utf8')
    .split('\n')
    .filter((l) => l.includes(`"route":"${route}"`))
    .map((l) => JSON.parse(l))
    .filter((l) => l.time >= r.startedAt && l.time <= r.endedAt + 1000 && typeof l.ms === 'number')
    .map((l) => l.ms)
    .sort((a, b) => a - b);
  return {
    achieved_rps: Math.round(lat.length / (r.elapsedMs / 1000)),
    requests: lat.length,
    errors: r.errors,
    p50_ms: +pct(lat, 50).toFixed(3),
    p99_ms: +pct(lat, 99).toFixed(3),
    server_p50_ms: serverMs.length ? pct(serverMs, 50) : null,
    server_p99_ms: serverMs.length ? pct(serverMs, 99) : null,
  };
}

/** One full run (seed, adds, open-loop lists) against a daemon on SQLite, or on PostgreSQL at databaseUrl. */
async function runOne(databaseUrl) {
  const backend = databaseUrl ? 'postgres' : 'sqlite';
  const dataDir = mkdtempSync(path.join(tmpdir(), 'proxyd-bench-'));
  const logFile = path.join(dataDir, 'daemon.log');
  const { proc, ready, gcLog } = await startDaemon(dataDir, logFile, databaseUrl, backend);
  const base = ready.api;
  const dispatcher = new Agent({ connections: 64, pipelining: 1 });

  // Accounts through the store itself (one scrypt hash for all: the console password plays no part here).
  const store = await openStore({ dataDir, databaseUrl });
  async function newToken(i) {
    const a = await store.accounts.create(`bench${i}@example.com`, pwHash, true);
    const t = mintToken();
    await store.tokens.replace(a.id, t.accessKey, t.secretHash);
    // 20 entries each, so every list answers a full page.
    if (i < 10_000)
      for (let k = 0; k < 20; k++)
        await store.whitelist.claimIp(a.id, `34.${(i >> 8) & 255}.${i & 255}.${k + 1}`, `seed ${k}`);
    return `api_key=${encodeURIComponent(t.token)}`;
  }
  const listTokens = [];
  for (let i = 0; i < Math.ceil((rate * seconds + 500) / 55) + 1; i++) listTokens.push(await newToken(i));
  const addTokens = [];
  for (let i = 0; i < addRounds + 2; i++) addTokens.push(await newToken(10_000 + i));
  // API keys (audit:read) for the key phase, each used at most 110 times (120 reads per key per rolling minute),
  // on accounts of their own holding 20 audit records, so an audit page is as full as a list page.
  const keyHeaders = [];
  const keyAccounts = Math.ceil((rate * seconds + 500) / 110) + 1;
  for (let i = 0; i < keyAccounts; i++) {
    const a = await store.accounts.create(`bench-key${i}@example.com`, pwHash, true);
    for (let k = 0; k < 20; k++) {
      await store.audit.append({
        accountId: a.id,
        actor: { type: 'system', id: 'bench' },
        sourceIp: null,
        requestId: null,
        action: 'plan.changed',
        target: null,
        details: { k },
      });
    }
    const m = mintApiKey();
    const made = await store.apiKeys.create(
      {
        id: m.id,
        accountId: a.id,
        name: 'bench',
        scopes: ['audit:read'],
        secretHash: m.secretHash,
        expiresAt: null,
        allowedIps: [],
      },
      20,
    );
    if (typeof made === 'string') throw new Error(`key: ${made}`);
    keyHeaders.push(`Authorization: Bearer ${m.key}\r\n`);
  }
  await store.close();
  let keyCalls = 0;
  const kh = () => keyHeaders[Math.floor(keyCalls++ / 110)];
  let listCalls = 0;
  const q = () => listTokens[Math.floor(listCalls++ / 55)];

  // Seed 200 entries so list pages are real.
  const pub = (i) => `8.8.${(i >> 8) & 255}.${i & 255}`;
  for (let b = 0; b < 2; b++) {
    const items = Array.from({ length: 100 }, (_, i) => ({ ip: pub(b * 100 + i), remark: `seed ${i}` }));
    await request(`${base}/openapi/v1/proxy/whitelist/add?${addTokens[addRounds + b]}`, {
      method: 'POST',
      dispatcher,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ items }),
    }).then((r) => r.body.json());
  }

  // 100-item adds: fresh IPs each time, `addRounds` rounds.
  const addMs = [];
  for (let round = 0; round < addRounds; round++) {
    const items = Array.from({ length: 100 }, (_, i) => ({
      ip: `9.${9 + (round >> 8)}.${round & 255}.${i + 1}`,
      remark: 'bench',
    }));
    const t0 = performance.now();
    const res = await request(`${base}/openapi/v1/proxy/whitelist/add?${addTokens[round]}`, {
      method: 'POST',
      dispatcher,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ items }),
    });
    const body = await res.body.json();
    addMs.push(performance.now() - t0);
    if (body.code !== 200) throw new Error(`add failed: ${JSON.stringify(body).slice(0, 200)}`);
  }
  addMs.sort((a, b) => a - b);

  // Warm up, then an open-loop list load at `rate` requests/s for `seconds`.
  for (let i = 0; i < 500; i++)
    await request(`${base}/openapi/v1/proxy/whitelist/list?${q()}`, { dispatcher }).then((r) => r.body.json());
  // The daemon's own view of the list phase from its Prometheus metrics: GC time and event-loop delay
  // (prom-client resets the delay histogram at each scrape, so the second scrape covers the phase alone).
  const scrape = async () => {
    const text = await request(`${base}/metrics`, { dispatcher }).then((r) => r.body.text());
    const v = (re) =>
      text
        .split('\n')
        .filter((l) => re.test(l))
        .reduce((acc, l) => acc + Number(l.split(' ').pop()), 0);
    const byKind = Object.fromEntries(
      text
        .split('\n')
        .filter((l) => l.startsWith('proxyd_nodejs_gc_duration_seconds_sum'))
        .map((l) => [/kind="(\w+)"/.exec(l)[1], Number(l.split(' ').pop())]),
    );
    return {
      byKind,
      gcSeconds: v(/^proxyd_nodejs_gc_duration_seconds_sum/),
      gcCount: v(/^proxyd_nodejs_gc_duration_seconds_count/),
      lagP99: v(/^proxyd_nodejs_eventloop_lag_p99_seconds /),
      lagMax: v(/^proxyd_nodejs_eventloop_lag_max_seconds /),
    };
  };
  const before = await scrape();
  gcLog?.write('--- bench: list phase starts ---\n');
  const total = rate * seconds;
  const listPath = (_i) => (baseline ? '/healthz' : `/openapi/v1/proxy/whitelist/list?${q()}&page_size=20`);
  const expectPrefix = baseline ? '{"status":"ok"' : '{"code":200,';
  const windowStart = Date.now();
  let lat, latFromSend, errors, elapsedMs;
  if (client === 'raw') {
    // --trace F: [ms since start when due, latency] per list, written to F.<backend>.json.
    const trace = args.trace ? [] : undefined;
    const { hostname, port } = new URL(base);
    let startMonoMs;
    ({
      fromDue: lat,
      fromSend: latFromSend,
      errors,
      elapsedMs,
      startMonoMs,
    } = await openLoop({ host: hostname, port: Number(port), rate, total, pathFor: listPath, expectPrefix, trace }));
    if (trace) writeFileSync(`${args.trace}.${backend}.json`, JSON.stringify({ startMonoMs, trace }));
  } else {
    lat = [];
    latFromSend = [];
    errors = 0;
    const start = performance.now();
    const inflight = [];
    for (let i = 0; i < total; i++) {
      const due = start + (i * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 1) await new Promise((r) => setTimeout(r, wait));
      const t0 = performance.now();
      inflight.push(
        request(`${base}${listPath(i)}`, { dispatcher })
          .then(async (r) => {
            const b = await r.body.text();
            if (!b.startsWith(expectPrefix)) errors++;
            // Latency from when the request was due, so a stalled sender counts against us (no coordinated omission).
            const done = performance.now();
            lat.push(done - Math.min(t0, due));
            latFromSend.push(done - t0);
          })
          .catch(() => errors++),
      );
    }
    await Promise.all(inflight);
    elapsedMs = performance.now() - start;
  }
  const after = await scrape();
  gcLog?.write('--- bench: list phase ends ---\n');

  // The key phases, at the same rate on the same daemon right after: a full audit page (20 records) with a key
  // (its counterpart of the token's list page), then the key's authentication alone (a key without the scope: 403
  // after the lock-out check and the key's read, no limit spent, no handler).
  const keyPhase = async (pathFor, headersFor, expect, expectStatus = 200) => {
    for (let i = 0; i < 200; i++)
      await request(`${base}${pathFor(i)}`, {
        dispatcher,
        headers: { authorization: headersFor(i).slice('Authorization: '.length, -2) },
      }).then((r) => r.body.text());
    const { hostname, port } = new URL(base);
    const startedAt = Date.now();
    const r = await openLoop({
      host: hostname,
      port: Number(port),
      rate,
      total,
      pathFor,
      headersFor,
      expectPrefix: expect,
      expectStatus,
    });
    if (r.errors > 0 && r.fromDue.length === 0) throw new Error(`every request of ${pathFor(0)} failed`);
    return { ...r, startedAt, endedAt: Date.now() };
  };
  const keyAudit = baseline ? null : await keyPhase(() => '/openapi/v1/audit?page_size=20', kh, '{"code":200,');
  // A key of the last account without usage:read, for the 403 phase (403s spend none of its requests).
  const scopeRefused = keyHeaders[keyHeaders.length - 1];
  const keyAuthOnly = baseline
    ? null
    : await keyPhase(
        () => '/openapi/v1/usage/summary',
        () => scopeRefused,
        '{"code":10403,',
        403,
      );
  await new Promise((r) => setTimeout(r, 200));
  // The daemon's own per-request line carries its handling time: the server side of the latency.
  const serverMs = readFileSync(logFile, 'utf8')
    .split('\n')
    .filter(
      (l) => l.includes('"route":"/openapi/v1/proxy/whitelist/list"') || (baseline && l.includes('"route":"/healthz"')),
    )
    .map((l) => JSON.parse(l))
    .filter((l) => l.time >= windowStart && typeof l.ms === 'number')
    .map((l) => l.ms)
    .sort((a, b) => a - b);
  const elapsed = elapsedMs / 1000;
  lat.sort((a, b) => a - b);
  latFromSend.sort((a, b) => a - b);

  const result = {
    backend,
    node: process.version,
    workers,
    pinned: pin,
    client,
    path: baseline ? '/healthz' : '/openapi/v1/proxy/whitelist/list',
    list: {
      rate_target: rate,
      achieved_rps: Math.round(lat.length / elapsed),
      requests: lat.length,
      errors,
      p50_ms: +pct(lat, 50).toFixed(3),
      p99_ms: +pct(lat, 99).toFixed(3),
      max_ms: +lat[lat.length - 1].toFixed(3),
    },
    list_from_send: { p50_ms: +pct(latFromSend, 50).toFixed(3), p99_ms: +pct(latFromSend, 99).toFixed(3) },
    list_server_side: {
      requests: serverMs.length,
      p50_ms: serverMs.length ? pct(serverMs, 50) : null,
      p99_ms: serverMs.length ? pct(serverMs, 99) : null,
    },
    daemon_during_list: {
      gc_ms_by_kind: Object.fromEntries(
        Object.entries(after.byKind).map(([k, x]) => [k, +((x - (before.byKind[k] ?? 0)) * 1000).toFixed(1)]),
      ),
      gc_ms: +((after.gcSeconds - before.gcSeconds) * 1000).toFixed(1),
      gc_pauses: after.gcCount - before.gcCount,
      event_loop_delay_p99_ms: +(after.lagP99 * 1000).toFixed(2),
      event_loop_delay_max_ms: +(after.lagMax * 1000).toFixed(2),
    },
    ...(keyAudit ? { key_audit_page: phaseStats(keyAudit, logFile, '/openapi/v1/audit') } : {}),
    ...(keyAuthOnly ? { key_auth_only_403: phaseStats(keyAuthOnly, logFile, '/openapi/v1/usage/summary') } : {}),
    add100: {
      rounds: addMs.length,
      p50_ms: +pct(addMs, 50).toFixed(2),
      p99_ms: +pct(addMs, 99).toFixed(2),
      max_ms: +addMs[addMs.length - 1].toFixed(2),
    },
  };
  proc.kill('SIGTERM');
  await new Promise((r) => proc.on('exit', r));
  gcLog?.end();
  await dispatcher.close();
  rmSync(dataDir, { recursive: true, force: true });
  return result;
}

// --only postgres: skip the SQLite run (alternating PostgreSQL-only runs compare builds with less noise).
const results = args.only === 'postgres' ? [] : [await runOne(undefined)];
if (args['database-url'] && args.only !== 'sqlite') {
  // A database of the bench's own on that server, dropped afterwards: nothing of the operator's is touched.
  const { connect } = await import(path.join(ROOT, 'dist/daemon/store/postgres/db.js'));
  const admin = connect(args['database-url'], 1);
  const name = `proxyd_bench_${Date.now()}`;
  await admin.unsafe(`CREATE DATABASE ${name}`);
  const url = new URL(args['database-url']);
  url.pathname = `/${name}`;
  try {
    results.push(await runOne(url.toString()));
  } finally {
    await admin.unsafe(`DROP DATABASE ${name} WITH (FORCE)`);
    await admin.end();
  }
}
console.log(JSON.stringify(results.length === 1 ? results[0] : results, null, 2));
