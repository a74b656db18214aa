#!/usr/bin/env node
// proxyctl start-up: wall time of `proxyctl --help` and `proxyctl whitelist list` against bare `node -e 0`.
// `whitelist list` talks to a stub API on 127.0.0.1 (one envelope of 20 entries), so the figure is the
// CLI's own cost plus one loopback round trip. Needs `npm run build` first.
// Usage: node bench/cli.mjs [--runs N] [--json]
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PROXYCTL = path.join(ROOT, 'bin/proxyctl');
const args = process.argv.slice(2);
const RUNS =
  Number(args[args.indexOf('--runs') + 1]) > 0 && args.includes('--runs')
    ? Number(args[args.indexOf('--runs') + 1])
    : 30;
const WARMUP = 3;
const TOKEN = `ak${'0'.repeat(20)}.${'B'.repeat(43)}`;

const items = Array.from({ length: 20 }, (_, i) => ({
  whitelist_id: 100 - i,
  ip: `8.8.0.${i + 1}`,
  remark: `site ${i}`,
  status: 1,
  created_at: '2026-11-21T10:00:00Z',
}));
const server = createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': 'bench', 'cache-control': 'no-store' });
  res.end(
    JSON.stringify({
      code: 200,
      message: 'success',
      requestId: 'bench',
      data: { items, page: 1, page_size: 20, total: 20 },
    }),
  );
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const base = `http://127.0.0.1:${server.address().port}`;

const env = {
  ...process.env,
  XDG_CONFIG_HOME: mkdtempSync(path.join(tmpdir(), 'proxyctl-bench-')),
  PROXYCTL_BASE_URL: base,
  PROXYCTL_API_KEY: TOKEN,
  NO_COLOR: '1',
};

function once(argv) {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const p = spawn(process.execPath, argv, { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    p.stderr.on('data', (d) => (err += d));
    p.on('exit', (code) => {
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      if (code !== 0) reject(new Error(`${argv.join(' ')} exited ${code}: ${err}`));
      else resolve(ms);
    });
  });
}

// Runs are interleaved (one of each command per round) so load from other processes hits every
// command alike; the minimum is the least noisy figure on a shared machine.
const commands = [
  ['node -e 0', ['-e', '0']],
  ['proxyctl --help', [PROXYCTL, '--help']],
  ['proxyctl whitelist list', [PROXYCTL, 'whitelist', 'list']],
  ['proxyctl whitelist list --json', [PROXYCTL, 'whitelist', 'list', '--json']],
];
for (let i = 0; i < WARMUP; i++) for (const [, argv] of commands) await once(argv);
const samples = commands.map(() => []);
for (let i = 0; i < RUNS; i++) for (let c = 0; c < commands.length; c++) samples[c].push(await once(commands[c][1]));
const rows = commands.map(([name], c) => {
  const xs = samples[c].sort((a, b) => a - b);
  const q = (p) => xs[Math.min(xs.length - 1, Math.floor(p * xs.length))];
  return { name, runs: RUNS, median_ms: +q(0.5).toFixed(1), p90_ms: +q(0.9).toFixed(1), min_ms: +xs[0].toFixed(1) };
});
server.close();

for (const r of rows) {
  r.over_node_ms = +(r.median_ms - rows[0].median_ms).toFixed(1);
  r.over_node_min_ms = +(r.min_ms - rows[0].min_ms).toFixed(1);
}
const help = rows[1];
const verdict = help.over_node_ms <= 60 ? 'PASS' : 'FAIL';

if (args.includes('--json')) {
  console.log(JSON.stringify({ node: process.version, rows, help_target_ms: 60, verdict }, null, 2));
} else {
  console.log(
    `node ${process.version}, ${RUNS} interleaved runs of each command after ${WARMUP} warm-up rounds, load average ${(
      await import('node:os')
    )
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')}\n`,
  );
  console.log('| command | median ms | p90 ms | min ms | over `node -e 0`: median / min |');
  console.log('|---|---:|---:|---:|---:|');
  for (const r of rows)
    console.log(
      `| \`${r.name}\` | ${r.median_ms} | ${r.p90_ms} | ${r.min_ms} | ${r.over_node_ms} / ${r.over_node_min_ms} |`,
    );
  console.log(
    `\n--help target: within 60 ms of bare Node (median) -> ${verdict} (+${help.over_node_ms} ms; min +${help.over_node_min_ms} ms)`,
  );
}
process.exitCode = verdict === 'PASS' ? 0 : 1;
