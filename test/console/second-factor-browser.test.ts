// The second factor and sessions in Debian's chromium (playwright-core) against the built daemon (`npm run build`
// first): TOTP enrolled from the page's own secret, a log-in with a code, a replayed code refused, a recovery code
// working once, 5 wrong codes locking the second step; a passkey registered and used through Chromium's virtual
// authenticator (CDP WebAuthn domain) at http://localhost:PORT (browsers refuse passkeys on IP literals); sessions
// listed and ended from another browser context. Each test drives tens of page loads and waits: its time limit is
// 90 s scaled by the load (a CI run once took over the default 30 s with the image build beside it).
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, startDaemon, type Daemon } from '../helpers/daemon.js';
import { launchChromium } from '../helpers/browser.js';
import { patient } from '../helpers/patience.js';
import { nextTotpCode as codeFor } from './client.js';

const PASSWORD = 'correct horse battery';

let daemon: Daemon;
let browser: Browser;
let origin: string;
let seq = 0;

beforeAll(async () => {
  daemon = await startDaemon();
  origin = daemon.api.replace('127.0.0.1', 'localhost');
  browser = await launchChromium();
}, patient(60_000));
afterAll(async () => {
  await browser?.close();
  await daemon?.stop();
});

async function account(): Promise<string> {
  const email = `browser${++seq}@example.com`;
  const r = await admin(
    daemon.dataDir,
    ['account', 'create', '--email', email, '--password-stdin', '--verified'],
    `${PASSWORD}\n`,
  );
  expect(r.code, r.stderr).toBe(0);
  return email;
}

/** A page that fails the test on a script error or a CSP violation. */
async function newPage(context: BrowserContext): Promise<{ page: Page; errors: string[] }> {
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on(
    'console',
    (m) => m.type() === 'error' && !m.text().startsWith('Failed to load resource') && errors.push(m.text()),
  );
  return { page, errors };
}

async function passwordStep(page: Page, email: string): Promise<void> {
  await page.goto(`${origin}/console/login`);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Log in' }).click();
}

async function secondStep(page: Page, code: string): Promise<string> {
  await page.waitForURL('**/console/login/2fa');
  await page.getByTestId('second-factor-code').fill(code);
  await page.getByRole('button', { name: 'Verify' }).click();
  await page.waitForLoadState();
  return new URL(page.url()).pathname;
}

