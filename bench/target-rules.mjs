#!/usr/bin/env node
// What target rules cost at set-up (docs/benchmarks/target-rules.md, "Target rules"): two daemons side by side on SQLite, one
// without rules, one whose account has 10,000 (5,000 domain patterns and 5,000 CIDRs, none matching the target)
// under 1,000 service rules. Sequential CONNECT tunnels with credentials to a loopback echo alternate between
// the two, round after round; per daemon: set-up p50/p99 (connect -> 200), and what the rules cost in RSS.
// A CONNECT to a name is checked against the domain patterns, then its resolved address against the CIDRs;
// both kinds are measured (`127.0.0.1` and `localhost`, from /etc/hosts). Run after `npm run build`:
//   node bench/target-rules.mjs [--rules 10000] [--rounds 5] [--n 1000]
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
const RULES = opt('rules', 10_000);
const ROUNDS = opt('rounds', 5);
const N = opt('n', 1000);

const pct = (xs, p) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.max(0, Math.ceil((p / 100) * xs.length) - 1))];
const rssMiB = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;

const held = [];

function prepare(withRules) {
  const dataDir = mkdtempSync(path.join(tmpdir(), `proxyd-rules-bench-${withRules ? 'rules' : 'none'}-`));
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
  const password = admin(['proxy-user', 'create', '--email', 'bench@example.com', '--username', 'bench-user']).password;
  if (withRules) {
    // One small list through the command (it checks the syntax), the bulk straight into the table (a 10,000-item
    // list is longer than one command-line argument may be).
    admin(['policy', 'set', '--global', '--deny', 'evil.example,198.51.100.0/24']);
    const names = Array.from({ length: RULES / 2 }, (_, i) =>
      i % 2 ? `*.host${i}.example${i % 97}.com` : `host${i}.example${i % 97}.net`,
    );
    const nets = Array.from({ length: RULES / 2 }, (_, i) => `10.${(i >> 8) & 255}.${i & 255}.0/24`);
    const service = Array.from({ length: 1000 }, (_, i) => `blocked${i}.example.org`);
    const db = new Database(path.join(dataDir, 'proxyd.db'));
    const now = Math.floor(Date.now() / 1000);
    db.prepare('UPDATE target_rules SET deny = ?, updated_at = ? WHERE account_id = 0').run(
      [...service, 'evil.example', '198.51.100.0/24'].join(','),
      now,
    );
    db.prepare("INSERT INTO target_rules (account_id, deny, allow, updated_at) VALUES (1, ?, '', ?)").run(
      [...names, ...nets].join(','),
      now,
    );
    held.push(db);
  }
  return { dataDir, password };
}

function start({ dataDir, password }) {
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
      resolve({ proc, port: Number(ready.httpProxy.split(':')[1]), password });
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

async function sample(d, target, n) {
  const xs = [];
  for (let i = 0; i < n; i++) xs.push(await tunnel(d.port, target, 'bench-user', d.password));
  return xs;
}

async function main() {
  const echo = net.createServer((s) => s.on('error', () => {}).pipe(s)).listen(0, '127.0.0.1');
  await new Promise((r) => echo.once('listening', r));
  const port = echo.address().port;
  console.log(
    `target rules: ${RULES} account rules + 1,002 service rules against none; ${ROUNDS} rounds × ${N} tunnels per daemon and target`,
  );
  const none = await start(prepare(false));
  const rules = await start(prepare(true)).catch((e) => {
    none.proc.kill('SIGTERM');
    throw e;
  });
  // Whatever happens below, the daemons go (they hold this process's stderr).
  process.once('exit', () => [none, rules].forEach((d) => d.proc.kill('SIGTERM')));
  console.log(
    `load average before ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );
  await new Promise((r) => setTimeout(r, 2000));
  // The rules are in force: a target they deny is refused (the tunnel helper rejects with the status line).
  const refused = await tunnel(rules.port, 'www.blocked7.example.org:80', 'bench-user', rules.password).then(
    () => null,
    (e) => e.message,
  );
  if (!String(refused).startsWith('HTTP/1.1 403')) {
    console.error(`rules not in force: ${refused}`);
    process.exit(1);
  }
  for (const d of [none, rules]) await sample(d, `127.0.0.1:${port}`, 200); // warm-up
  const res = { none: { ip: [], name: [] }, rules: { ip: [], name: [] } };
  for (let r = 0; r < ROUNDS; r++) {
    for (const [k, d] of [
      ['none', none],
      ['rules', rules],
    ]) {
      res[k].ip.push(await sample(d, `127.0.0.1:${port}`, N));
      res[k].name.push(await sample(d, `localhost:${port}`, N));
    }
  }
  const line = (name, rounds) => {
    const p50 = rounds.map((xs) => pct(xs, 50));
    const p99 = rounds.map((xs) => pct(xs, 99));
    return `${name.padEnd(34)} p50 ${pct(p50, 50).toFixed(3)} ms (${Math.min(...p50).toFixed(3)}–${Math.max(...p50).toFixed(3)})   p99 ${pct(p99, 50).toFixed(3)} ms (${Math.min(...p99).toFixed(3)}–${Math.max(...p99).toFixed(3)})`;
  };
  console.log(line('no rules, CONNECT 127.0.0.1', res.none.ip));
  console.log(line(`${RULES} rules, CONNECT 127.0.0.1`, res.rules.ip));
  console.log(line('no rules, CONNECT localhost', res.none.name));
  console.log(line(`${RULES} rules, CONNECT localhost`, res.rules.name));
  console.log(
    `RSS: no rules ${rssMiB(none.proc.pid).toFixed(0)} MiB, with rules ${rssMiB(rules.proc.pid).toFixed(0)} MiB`,
  );
  console.log(
    `load average after ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );
  none.proc.kill('SIGTERM');
  rules.proc.kill('SIGTERM');
  echo.close();
}

await main();
