// The console's proxy-user form in Debian's chromium: what it says about reserved parameters is the contract's
// rule (src/contract/proxy-username.ts), every marker of it, not a copy that knew only "-session-".
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RESERVED_MARKERS } from '../../src/contract/proxy-username.js';
import { admin, startDaemon, type Daemon } from '../helpers/daemon.js';
import { launchChromium, signIn } from '../helpers/browser.js';

const PASSWORD = 'correct horse battery';

describe('console proxy-user form', () => {
  let d: Daemon;
  let browser: Browser;

  beforeAll(async () => {
    d = await startDaemon();
    expect((await admin(d.dataDir, ['account', 'create', '--email', 'form@example.com', '--password-stdin', '--verified'], `${PASSWORD}\n`)).code).toBe(0);
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await d?.stop();
  });

  it('names every reserved marker in its hint, and refuses each with a message naming it', async () => {
    const page = await browser.newPage();
    await signIn(page, d.api, 'form@example.com', PASSWORD);
    await page.goto(`${d.api}/console/proxy-users`);
    const hint = await page.textContent('[data-testid=username-hint]');
    for (const m of RESERVED_MARKERS) expect(hint).toContain(`"${m}"`);

    for (const [name, marker] of [
      ['shop-country-us', '-country-'],
      ['shop-city-paris', '-city-'],
      ['shop-session-x', '-session-'],
    ] as const) {
      await page.getByLabel('Username').fill(name);
      await page.getByRole('button', { name: 'Create' }).click();
      await page.waitForURL('**/console/proxy-users');
      const flash = await page.textContent('[data-testid=flash]');
      expect(flash).toContain(`may not contain "${marker}"`);
      for (const m of RESERVED_MARKERS) expect(flash).toContain(`"${m}"`);
      expect(await page.locator(`tr[data-username="${name}"]`).count()).toBe(0);
    }

    // A name without a marker is created.
    await page.getByLabel('Username').fill('shop-crawler');
    await page.getByRole('button', { name: 'Create' }).click();
    await page.waitForURL('**/console/proxy-users');
    expect(await page.textContent('[data-testid=proxy-username]')).toBe('shop-crawler');
    await page.close();
  }, 60_000);
});