describe('the second factor in a browser', () => {
  it(
    "TOTP from the page's secret: log in with a code, a replay refused, a recovery code once, 5 wrong lock",
    async () => {
      const email = await account();
      const context = await browser.newContext();
      const { page, errors } = await newPage(context);
      await passwordStep(page, email);
      await page.waitForURL('**/console/account');
      await page.getByRole('button', { name: 'Set up an authenticator app' }).click();
      await page.waitForSelector('[data-testid=totp-qr] svg');
      const secret = (await page.textContent('[data-testid=totp-secret]'))!.replace(/\s/g, '');
      expect(secret).toMatch(/^[A-Z2-7]{32}$/);
      const used = { step: 0 };
      await page.getByTestId('totp-code').fill(codeFor(secret, used));
      await page.getByRole('button', { name: 'Turn on' }).click();
      await page.waitForSelector('[data-testid=recovery-codes]');
      const codes = (await page.locator('[data-testid=recovery-codes] code').allTextContents()).map((c) => c.trim());
      expect(codes).toHaveLength(10);
      expect(await page.textContent('[data-testid=two-factor-state]')).toBe('On');
      await page.reload();
      expect(await page.locator('[data-testid=recovery-codes]').count()).toBe(0);
      await page.getByRole('button', { name: 'Log out', exact: true }).click();

      // A code, then the same code in another browser: refused.
      const code = codeFor(secret, used);
      await passwordStep(page, email);
      expect(await secondStep(page, code)).toBe('/console/account');
      const other = await browser.newContext();
      const { page: p2 } = await newPage(other);
      await passwordStep(p2, email);
      expect(await secondStep(p2, code)).toBe('/console/login/2fa');
      expect(await p2.textContent('[data-testid=login-message]')).toContain('used already');

      // A recovery code works once.
      expect(await secondStep(p2, codes[3]!)).toBe('/console/account');
      expect(await p2.textContent('[data-testid=flash]')).toContain('9 are left');
      await p2.getByRole('button', { name: 'Log out', exact: true }).click();
      await passwordStep(p2, email);
      expect(await secondStep(p2, codes[3]!)).toBe('/console/login/2fa');
      expect(await p2.textContent('[data-testid=login-message]')).toContain('not valid');

      // Wrong codes (the reused recovery code and the replay counted already): locked, with the time.
      for (let i = 0; i < 2; i++) expect(await secondStep(p2, '111111')).toBe('/console/login/2fa');
      await secondStep(p2, '222222');
      expect(await p2.textContent('[data-testid=login-message]')).toMatch(
        /locked until (\d{4}-\d{2}-\d{2} )?\d{2}:\d{2} UTC/,
      );
      expect(await secondStep(p2, codeFor(secret, used))).toBe('/console/login/2fa');
      expect(await p2.textContent('[data-testid=login-message]')).toMatch(/locked until/);
      expect(errors).toEqual([]);
      await other.close();
      await context.close();
    },
    patient(90_000),
  );

  it(
    "a passkey registered and used through Chromium's virtual authenticator",
    async () => {
      const email = await account();
      const context = await browser.newContext();
      const { page, errors } = await newPage(context);
      const cdp = await context.newCDPSession(page);
      await cdp.send('WebAuthn.enable');
      await cdp.send('WebAuthn.addVirtualAuthenticator', {
        options: {
          protocol: 'ctap2',
          transport: 'internal',
          hasResidentKey: true,
          hasUserVerification: true,
          isUserVerified: true,
          automaticPresenceSimulation: true,
        },
      });
      await passwordStep(page, email);
      await page.waitForURL('**/console/account');
      await page.locator('#passkey_name').fill('Test laptop');
      await page.getByTestId('add-passkey').click();
      await page.waitForSelector('[data-testid=recovery-codes]', { timeout: 8000 }).catch(async (e: unknown) => {
        throw new Error(
          `${String(e)}; status: ${await page.textContent('#passkey-status')}; errors: ${errors.join(' | ')}`,
        );
      });
      expect(await page.textContent('[data-testid=two-factor-state]')).toBe('On');
      expect(await page.textContent('[data-testid=passkeys]')).toContain('Test laptop');
      await page.reload();
      await page.getByRole('button', { name: 'Log out', exact: true }).click();

      await passwordStep(page, email);
      await page.waitForURL('**/console/login/2fa');
      await page.getByTestId('use-passkey').click();
      await page.waitForURL('**/console/account');
      expect(await page.textContent('[data-testid=passkeys]')).toContain('last used');
      const r = await admin(daemon.dataDir, ['audit', '--email', email]);
      const records = r.stdout
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { action: string; target: string | null; details: { method?: string } });
      expect(records.filter((x) => x.action === '2fa.passkey_added').map((x) => x.target)).toEqual(['Test laptop']);
      expect(records.filter((x) => x.action === 'console.login').map((x) => x.details.method)).toEqual([
        'password',
        'passkey',
      ]);

      // Turning it off asks for a fresh second factor: the passkey again, on the confirmation page.
      await page.getByRole('button', { name: 'Turn off two-factor authentication' }).click();
      await page.waitForURL('**/console/confirm');
      await page.getByTestId('use-passkey').click();
      await page.waitForURL(/\/console\/account(#two-factor)?$/);
      expect(await page.textContent('[data-testid=two-factor-state]')).toBe('Off');
      expect(await page.textContent('[data-testid=flash]')).toContain('Two-factor authentication is off');
      expect(errors).toEqual([]);
      await context.close();
    },
    patient(90_000),
  );
});

describe('sessions in a browser', () => {
  it(
    'lists both browsers and ends the other one at once',
    async () => {
      const email = await account();
      const a = await browser.newContext({
        userAgent:
          'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36',
      });
      const b = await browser.newContext({
        userAgent: 'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:140.0) Gecko/20100101 Firefox/140.0',
      });
      const { page: pa, errors } = await newPage(a);
      const { page: pb } = await newPage(b);
      await passwordStep(pa, email);
      await pa.waitForURL('**/console/account');
      await passwordStep(pb, email);
      await pb.waitForURL('**/console/account');
      await pa.reload();
      const rows = pa.locator('[data-testid^=session-row-]');
      expect(await rows.count()).toBe(2);
      expect(await pa.locator('[data-current=true]').textContent()).toContain('Chrome 140 on Linux');
      const otherRow = pa.locator('[data-testid^=session-row-]:not([data-current])');
      expect(await otherRow.textContent()).toContain('Firefox 140 on Windows');
      expect(await otherRow.textContent()).toContain('127.0.0.1');
      await otherRow.getByRole('button', { name: 'Sign out' }).click();
      await pa.waitForSelector('[data-testid=flash]');
      expect(await pa.locator('[data-testid^=session-row-]').count()).toBe(1);
      await pb.reload();
      expect(new URL(pb.url()).pathname).toBe('/console/login');
      // And "everywhere else" from B, signed in again.
      await passwordStep(pb, email);
      await pb.waitForURL('**/console/account');
      await pb.getByRole('button', { name: 'Sign out everywhere else' }).click();
      await pb.waitForSelector('[data-testid=flash]');
      await pa.reload();
      expect(new URL(pa.url()).pathname).toBe('/console/login');
      expect(errors).toEqual([]);
      await a.close();
      await b.close();
    },
    patient(90_000),
  );
});
