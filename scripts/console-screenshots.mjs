#!/usr/bin/env node
// Screenshots of every console page at phone and desktop width -> docs/console/<page>-<phone|desktop>.png.
// Needs `npm run build` first (it runs the built bin/proxyd on loopback with a temp data dir).
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
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
  const proc = spawn(process.execPath, [PROXYD, 'serve', '--data-dir', dataDir, '--api-listen', '127.0.0.1:0', '--http-proxy-listen', '127.0.0.1:0', '--socks-listen', '127.0.0.1:0'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const line = await new Promise((resolve, reject) => {
    createInterface({ input: proc.stdout }).once('line', resolve);
    proc.once('exit', (c) => reject(new Error(`proxyd exited ${c}`)));
  });
  return { api: JSON.parse(line).api, proc };
}

const dataDir = mkdtempSync(path.join(tmpdir(), 'proxyd-shots-'));
admin(dataDir, ['account', 'create', '--email', EMAIL, '--password-stdin', '--verified'], `${PASSWORD}\n`);
const daemon = await startDaemon(dataDir);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
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
  for (const [ip, remark] of [['8.8.4.4', 'Build server (Frankfurt)'], ['1.0.0.1', 'Office router'], ['9.9.9.9', 'Scraper fleet #2'], ['208.67.222.222', '']]) {
    await setup.fill('input[name=ip]', ip);
    await setup.fill('input[name=remark]', remark);
    await setup.click('button:has-text("Add")');
  }
  await setup.click('tr[data-ip="9.9.9.9"] button:has-text("Disable")');
  for (const u of ['crawler-eu', 'monitoring']) {
    await setup.goto(`${daemon.api}/console/proxy-users`);
    await setup.fill('input[name=username]', u);
    await setup.click('button:has-text("Create")');
  }
  await setup.close();

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
    await context.close();
  }
  console.log(`screenshots written to ${OUT}`);
} finally {
  await browser.close();
  daemon.proc.kill('SIGTERM');
  await new Promise((r) => daemon.proc.once('exit', r));
  rmSync(dataDir, { recursive: true, force: true });
}
