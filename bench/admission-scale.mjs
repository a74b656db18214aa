#!/usr/bin/env node
// The admission view at provider scale (docs/benchmarks/admission-scale.md, "Admission view at scale"): N proxy users with
// distinct password hashes in a SQLite data dir, then the daemon as shipped (`bin/proxyd serve`). Run after
// `npm run build`.
//
//   node bench/admission-scale.mjs [--users 1000000] [--rate 200] [--reloads 3] [--window-ms 1000]
//                                  [--data-dir DIR] [--root CHECKOUT]
//
// Reports: the load time (spawn → ready line: the view is loaded before the ready line), the daemon's memory
// growth per user (VmRSS after start with N users minus with none, after a settle, per user; and the JS heap
// after the last major GC, from --trace-gc, against the empty daemon's), and what a full reload (SIGHUP) does to
// the set-up time of steady traffic: a client opening one CONNECT tunnel with credentials every 1/rate s (open
// loop: latency from when it was due), p99 over 1 s windows. After a quiet spell, one reload at a time: SIGHUP,
// then wait until /metrics (scraped every 250 ms throughout) counts it, then a quiet spell; a window with any
// part of a reload in it (or the one after) is a reload window, the rest (but the first) quiet. Prints JSON on stdout, a summary on stderr.
// --data-dir keeps the N users' data dir there and reuses it; --root runs the daemon of another checkout (built),
// for A/B runs against the commit before. Temp dirs and processes are removed at exit.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { pct, runInfo, sleep } from './lib/tunnel-bench.mjs';

// The project's statement cache, databases pinned: a better-sqlite3 statement collected as garbage can abort
// Node 24 (src/daemon/store/sqlite/statements.ts).
const { pin, stmt } = await import(
  path.join(path.dirname(fileURLToPath(import.meta.url)), '../dist/daemon/store/sqlite/statements.js')
);

const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1] : def);
// --root DIR: the daemon of another checkout (built), e.g. a worktree of the commit before, for A/B runs.
const ROOT = path.resolve(opt('root', path.join(path.dirname(fileURLToPath(import.meta.url)), '..')));
const PROXYD = path.join(ROOT, 'bin/proxyd');
// --data-dir DIR: keep the data dir of N users there and reuse it on the next run (writing 1,000,000 takes ~25 s).
const KEEP_DIR = opt('data-dir', null);
const USERS = Number(opt('users', 1_000_000));
const RATE = Number(opt('rate', 200));
const RELOADS = Number(opt('reloads', 3));
const WINDOW_MS = Number(opt('window-ms', 1000));
const PASSWORD = 'bench admission password 1';
const log = (...a) => console.error('[admission]', ...a);

const dirs = [];
const procs = [];
const cleanUp = () => {
  for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
};
process.on('exit', cleanUp);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(130));

