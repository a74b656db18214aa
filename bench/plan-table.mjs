#!/usr/bin/env node
// What a large plan table costs the gateway (docs/benchmarks/plan-table.md, "Plan table"): two daemons side by side on
// SQLite, one with an empty plan table, one with 1,000 accounts on plans and 100,000 proxy users with their own
// limits (and a day of usage each, so the plan reads sum real rows). Tunnels alternate between the two, round
// after round; per daemon: set-up p50/p99 of a CONNECT with credentials (an unlimited user on both, and on the
// full one also a user under a traffic limit and a connection cap), tunnels/s, and the daemon's CPU while idle
// (the plan reads every 500 ms). Run after `npm run build`:
//   node bench/plan-table.mjs [--users 100000] [--rounds 5] [--n 1000]
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import net from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PROXYD = path.join(ROOT, 'bin/proxyd');
const argv = process.argv.slice(2);
const opt = (name, def) => (argv.includes(`--${name}`) ? Number(argv[argv.indexOf(`--${name}`) + 1]) : def);
const USERS = opt('users', 100_000);
const ACCOUNTS = Math.max(1, Math.round(USERS / 100));
const ROUNDS = opt('rounds', 5);
const N = opt('n', 1000);
const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;

const pct = (xs, p) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.max(0, Math.ceil((p / 100) * xs.length) - 1))];
const cpuSeconds = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / CLK_TCK;
};
const rssMiB = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;

const held = [];

function prepare(full) {
  const dataDir = mkdtempSync(path.join(tmpdir(), `proxyd-plan-bench-${full ? 'full' : 'empty'}-`));
  const admin = (args, input = '') => {
    const r = spawnSync(process.execPath, [PROXYD, 'admin', ...args, '--data-dir', dataDir], {
      input,
      encoding: 'utf8',
    });
    if (r.status !== 0) throw new Error(r.stderr);
    return JSON.parse(r.stdout);
  };
  admin(
    ['account', 'create', '--email', 'bench@example.com', '--password-stdin', '--verified'],
    'bench password 123\n',
  );
  const free = admin(['proxy-user', 'create', '--email', 'bench@example.com', '--username', 'free-user']);
  const users = { free: free.password };
  if (full) {
    admin(
      ['account', 'create', '--email', 'limited@example.com', '--password-stdin', '--verified'],
      'bench password 123\n',
    );
    users.limited = admin([
      'proxy-user',
      'create',
      '--email',
      'limited@example.com',
      '--username',
      'limited-user',
    ]).password;
    admin(['plan', 'set', '--email', 'limited@example.com', '--traffic-limit', '1TiB', '--max-connections', '100000']);
    admin([
      'proxy-user',
      'set',
      '--email',
      'limited@example.com',
      '--username',
      'limited-user',
      '--traffic-limit',
      '100GiB',
      '--max-connections',
      '50000',
    ]);
    // The bulk, straight into the tables (hashing 100,000 passwords through the CLI would take an hour).
    const db = new Database(path.join(dataDir, 'proxyd.db'));
    const hash = db.prepare("SELECT password_hash FROM proxy_users WHERE username = 'free-user'").get().password_hash;
    const now = Math.floor(Date.now() / 1000);
    const day = Math.floor(Date.now() / 86_400_000) * 86_400_000;
    db.transaction(() => {
      const acct = db.prepare(
        "INSERT INTO accounts (email, password_hash, status, verified, created_at, updated_at) VALUES (?, ?, 'active', 1, ?, ?)",
      );
      const plan = db.prepare(
        "INSERT INTO plans (account_id, traffic_limit, period, anchor_day, max_connections, expires_at_ms, updated_at) VALUES (?, ?, 'month', 1, 500, NULL, ?)",
      );
      const user = db.prepare(
        "INSERT INTO proxy_users (account_id, username, password_hash, status, created_at, updated_at) VALUES (?, ?, ?, 'active', ?, ?)",
      );
      const limit = db.prepare(
        'INSERT INTO user_limits (proxy_user_id, traffic_limit, max_connections) VALUES (?, ?, 20)',
      );
      const usage = db.prepare(
        "INSERT INTO usage_buckets (account_id, period, start_ms, subject, node, bytes_up, bytes_down, connections) VALUES (?, 'day', ?, ?, 'seed', ?, ?, 3)",
      );
      for (let a = 0; a < ACCOUNTS; a++) {
        const id = Number(acct.run(`bulk-${a}@example.com`, hash, now, now).lastInsertRowid);
        plan.run(id, 50 * 2 ** 30, now);
        for (let u = 0; u < USERS / ACCOUNTS; u++) {
          const name = `bulk-${a}-${u}`;
          const uid = Number(user.run(id, name, hash, now, now).lastInsertRowid);
          limit.run(uid, 2 ** 30);
          usage.run(id, day, `user:${name}`, 1000 + u, 100_000 + u);
        }
      }
    })();
    // Left open (idle, no lock held) until this process exits: closing it with its statements still to be
    // collected trips an assertion in better-sqlite3's statement destructor under Node 24.
    held.push(db);
  }
  return { dataDir, users };
}

