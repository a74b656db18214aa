// The whole console flow in Debian's chromium (playwright-core) against the built daemon (`npm run build` first).
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, startDaemon, type Daemon } from '../helpers/daemon.js';
import { BACKENDS } from '../helpers/postgres.js';
import { launchChromium } from '../helpers/browser.js';
import { patient } from '../helpers/patience.js';

const execFileP = promisify(execFile);
const EMAIL = 'flow@example.com';
const PASSWORD = 'correct horse battery';

let daemon: Daemon;
let browser: Browser;
let target: Server;
let targetUrl: string;

async function listStatus(token: string): Promise<number> {
  const r = await fetch(`${daemon.api}/openapi/v1/proxy/whitelist/list?api_key=${encodeURIComponent(token)}`);
  await r.arrayBuffer();
  return r.status;
}

async function curlThroughGateway(user: string, password: string): Promise<{ code: number; body: string }> {
  const { stdout } = await execFileP('curl', [
    '-sS',
    '--max-time',
    '10',
    '-x',
    `http://${daemon.httpProxy}`,
    '--proxy-user',
    `${user}:${password}`,
    '-w',
    '\n%{http_code}',
    targetUrl,
  ]);
  const i = stdout.lastIndexOf('\n');
  return { body: stdout.slice(0, i), code: Number(stdout.slice(i + 1)) };
}

async function createOrResetToken(page: Page, button: 'Create token' | 'Reset token') {
  await page.getByRole('button', { name: button }).click();
  await expect(page.getByRole('button', { name: 'Confirm' })).toBeTruthy();
  const [response] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/console/account') && r.request().method() === 'GET'),
    page.getByRole('button', { name: 'Confirm' }).click(),
  ]);
  await page.waitForSelector('[data-testid=api-token]');
  const token = (await page.textContent('[data-testid=api-token]'))!.trim();
  return { token, headers: response.headers() };
}

