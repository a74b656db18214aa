#!/usr/bin/env node
// Egress pool benchmark: CONNECT set-up latency through the gateway with no pool, and with a pool of
// 1,024 addresses (127.0.4.0/22) holding 100,000 live sessions (connections use session usernames of
// live sessions, or rotate); plus the memory each live session costs. Needs `npm run build`.
//
//   node bench/egress.mjs [--runs 3] [--conns 2000] [--sessions 100000]
//   node bench/egress.mjs --cluster [--runs 3] [--conns 2000]
//
// Processes: this driver (client, sequential connections), a TCP target, and the gateway (startGateway
// over the real admission view and a temp SQLite store) in a child, one configuration at a time,
// alternating no pool / pool / rotation so that the machine's noise falls on each alike.
// --cluster: a spawned `proxyd serve --workers 2` instead, to show what asking the primary costs: every
// connection a new session (one IPC round trip each) against a few sessions reused (answered from the
// worker's cache) and against no pool.
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { runNode } from './run-node.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SELF = fileURLToPath(import.meta.url);
const args = process.argv.slice(2);
const arg = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const PASS = 'bench-proxy-password';

// ---------------------------------------------------------------- gateway role (child)

async function runGateway(mode, sessions) {
  const { openStore } = await import(path.join(ROOT, 'dist/daemon/store/index.js'));
  const { hashPassword } = await import(path.join(ROOT, 'dist/daemon/secrets.js'));
  const { ViewAdmission } = await import(path.join(ROOT, 'dist/daemon/admission/gateway-admission.js'));
  const { AdmissionView } = await import(path.join(ROOT, 'dist/daemon/admission/view.js'));
  const { StoreAdmissionFeed } = await import(path.join(ROOT, 'dist/daemon/admission/feed.js'));
  const { parseEgressPool } = await import(path.join(ROOT, 'dist/daemon/process/egress-pool.js'));
  const { SessionTable } = await import(path.join(ROOT, 'dist/gateway/dial/sticky-sessions.js'));
  const { startGateway } = await import(path.join(ROOT, 'dist/gateway/index.js'));
  const { parseProxyUsername } = await import(path.join(ROOT, 'dist/contract/proxy-username.js'));
  const store = await openStore({ dataDir: mkdtempSync(path.join(tmpdir(), 'egress-bench-')) });
  const account = await store.accounts.create('bench@example.com', await hashPassword('console-password'), true);
  await store.proxyUsers.create(account.id, 'bench', await hashPassword(PASS));
  const view = new AdmissionView(new StoreAdmissionFeed(store.changeLog), { staleAdmissionSec: 300 });
  await view.start();

  let memory = null;
  let egressPool;
  if (mode !== 'none') {
    const addresses = parseEgressPool('127.0.4.0/22');
    global.gc?.();
    const before = process.memoryUsage().heapUsed;
    const table = new SessionTable(addresses.length);
    for (let i = 0; i < sessions; i++) table.assign(`${account.id}:bench:s${i}`, 1440);
    global.gc?.();
    memory = {
      sessions: table.liveSessions,
      bytesPerSession: Math.round((process.memoryUsage().heapUsed - before) / sessions),
    };
    egressPool = { addresses, sessions: table };
  }
  const gw = await startGateway({
    httpProxyListen: { host: '127.0.0.1', port: 0 },
    socksListen: null,
    allowPrivateTargets: true,
    proxyProtocolFrom: [],
    ownListeners: () => [],
    admission: new ViewAdmission(view),
    egressPool,
    parseUsername: parseProxyUsername,
  });
  process.stdout.write(`${JSON.stringify({ port: gw.httpProxyAddress().port, memory })}\n`);
  process.on('message', () => {}); // kept alive until killed
}

// ---------------------------------------------------------------- driver

function startChild(mode, sessions) {
  const proc = spawn(process.execPath, ['--expose-gc', SELF, '--role', 'gateway', mode, String(sessions)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    createInterface({ input: proc.stdout }).once('line', (l) => resolve({ proc, ...JSON.parse(l) }));
    proc.once('exit', (c) => reject(new Error(`gateway exited ${c}`)));
  });
}

function connectOnce(proxyPort, targetPort, auth) {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const s = net.connect({ port: proxyPort, host: '127.0.0.1', noDelay: true }, () => {
      s.write(
        `CONNECT 127.0.0.1:${targetPort} HTTP/1.1\r\nHost: 127.0.0.1:${targetPort}\r\nProxy-Authorization: ${auth}\r\n\r\n`,
      );
    });
    s.once('data', (d) => {
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      s.destroy();
      if (!d.toString('latin1').startsWith('HTTP/1.1 200')) reject(new Error(d.toString('latin1').split('\r\n')[0]));
      else resolve(ms);
    });
    s.on('error', reject);
  });
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const basic = (u) => `Basic ${Buffer.from(`${u}:${PASS}`).toString('base64')}`;

