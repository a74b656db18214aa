#!/usr/bin/env node
// Screenshots of every console page at phone and desktop width -> docs/console/<page>-<phone|desktop>.png.
// Needs `npm run build` first (it runs the built bin/proxyd on loopback with a temp data dir). The Usage page's
// history (30 days of traffic to a few sites) is written into the data dir's store as the meter would; the
// Connections page's records come from real attempts through the gateway.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PROXYD = path.join(ROOT, 'bin/proxyd');
const OUT = path.resolve(process.argv[2] ?? path.join(ROOT, 'docs/console'));
const EMAIL = 'ops@northwind-trading.com';
const PASSWORD = 'correct horse battery staple';

const VIEWPORTS = {
  phone: { viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true },
  desktop: { viewport: { width: 1280, height: 860 }, deviceScaleFactor: 1 },
};

function admin(dataDir, args, input = '') {
  const r = spawnSync(process.execPath, [PROXYD, 'admin', ...args, '--data-dir', dataDir], { input, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`proxyd admin ${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

async function startDaemon(dataDir) {
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
    ],
    {
      stdio: ['ignore', 'pipe', 'ignore'],
    },
  );
  const line = await new Promise((resolve, reject) => {
    createInterface({ input: proc.stdout }).once('line', resolve);
    proc.once('exit', (c) => reject(new Error(`proxyd exited ${c}`)));
  });
  const ready = JSON.parse(line);
  return { api: ready.api, httpProxy: ready.httpProxy, proc };
}

const PROXY_PASSWORD = 'screenshot-proxy-pass-1';

/** 30 days of traffic of two proxy users to a few sites, as the meter writes it (the store of the data dir). */
async function usageHistory(dataDir) {
  const { openStore } = await import(pathToFileURL(path.join(ROOT, 'dist/daemon/store/index.js')).href);
  const store = await openStore({ dataDir });
  try {
    const account = await store.accounts.findByEmail(EMAIL);
    const sites = [
      ['shop.northwind.example', 9],
      ['api.partner.example', 5],
      ['cdn.images.example', 3],
      ['203.0.113.40', 1],
    ];
    const now = Date.now();
    let n = 0;
    for (let h = 24 * 30; h >= 0; h -= h > 48 ? 6 : 1) {
      const at = now - h * 3_600_000;
      // A working-day rhythm: more by day (UTC), more on weekdays.
      const hour = new Date(at).getUTCHours();
      const day = new Date(at).getUTCDay();
      const scale = (hour >= 7 && hour <= 19 ? 3 : 1) * (day === 0 || day === 6 ? 0.4 : 1) * (h > 48 ? 6 : 1);
      const deltas = [];
      for (const [user, share] of [
        ['crawler-eu', 0.8],
        ['monitoring', 0.2],
      ]) {
        for (const [site, weight] of sites) {
          const bytes = Math.round(scale * share * weight * 1_000_000 * (0.6 + ((h * 7 + weight) % 5) / 10));
          deltas.push({
            accountId: account.id,
            subject: `user:${user}`,
            target: site,
            bytesUp: Math.round(bytes / 12),
            bytesDown: bytes,
            connections: Math.max(1, Math.round(scale * weight)),
          });
        }
      }
      await store.usage.addFlush('shots', `shots-${n++}`, at, deltas);
    }
  } finally {
    await store.close();
  }
}

/** One CONNECT through the gateway (`host` the target); the answer's status line. */
function connectThrough(httpProxy, user, password, host, port) {
  const [h, p] = httpProxy.split(':');
  return new Promise((resolve) => {
    const s = net.connect(Number(p), h, () =>
      s.write(
        `CONNECT ${host}:${port} HTTP/1.1\r\nProxy-Authorization: Basic ${Buffer.from(`${user}:${password}`).toString('base64')}\r\n\r\n`,
      ),
    );
    let got = '';
    s.on('data', (b) => {
      got += b.toString('latin1');
      if (got.includes('\r\n\r\n')) {
        if (got.startsWith('HTTP/1.1 200')) s.write('GET / HTTP/1.0\r\n\r\n');
        else s.end();
      }
    });
    s.on('error', () => resolve(got.split('\r\n')[0]));
    s.on('close', () => resolve(got.split('\r\n')[0]));
  });
}

const dataDir = mkdtempSync(path.join(tmpdir(), 'proxyd-shots-'));
admin(dataDir, ['account', 'create', '--email', EMAIL, '--password-stdin', '--verified'], `${PASSWORD}\n`);
const daemon = await startDaemon(dataDir);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});
mkdirSync(OUT, { recursive: true });

try {
  // Populate through the console itself.
  const setup = await browser.newPage();
  await setup.goto(`${daemon.api}/console/login`);
  await setup.fill('input[name=email]', EMAIL);
  await setup.fill('input[name=password]', PASSWORD);
  await setup.click('button:has-text("Log in")');
  await setup.click('button:has-text("Create token")');
  await setup.click('button:has-text("Confirm")');
  await setup.goto(`${daemon.api}/console/whitelist`);
  for (const [ip, remark] of [
    ['8.8.4.4', 'Build server (Frankfurt)'],
    ['1.0.0.1', 'Office router'],
    ['9.9.9.9', 'Scraper fleet #2'],
    ['208.67.222.222', ''],
  ]) {
    await setup.fill('input[name=ip]', ip);
    await setup.fill('input[name=remark]', remark);
    await setup.click('button:has-text("Add")');
  }
  await setup.click('tr[data-ip="9.9.9.9"] button:has-text("Disable")');
  await setup.close();
  for (const u of ['crawler-eu', 'monitoring'])
    admin(
      dataDir,
      ['proxy-user', 'create', '--email', EMAIL, '--username', u, '--password-stdin'],
      `${PROXY_PASSWORD}\n`,
    );
  admin(dataDir, [
    'proxy-user',
    'set',
    '--email',
    EMAIL,
    '--username',
    'monitoring',
    '--traffic-limit',
    '50GiB',
    '--max-connections',
    '20',
    '--rate-limit',
    '10mbit',
  ]);
  admin(dataDir, [
    'plan',
    'set',
    '--email',
    EMAIL,
    '--traffic-limit',
    '500GiB',
    '--period',
    'month',
    '--max-connections',
    '200',
  ]);
  admin(dataDir, ['policy', 'set', '--global', '--deny', 'blocked.example']);
  await usageHistory(dataDir);
  // A target that answers and closes; attempts admitted and refused for the Connections page.
  const target = net.createServer((s) => {
    s.once('data', () => s.end('HTTP/1.0 200 OK\r\n\r\n' + 'x'.repeat(20_000)));
    s.on('error', () => {});
  });
  await new Promise((r) => target.listen(0, '127.0.0.1', r));
  const port = target.address().port;
  for (
    let i = 0;
    i < 50 &&
    !(await connectThrough(daemon.httpProxy, 'crawler-eu', PROXY_PASSWORD, '127.0.0.1', port)).includes(' 200 ');
    i++
  )
    await new Promise((r) => setTimeout(r, 100));
  await connectThrough(daemon.httpProxy, 'monitoring', PROXY_PASSWORD, '127.0.0.1', port);
  await connectThrough(daemon.httpProxy, 'crawler-eu', 'an old password', '127.0.0.1', port);
  await connectThrough(daemon.httpProxy, 'crawler-eu-country-usa', PROXY_PASSWORD, '127.0.0.1', port);
  await connectThrough(daemon.httpProxy, 'monitoring', PROXY_PASSWORD, 'blocked.example', 443);
  await connectThrough(daemon.httpProxy, 'crawler-eu', PROXY_PASSWORD, '127.0.0.1', port);
  target.close();
  // Records are written in batches a moment later.
  await new Promise((r) => setTimeout(r, 1_500));

  for (const [name, opts] of Object.entries(VIEWPORTS)) {
    const context = await browser.newContext(opts);
    const page = await context.newPage();
    const shot = (p) => page.screenshot({ path: path.join(OUT, `${p}-${name}.png`), fullPage: true });
    await page.goto(`${daemon.api}/console/login`);
    await shot('login');
    await page.fill('input[name=email]', EMAIL);
    await page.fill('input[name=password]', 'not my password');
    await page.click('button:has-text("Log in")');
    await shot('login-error');
    await page.fill('input[name=password]', PASSWORD);
    await page.click('button:has-text("Log in")');
    await page.waitForURL('**/console/account');
    await shot('account');
    await page.click('button:has-text("Reset token")');
    await shot('token-confirm');
    await page.click('button:has-text("Confirm")');
    await page.waitForSelector('[data-testid=api-token]');
    await shot('token-shown');
    await page.goto(`${daemon.api}/console/whitelist`);
    // One new IP per width, one private (10421) and one already listed (10425): a per-item failure table.
    await page.fill('input[name=ip]', `${name === 'phone' ? '1.1.1.1' : '1.0.0.2'} 10.0.0.8 8.8.4.4`);
    await page.fill('input[name=remark]', 'Home office');
    await page.click('button:has-text("Add")');
    await shot('whitelist');
    await page.goto(`${daemon.api}/console/proxy-users`);
    await page.click('tr[data-username="crawler-eu"] button:has-text("Reset password")');
    await page.waitForSelector('[data-testid=proxy-password]');
    await shot('proxy-users');
    await page.goto(`${daemon.api}/console/usage`);
    await shot('usage');
    await page.goto(`${daemon.api}/console/connections`);
    await shot('connections');
    await context.close();
  }
  console.log(`screenshots written to ${OUT}`);
} finally {
  await browser.close();
  daemon.proc.kill('SIGTERM');
  await new Promise((r) => daemon.proc.once('exit', r));
  rmSync(dataDir, { recursive: true, force: true });
}