describe.each(BACKENDS)('console on %s', (backend) => {
  beforeAll(async () => {
    target = createServer((_req, res) => res.end('hello from the target'));
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
    targetUrl = `http://127.0.0.1:${(target.address() as AddressInfo).port}/`;
    daemon = await startDaemon({ backend, args: ['--allow-private-targets'] });
    const created = await admin(
      daemon.dataDir,
      ['account', 'create', '--email', EMAIL, '--password-stdin', '--verified'],
      `${PASSWORD}\n`,
    );
    expect(created.code, created.stderr).toBe(0);
    browser = await launchChromium();
  }, patient(60_000));

  afterAll(async () => {
    await browser?.close();
    await daemon?.stop();
    await new Promise((r) => target?.close(r));
  });

  describe('web console in a browser', () => {
    it('walks log-in, token, whitelist, proxy users and log-out', async () => {
      const context = await browser.newContext();
      const page = await context.newPage();
      const errors: string[] = [];
      // Script errors and CSP violations (HTTP error statuses of pages are expected: 401 on a wrong password).
      page.on('pageerror', (e) => errors.push(e.message));
      page.on(
        'console',
        (m) => m.type() === 'error' && !m.text().startsWith('Failed to load resource') && errors.push(m.text()),
      );
      page.on('response', (r) => r.status() === 404 && errors.push(`404 ${new URL(r.url()).pathname}`));

      // Wrong password, then log in.
      await page.goto(`${daemon.api}/console/`);
      expect(new URL(page.url()).pathname).toBe('/console/login');
      await page.getByLabel('Email').fill(EMAIL);
      await page.getByLabel('Password').fill('not the password');
      await page.getByRole('button', { name: 'Log in' }).click();
      expect(await page.textContent('[data-testid=login-message]')).toContain('Wrong email or password');
      await page.getByLabel('Password').fill(PASSWORD);
      await page.getByRole('button', { name: 'Log in' }).click();
      await page.waitForURL('**/console/account');
      expect(await page.textContent('[data-testid=account-email]')).toBe(EMAIL);
      expect(await page.textContent('[data-testid=no-token]')).toContain('no API token');

      // Create token -> confirmation -> shown once, with the two headers.
      const first = await createOrResetToken(page, 'Create token');
      expect(first.token).toMatch(/^ak[0-9a-f]+\.[A-Za-z0-9_-]{40,}$/);
      expect(first.headers['cache-control']).toBe('no-store');
      expect(first.headers['referrer-policy']).toBe('no-referrer');
      expect(await page.isVisible('button:has-text("Copy")')).toBe(true);
      expect(await listStatus(first.token)).toBe(200);

      // Reload: only the access key.
      await page.reload();
      expect(await page.locator('[data-testid=api-token]').count()).toBe(0);
      expect(await page.textContent('[data-testid=access-key]')).toBe(first.token.split('.')[0]);
      expect(await page.content()).not.toContain(first.token.split('.')[1]);

      // Reset: the old token dies at once, the new one works.
      const second = await createOrResetToken(page, 'Reset token');
      expect(second.token).not.toBe(first.token);
      expect(second.headers['cache-control']).toBe('no-store');
      expect(second.headers['referrer-policy']).toBe('no-referrer');
      expect(await listStatus(first.token)).toBe(401);
      expect(await listStatus(second.token)).toBe(200);
      await page.goto(`${daemon.api}/console/account`);
      expect(await page.locator('[data-testid=api-token]').count()).toBe(0);
      expect(await page.textContent('[data-testid=access-key]')).toBe(second.token.split('.')[0]);

      // Whitelist: add an IP, see it (also through the API), a per-item failure with its code, disable/enable, delete.
      await page.getByRole('link', { name: 'Whitelist' }).click();
      await page.getByLabel('IPv4 address').fill('8.8.8.8');
      await page.getByLabel('Remark (optional)').fill('build server');
      await page.getByRole('button', { name: 'Add', exact: true }).click();
      const row = page.locator('tr[data-ip="8.8.8.8"]');
      await expect(row.count()).resolves.toBe(1);
      expect(await row.locator('[data-testid=whitelist-status]').textContent()).toBe('Active');
      const api = (await (
        await fetch(`${daemon.api}/openapi/v1/proxy/whitelist/list?api_key=${encodeURIComponent(second.token)}`)
      ).json()) as { data: { items: Array<{ ip: string }> } };
      expect(api.data.items.map((i: { ip: string }) => i.ip)).toEqual(['8.8.8.8']);

      await page.getByLabel('IPv4 address').fill('10.1.2.3, 8.8.8.8 1.1.1.1');
      await page.getByRole('button', { name: 'Add', exact: true }).click();
      const failed = page.locator('[data-testid=failed-item]');
      expect(await failed.count()).toBe(2);
      expect(await failed.nth(0).locator('[data-testid=failed-code]').textContent()).toBe('10421');
      expect(await failed.nth(0).textContent()).toContain('not a public IPv4 address');
      expect(await failed.nth(1).locator('[data-testid=failed-code]').textContent()).toBe('10425');
      expect(await page.textContent('[data-testid=add-result]')).toContain('1 succeeded, 2 failed');

      await row.getByRole('button', { name: 'Disable 8.8.8.8' }).click();
      expect(await row.locator('[data-testid=whitelist-status]').textContent()).toBe('Disabled');
      await page.getByLabel('Status').selectOption('disabled');
      await page.getByRole('button', { name: 'Filter' }).click();
      expect(await page.locator('[data-testid=whitelist-row]').count()).toBe(1);
      await row.getByRole('button', { name: 'Enable 8.8.8.8' }).click();
      expect(await row.locator('[data-testid=whitelist-status]').textContent()).toBe('Active');
      await row.getByRole('button', { name: 'Delete 8.8.8.8' }).click();
      expect(await page.locator('tr[data-ip="8.8.8.8"]').count()).toBe(0);
      expect(await page.locator('tr[data-ip="1.1.1.1"]').count()).toBe(1);

      // Proxy users: create (password once), use it through the gateway with curl, reset, delete.
      await page.getByRole('link', { name: 'Proxy users' }).click();
      await page.getByLabel('Username').fill('crawler-1');
      await page.getByRole('button', { name: 'Create' }).click();
      const password = (await page.textContent('[data-testid=proxy-password]'))!.trim();
      expect(password.length).toBeGreaterThanOrEqual(20);
      const ok = await curlThroughGateway('crawler-1', password);
      expect(ok).toEqual({ code: 200, body: 'hello from the target' });
      await page.reload();
      expect(await page.locator('[data-testid=proxy-password]').count()).toBe(0);

      await page.getByRole('button', { name: 'Reset password of crawler-1' }).click();
      const newPassword = (await page.textContent('[data-testid=proxy-password]'))!.trim();
      expect(newPassword).not.toBe(password);
      expect((await curlThroughGateway('crawler-1', newPassword)).code).toBe(200);
      expect((await curlThroughGateway('crawler-1', password)).code).toBe(407);
      await page.getByRole('link', { name: 'I have copied it' }).click();
      await page.getByRole('button', { name: 'Delete crawler-1' }).click();
      expect(await page.locator('tr[data-username="crawler-1"]').count()).toBe(0);
      expect((await curlThroughGateway('crawler-1', newPassword)).code).toBe(407);

      // Log out: the old cookie is dead.
      const [cookie] = (await context.cookies()).filter((c) => c.name === 'proxyd_console');
      expect(cookie?.httpOnly).toBe(true);
      expect(cookie?.sameSite).toBe('Strict');
      await page.getByRole('button', { name: 'Log out' }).click();
      await page.waitForURL('**/console/login?notice=logged-out');
      const stale = await fetch(`${daemon.api}/console/account`, {
        headers: { cookie: `proxyd_console=${cookie!.value}` },
        redirect: 'manual',
      });
      expect(stale.status).toBe(303);
      expect(stale.headers.get('location')).toBe('/console/login');
      await page.goto(`${daemon.api}/console/account`);
      expect(new URL(page.url()).pathname).toBe('/console/login');

      expect(errors).toEqual([]);
      await context.close();
    });

    it('works without JavaScript', async () => {
      const context = await browser.newContext({ javaScriptEnabled: false });
      const page = await context.newPage();
      await page.goto(`${daemon.api}/console/login`);
      await page.getByLabel('Email').fill(EMAIL);
      await page.getByLabel('Password').fill(PASSWORD);
      await page.getByRole('button', { name: 'Log in' }).click();
      await page.waitForURL('**/console/account');
      await page.getByRole('button', { name: 'Reset token' }).click();
      await page.getByRole('button', { name: 'Confirm' }).click();
      expect(await page.textContent('[data-testid=api-token]')).toMatch(/^ak/);
      // No script: the copy button stays hidden, the token can still be selected.
      expect(await page.isVisible('button:has-text("Copy")')).toBe(false);
      await context.close();
    });
  });
});
