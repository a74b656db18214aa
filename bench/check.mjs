// Benchmark of `proxyctl check` on loopback against a spawned proxyd (needs `npm run build`).
// Usage: node bench/check.mjs [--runs N]
// Prints per-path timings of a full check (all stages + direct comparison), in-process and as a CLI process.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { runNode } from './run-node.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PROXYD = path.join(ROOT, 'bin/proxyd');
const PROXYCTL = path.join(ROOT, 'bin/proxyctl');
const runsArg = process.argv.indexOf('--runs');
const RUNS = runsArg > 0 ? Number(process.argv[runsArg + 1]) : 200;
const PASS = 'bench-proxy-password';

function certs() {
  const dir = mkdtempSync(path.join(tmpdir(), 'check-bench-'));
  const o = (args) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  o(['req', '-x509', ...key, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=bench CA']);
  o(['req', ...key, '-keyout', 'leaf.key', '-out', 'leaf.csr', '-subj', '/CN=localhost']);
  writeFileSync(path.join(dir, 'ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  o([
    'x509',
    '-req',
    '-in',
    'leaf.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-days',
    '2',
    '-extfile',
    'ext',
    '-out',
    'leaf.pem',
  ]);
  const r = (f) => readFileSync(path.join(dir, f), 'utf8');
  return { ca: r('ca.pem'), caFile: path.join(dir, 'ca.pem'), key: r('leaf.key'), cert: r('leaf.pem') };
}

async function startDaemon() {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'check-bench-d-'));
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
      '--allow-private-targets',
      '--egress-address',
      '127.0.0.2',
    ],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  );
  const ready = await new Promise((resolve, reject) => {
    createInterface({ input: proc.stdout }).once('line', (l) => resolve(JSON.parse(l)));
    proc.once('exit', (c) => reject(new Error(`proxyd exited ${c}`)));
  });
  const adm = (args, input) => runNode([PROXYD, 'admin', ...args, '--data-dir', dataDir], input);
  await adm(
    ['account', 'create', '--email', 'b@example.com', '--password-stdin', '--verified'],
    'console-password-1\n',
  );
  const pu = await adm(
    ['proxy-user', 'create', '--email', 'b@example.com', '--username', 'bench', '--password-stdin'],
    `${PASS}\n`,
  );
  if (pu.code !== 0) throw new Error(pu.err);
  return { proc, ready };
}

const listen = (server) => new Promise((r) => server.listen(0, '127.0.0.1', () => r(server.address().port)));
const echo = (req, res) =>
  res
    .writeHead(200, { 'content-type': 'application/json' })
    .end(JSON.stringify({ ip: req.socket.remoteAddress.replace(/^::ffff:/, '') }));

function stats(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return { min: s[0], p50: q(0.5), p95: q(0.95), max: s[s.length - 1] };
}
const f = (n) => n.toFixed(1).padStart(6);

const c = certs();
const { proc, ready } = await startDaemon();
const httpsPort = await listen(createHttpsServer({ key: c.key, cert: c.cert, keepAlive: false }, echo));
const httpPort = await listen(createHttpServer(echo));
const { performCheck } = await import(path.join(ROOT, 'dist/cli/check/runner.js'));

const paths = [
  ['http proxy -> https target', `http://bench:${PASS}@${ready.httpProxy}`, `https://localhost:${httpsPort}/ip`],
  ['socks5h    -> https target', `socks5h://bench:${PASS}@${ready.socks5}`, `https://localhost:${httpsPort}/ip`],
  ['http proxy -> http target ', `http://bench:${PASS}@${ready.httpProxy}`, `http://127.0.0.1:${httpPort}/ip`],
];

console.log(
  `load average ${(await import('node:os'))
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')} on ${(await import('node:os')).availableParallelism()} cores`,
);
console.log(`proxyctl check on loopback, ${RUNS} runs per path, node ${process.version}, ${new Date().toISOString()}`);
console.log('in-process performCheck (all stages + direct request), ms:');
console.log('path                         cold    min    p50    p95    max   stage p50s');
for (const [label, proxy, target] of paths) {
  const opts = { proxy, target, timeoutMs: 5000, direct: true, ca: c.ca };
  const t0 = performance.now();
  const first = await performCheck(opts);
  const cold = performance.now() - t0;
  if (!first.ok || first.report.egress_ip !== '127.0.0.2') throw new Error(`${label}: ${first.report.diagnosis}`);
  const coldStages = first.report.stages.map((s) => `${s.name} ${s.ms}`).join(', ');
  const totals = [];
  const perStage = new Map();
  for (let i = 0; i < RUNS; i++) {
    const t = performance.now();
    const r = await performCheck(opts);
    totals.push(performance.now() - t);
    if (!r.ok) throw new Error(`${label}: ${r.report.diagnosis}`);
    for (const s of r.report.stages) perStage.set(s.name, [...(perStage.get(s.name) ?? []), s.ms]);
  }
  const st = stats(totals);
  const stageText = [...perStage].map(([n, xs]) => `${n} ${stats(xs).p50}`).join(', ');
  console.log(`${label} ${f(cold)} ${f(st.min)} ${f(st.p50)} ${f(st.p95)} ${f(st.max)}   ${stageText}`);
  console.log(`  cold run stages: ${coldStages}`);
}

// The whole command as a customer runs it: node start-up, CLI parse, check, output.
const cli = [];
for (let i = 0; i < 10; i++) {
  const t = performance.now();
  const r = await runNode([
    PROXYCTL,
    '--json',
    'check',
    '--proxy',
    paths[0][1],
    '--target',
    paths[0][2],
    '--ca',
    c.caFile,
  ]);
  cli.push(performance.now() - t);
  if (!r.out.includes('"egress_ip": "127.0.0.2"')) throw new Error(`cli: ${r.out}${r.err}`);
}
const cs = stats(cli);
console.log(
  `\`proxyctl --json check\` process wall time (http -> https, 10 runs), ms: min ${cs.min.toFixed(0)}, p50 ${cs.p50.toFixed(0)}, max ${cs.max.toFixed(0)}`,
);

proc.kill('SIGTERM');
process.exit(0);