function start({ dataDir, users }) {
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
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  return new Promise((resolve, reject) => {
    proc.once('exit', (code) => reject(new Error(`proxyd (${dataDir}) exited ${code} before it was ready`)));
    createInterface({ input: proc.stdout }).once('line', (l) => {
      const ready = JSON.parse(l);
      resolve({ proc, port: Number(ready.httpProxy.split(':')[1]), users });
    });
  });
}

function tunnel(port, target, user, password) {
  const auth = Buffer.from(`${user}:${password}`).toString('base64');
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const s = net.connect({ port, host: '127.0.0.1', noDelay: true });
    let head = '';
    s.setTimeout(10_000, () => (s.destroy(), reject(new Error('timeout'))));
    s.on('error', reject);
    s.on('connect', () =>
      s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`),
    );
    s.on('data', (b) => {
      head += b.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      s.destroy();
      if (!head.startsWith('HTTP/1.1 200')) return reject(new Error(head.split('\r\n')[0]));
      resolve(performance.now() - t0);
    });
  });
}

async function sample(d, target, user, n) {
  const xs = [];
  for (let i = 0; i < n; i++)
    xs.push(await tunnel(d.port, target, user, d.users[user === 'free-user' ? 'free' : 'limited']));
  return xs;
}

async function main() {
  const echo = net.createServer((s) => s.on('error', () => {}).pipe(s)).listen(0, '127.0.0.1');
  await new Promise((r) => echo.once('listening', r));
  const target = `127.0.0.1:${echo.address().port}`;
  console.log(
    `plan table: ${ACCOUNTS} accounts on plans, ${USERS} proxy users with limits; ${ROUNDS} rounds × ${N} tunnels per daemon and kind`,
  );
  const t0 = performance.now();
  const empty = await start(prepare(false));
  const full = await start(prepare(true));
  console.log(
    `seeded and started in ${((performance.now() - t0) / 1000).toFixed(1)} s; load average before ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );
  await new Promise((r) => setTimeout(r, 3000)); // both past their first plan reads
  // Idle cost: the plan reads every 500 ms, nothing else running.
  const idle0 = [cpuSeconds(empty.proc.pid), cpuSeconds(full.proc.pid)];
  await new Promise((r) => setTimeout(r, 10_000));
  const idle = [cpuSeconds(empty.proc.pid) - idle0[0], cpuSeconds(full.proc.pid) - idle0[1]].map((c) => (c / 10) * 100);
  for (const d of [empty, full]) await sample(d, target, 'free-user', 200); // warm-up
  await sample(full, target, 'limited-user', 200);
  const res = { empty: [], full: [], limited: [] };
  for (let r = 0; r < ROUNDS; r++) {
    res.empty.push(await sample(empty, target, 'free-user', N));
    res.full.push(await sample(full, target, 'free-user', N));
    res.limited.push(await sample(full, target, 'limited-user', N));
  }
  const line = (name, rounds) => {
    const p50 = rounds.map((xs) => pct(xs, 50));
    const p99 = rounds.map((xs) => pct(xs, 99));
    return `${name.padEnd(30)} p50 ${pct(p50, 50).toFixed(3)} ms (${Math.min(...p50).toFixed(3)}–${Math.max(...p50).toFixed(3)})   p99 ${pct(p99, 50).toFixed(3)} ms (${Math.min(...p99).toFixed(3)}–${Math.max(...p99).toFixed(3)})`;
  };
  console.log(line('empty table, unlimited user', res.empty));
  console.log(line('100k table, unlimited user', res.full));
  console.log(line('100k table, limited user', res.limited));
  console.log(
    `idle CPU (plan reads every 500 ms): empty ${idle[0].toFixed(1)} %, full ${idle[1].toFixed(1)} % of one core; RSS empty ${rssMiB(empty.proc.pid).toFixed(0)} MiB, full ${rssMiB(full.proc.pid).toFixed(0)} MiB`,
  );
  console.log(
    `load average after ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );
  empty.proc.kill('SIGTERM');
  full.proc.kill('SIGTERM');
  echo.close();
}

await main();