async function driver() {
  const runs = arg('--runs', 3);
  const conns = arg('--conns', 2000);
  const sessions = arg('--sessions', 100_000);
  const target = net.createServer((s) => s.on('error', () => {}));
  await new Promise((r) => target.listen(0, '127.0.0.1', r));
  const targetPort = target.address().port;
  const modes = [
    ['none', () => basic('bench')],
    ['sessions', () => basic(`bench-session-s${Math.floor(Math.random() * sessions)}`)],
    ['rotation', () => basic('bench')],
  ];
  const results = Object.fromEntries(modes.map(([m]) => [m, { p50: [], p99: [] }]));
  let memory = null;
  for (let run = 0; run < runs; run++) {
    for (const [mode, auth] of modes) {
      const child = await startChild(mode, sessions);
      memory ??= child.memory;
      for (let i = 0; i < 200; i++) await connectOnce(child.port, targetPort, auth()); // warm-up (password cache, JIT)
      const ms = [];
      for (let i = 0; i < conns; i++) ms.push(await connectOnce(child.port, targetPort, auth()));
      child.proc.kill();
      results[mode].p50.push(median(ms));
      results[mode].p99.push(pct(ms, 99));
      process.stderr.write(
        `run ${run + 1} ${mode}: p50 ${median(ms).toFixed(3)} ms, p99 ${pct(ms, 99).toFixed(3)} ms\n`,
      );
    }
  }
  target.close();
  const summary = Object.fromEntries(
    Object.entries(results).map(([m, r]) => [
      m,
      { p50_ms: +median(r.p50).toFixed(3), p99_ms: +median(r.p99).toFixed(3) },
    ]),
  );
  const delta = +(summary.sessions.p50_ms - summary.none.p50_ms).toFixed(3);
  console.log(
    JSON.stringify(
      {
        runs,
        conns,
        pool: 1024,
        liveSessions: memory?.sessions,
        bytesPerSession: memory?.bytesPerSession,
        summary,
        sessionsMinusNoPoolP50Ms: delta,
        within005: delta <= 0.05,
      },
      null,
      2,
    ),
  );
}

// ---------------------------------------------------------------- --cluster

async function startDaemon(pool) {
  const PROXYD = path.join(ROOT, 'bin/proxyd');
  const dataDir = mkdtempSync(path.join(tmpdir(), 'egress-bench-d-'));
  const adm = (a, input) => runNode([PROXYD, 'admin', ...a, '--data-dir', dataDir], input);
  await adm(
    ['account', 'create', '--email', 'b@example.com', '--password-stdin', '--verified'],
    'console-password-1\n',
  );
  const pu = await adm(
    ['proxy-user', 'create', '--email', 'b@example.com', '--username', 'bench', '--password-stdin'],
    `${PASS}\n`,
  );
  if (pu.code !== 0) throw new Error(pu.err);
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
      '--workers',
      '2',
      '--log-level',
      'warn',
      ...(pool ? ['--egress-pool', '127.0.4.0/22'] : []),
    ],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  );
  const ready = await new Promise((resolve, reject) => {
    createInterface({ input: proc.stdout }).once('line', (l) => resolve(JSON.parse(l)));
    proc.once('exit', (c) => reject(new Error(`proxyd exited ${c}`)));
  });
  return { proc, port: Number(ready.httpProxy.split(':').pop()) };
}

async function clusterDriver() {
  const runs = arg('--runs', 3);
  const conns = arg('--conns', 2000);
  const target = net.createServer((s) => s.on('error', () => {}));
  await new Promise((r) => target.listen(0, '127.0.0.1', r));
  const targetPort = target.address().port;
  let fresh = 0;
  const modes = [
    ['none', false, () => basic('bench')],
    ['new session each', true, () => basic(`bench-session-n${fresh++}`)],
    ['8 sessions reused', true, () => basic(`bench-session-r${fresh++ % 8}`)],
  ];
  const results = Object.fromEntries(modes.map(([m]) => [m, []]));
  for (let run = 0; run < runs; run++) {
    for (const [mode, pool, auth] of modes) {
      const d = await startDaemon(pool);
      for (let i = 0; i < 200; i++) await connectOnce(d.port, targetPort, basic('bench'));
      const ms = [];
      for (let i = 0; i < conns; i++) ms.push(await connectOnce(d.port, targetPort, auth()));
      d.proc.kill();
      await new Promise((r) => d.proc.once('exit', r));
      results[mode].push(median(ms));
      process.stderr.write(`run ${run + 1} ${mode}: p50 ${median(ms).toFixed(3)} ms\n`);
    }
  }
  target.close();
  console.log(
    JSON.stringify(
      {
        workers: 2,
        runs,
        conns,
        p50_ms: Object.fromEntries(Object.entries(results).map(([m, r]) => [m, +median(r).toFixed(3)])),
      },
      null,
      2,
    ),
  );
}

if (args[0] === '--role') await runGateway(args[2], Number(args[3]));
else if (args.includes('--cluster')) await clusterDriver();
else await driver();