function admin(dataDir, args, input = '') {
  const r = spawnSync(process.execPath, [PROXYD, 'admin', ...args, '--data-dir', dataDir], { input, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`proxyd admin ${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

/** A data dir with one real user (`bench`, who logs in) and `n` more with distinct hashes of the real shape. */
function dataDirWith(n, keep = null) {
  if (keep && existsSync(path.join(keep, 'proxyd.db'))) {
    log(`reusing ${keep}`);
    return keep;
  }
  const dir = keep ?? mkdtempSync(path.join(os.tmpdir(), 'proxyd-admission-'));
  if (keep) mkdirSync(keep, { recursive: true });
  else dirs.push(dir);
  admin(
    dir,
    ['account', 'create', '--email', 'bench@example.com', '--password-stdin', '--verified'],
    'bench console password 1\n',
  );
  admin(
    dir,
    ['proxy-user', 'create', '--email', 'bench@example.com', '--username', 'bench', '--password-stdin'],
    `${PASSWORD}\n`,
  );
  const db = pin(new Database(path.join(dir, 'proxyd.db')));
  const account = stmt(db, 'SELECT id FROM accounts LIMIT 1').get().id;
  const ins = stmt(
    db,
    "INSERT INTO proxy_users (account_id, username, password_hash, status, created_at, updated_at) VALUES (?, ?, ?, 'active', 0, 0)",
  );
  const t0 = Date.now();
  const CHUNK = 50_000;
  for (let i = 0; i < n; i += CHUNK) {
    db.transaction(() => {
      for (let j = i; j < Math.min(n, i + CHUNK); j++) {
        const hash = `scrypt$16384$8$1$${randomBytes(16).toString('base64url')}$${randomBytes(32).toString('base64url')}`;
        ins.run(account, `user${j.toString(36)}x${randomBytes(3).toString('hex')}`, hash);
      }
    })();
  }
  log(`${n} users written in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  return dir;
}

async function start(dataDir) {
  const t0 = performance.now();
  // --trace-gc: the heap after each major collection (stdout, before and after the ready line).
  const p = spawn(
    process.execPath,
    [
      '--max-semi-space-size=8',
      '--trace-gc',
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
      '--allow-private-targets',
      '--log-level',
      'warn',
      '--connection-log-sink',
      'off',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  procs.push(p);
  const tail = [];
  const gcLines = [];
  // --trace-gc prints the collections of every isolate, each line tagged [pid:isolate]. The main thread's print
  // first (nothing else runs before the ready line); a reload worker's isolate (a thread of its own, which
  // stalls no connection) prints its own, left out here.
  let isolate = null;
  createInterface({ input: p.stderr }).on('line', (l) => tail.push(l));
  const ready = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ready line in 120 s\n${tail.join('\n')}`)), 120_000);
    p.once('exit', (c) => reject(new Error(`proxyd exited ${c}\n${tail.join('\n')}`)));
    createInterface({ input: p.stdout }).on('line', (l) => {
      if (l.startsWith('{"event":"ready"')) {
        clearTimeout(timer);
        resolve(JSON.parse(l));
      } else {
        const tag = /^\[\d+:0x[0-9a-f]+\]/.exec(l)?.[0] ?? null;
        isolate ??= tag;
        if (tag === isolate && !l.includes('Scavenge')) gcLines.push(l);
      }
    });
  });
  return { p, ready, loadMs: performance.now() - t0, gcLines, t0 };
}

const rssOf = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) * 1024;

/** RSS after the heap settled (a few GCs' worth of idle time). */
async function settledRss(pid) {
  const xs = [];
  for (let i = 0; i < 5; i++) {
    await sleep(1000);
    xs.push(rssOf(pid));
  }
  return Math.min(...xs);
}

/** A target that accepts and says one byte. */
async function target() {
  const s = net.createServer((c) => {
    c.on('error', () => {});
    c.end('x');
  });
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  return s;
}

/** One CONNECT with credentials to the target: ms from `due` to the first byte after the 200. */
function tunnel(proxy, tport, due) {
  return new Promise((resolve) => {
    const s = net.connect(proxy.port, proxy.host);
    let buf = '';
    const done = (v) => {
      s.destroy();
      resolve(v);
    };
    s.setTimeout(10_000, () => done('timeout'));
    s.on('error', (e) => done(e.code ?? 'error'));
    s.on('connect', () =>
      s.write(
        `CONNECT 127.0.0.1:${tport} HTTP/1.1\r\nProxy-Authorization: Basic ${Buffer.from(`bench:${PASSWORD}`).toString('base64')}\r\n\r\n`,
      ),
    );
    s.on('data', (d) => {
      buf += d.toString('latin1');
      const end = buf.indexOf('\r\n\r\n');
      if (end >= 0 && buf.length > end + 4)
        done(buf.startsWith('HTTP/1.1 200') ? performance.now() - due : buf.slice(0, 12));
    });
  });
}

async function main() {
  const loadBefore = os.loadavg();
  const empty = await start(dataDirWith(0));
  const emptyRss = await settledRss(empty.p.pid);
  const lastHeap = (lines) => {
    const gc = lines.filter((l) => l.includes('Mark-Compact'));
    return gc.length ? Number(/-> ([\d.]+) \(/.exec(gc[gc.length - 1])?.[1]) : null;
  };
  empty.heapMib = lastHeap(empty.gcLines);
  empty.p.kill('SIGKILL');
  const dir = dataDirWith(USERS, KEEP_DIR);
  const d = await start(dir);
  const rss = await settledRss(d.p.pid);
  // Collections from here on happen under the traffic (ms since the daemon's start, as --trace-gc counts).
  d.trafficFromMs = performance.now() - d.t0;
  const bytesPerUser = (rss - emptyRss) / USERS;
  log(
    `load (spawn → ready) ${(d.loadMs / 1000).toFixed(2)} s; RSS ${(rss / 2 ** 20).toFixed(0)} MiB vs ${(emptyRss / 2 ** 20).toFixed(0)} MiB empty: ${bytesPerUser.toFixed(0)} B per user`,
  );

  const t = await target();
  const [host, port] = d.ready.httpProxy.split(':');
  const proxy = { host, port: Number(port) };
  const metric = async (name) =>
    Number(new RegExp(`^${name} (\\d+)`, 'm').exec(await (await fetch(`${d.ready.api}/metrics`)).text())?.[1] ?? NaN);
  // Steady traffic (open loop) from a quiet spell on; then a reload (SIGHUP) at a time, each after the one before
  // has finished (its count in /metrics moved) and a quiet spell.
  const samples = [];
  const reloads = []; // { from, to } ms since t0: SIGHUP → counted
  const periodMs = 1000 / RATE;
  const quietMs = 4_000;
  // One tunnel first, so the password is verified (and cached) before the steady traffic: concurrent first
  // logins of one user each wait for scrypt under the failure budget, which is not what this measures.
  await tunnel(proxy, t.address().port, performance.now());
  // Likewise one scrape of /metrics: the daemon's first takes tens of milliseconds (48 ms against 2–7 ms after,
  // seen from here), and it used to come right after the first SIGHUP, in that reload's first window.
  await metric('proxyd_admission_reloads_total');
  const between = 3_000;
  const t0 = performance.now();
  const pending = [];
  let stop = false;
  // /metrics scraped every 250 ms for the whole traffic, quiet spells too: a scrape takes 2–7 ms to answer (a
  // 100,000-user daemon, seen from here), and scraping every 50 ms only while a reload ran (to see it counted)
  // charged that to the reload windows alone.
  let counted = 0;
  const scraping = (async () => {
    while (!stop) {
      counted = await metric('proxyd_admission_reloads_total');
      await sleep(250);
    }
  })();
  const traffic = (async () => {
    for (let i = 0; !stop; i++) {
      const due = t0 + i * periodMs;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      pending.push(tunnel(proxy, t.address().port, due).then((ms) => samples.push({ at: due - t0, ms })));
    }
  })();
  await sleep(quietMs);
  for (let k = 0; k < RELOADS; k++) {
    const from = performance.now() - t0;
    d.p.kill('SIGHUP');
    while (counted < k + 1) await sleep(10);
    reloads.push({ from, to: performance.now() - t0 });
    await sleep(between);
  }
  stop = true;
  await traffic;
  await scraping;
  await Promise.all(pending);
  t.close();
  // A sample is ms, or why it failed: 'timeout' (10 s), a socket error code, or the answer's status line.
  const failures = {};
  for (const s of samples) if (typeof s.ms !== 'number') failures[s.ms] = (failures[s.ms] ?? 0) + 1;
  for (const s of samples) if (typeof s.ms !== 'number') s.ms = null;
  const failed = samples.filter((s) => s.ms === null).length;
  const windows = new Map();
  for (const s of samples)
    if (s.ms !== null)
      (
        windows.get(Math.floor(s.at / WINDOW_MS)) ??
        windows.set(Math.floor(s.at / WINDOW_MS), []).get(Math.floor(s.at / WINDOW_MS))
      ).push(s.ms);
  // A window with any part of a reload in it (SIGHUP to counted), or the one after.
  const withReload = new Set(
    reloads.flatMap(({ from, to }) => {
      const ws = [];
      for (let w = Math.floor(from / WINDOW_MS); w <= Math.floor(to / WINDOW_MS) + 1; w++) ws.push(w);
      return ws;
    }),
  );
  const p99s = (pred) => [...windows].filter(([w]) => w > 0 && pred(w)).map(([, xs]) => pct(xs, 99));
  const quiet = p99s((w) => !withReload.has(w));
  const loaded = p99s((w) => withReload.has(w));
  const gc = d.gcLines.filter((l) => l.includes('Mark-Compact'));
  const heapAfterMajor = gc.length ? Number(/-> ([\d.]+) \(/.exec(gc[gc.length - 1])?.[1]) : null;
  const out = {
    users: USERS,
    load_s: +(d.loadMs / 1000).toFixed(2),
    rss_mib: +(rss / 2 ** 20).toFixed(1),
    empty_rss_mib: +(emptyRss / 2 ** 20).toFixed(1),
    bytes_per_user: Math.round(bytesPerUser),
    heap_mib: heapAfterMajor,
    empty_heap_mib: empty.heapMib,
    heap_bytes_per_user:
      heapAfterMajor !== null && empty.heapMib !== null
        ? Math.round(((heapAfterMajor - empty.heapMib) * 2 ** 20) / USERS)
        : null,
    major_gcs_in_traffic: gc.filter((l) => Number(/(\d+) ms: Mark-Compact/.exec(l)?.[1]) > d.trafficFromMs).length,
    rate: RATE,
    reloads: RELOADS,
    reload_s: reloads.map(({ from, to }) => +((to - from) / 1000).toFixed(2)),
    failed,
    failures,
    samples: samples.length,
    p99_quiet_ms: { median: +pct(quiet, 50).toFixed(2), max: +Math.max(...quiet).toFixed(2), windows: quiet.length },
    p99_reload_windows_ms: {
      median: +pct(loaded, 50).toFixed(2),
      max: +Math.max(...loaded).toFixed(2),
      windows: loaded.length,
    },
    // Each window's p99 (ms), `r` marking the reload windows.
    windows: [...windows]
      .filter(([w]) => w > 0)
      .sort((a, b) => a[0] - b[0])
      .map(([w, xs]) => `${w}${withReload.has(w) ? 'r' : ''}:${pct(xs, 99).toFixed(1)}`)
      .join(' '),
    p99_moved_ms: +(Math.max(...loaded) - pct(quiet, 50)).toFixed(2),
    ...runInfo(argv, loadBefore, os.loadavg()),
  };
  d.p.kill('SIGTERM');
  console.log(JSON.stringify(out));
  setTimeout(() => process.exit(0), 100); // the daemon's pipes must not keep the bench alive
  log(
    `heap after the last major GC ${out.heap_mib} MiB vs ${out.empty_heap_mib} empty (${out.heap_bytes_per_user} B per user); reloads took ${out.reload_s.join(', ')} s; ${out.major_gcs_in_traffic} major GCs under traffic`,
  );
  log(
    `p99 per ${WINDOW_MS} ms window: quiet median ${out.p99_quiet_ms.median} ms (max ${out.p99_quiet_ms.max}), with a reload median ${out.p99_reload_windows_ms.median} ms (max ${out.p99_reload_windows_ms.max}); moved by at most ${out.p99_moved_ms} ms; ${failed} failed`,
  );
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
