// The console's proxy-user form in Debian's chromium: what it says about reserved parameters is the contract's
// rule (src/contract/proxy-username.ts), every marker of it, not a copy that knew only "-session-".
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RESERVED_MARKERS } from '../../src/contract/proxy-username.js';
import { admin, startDaemon, type Daemon } from '../helpers/daemon.js';
import { launchChromium, signIn } from '../helpers/browser.js';
import { patient } from '../helpers/patience.js';

const PASSWORD = 'correct horse battery';

describe('console proxy-user form', () => {
  let d: Daemon;
  let browser: Browser;

  beforeAll(async () => {
    d = await startDaemon();
    expect(
      (
        await admin(
          d.dataDir,
          ['account', 'create', '--email', 'form@example.com', '--password-stdin', '--verified'],
          `${PASSWORD}\n`,
        )
      ).code,
    ).toBe(0);
    browser = await launchChromium();
  }, patient(60_000));

  afterAll(async () => {
    await browser?.close();
    await d?.stop();
  });

  it(
    'names every reserved marker in its hint, and refuses each with a message naming it',
    async () => {
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
    },
    patient(60_000),
  );

  it(
    'saves a rate limit per proxy user (10mbit), refuses one it cannot read with a message naming it',
    async () => {
      expect(
        (
          await admin(
            d.dataDir,
            ['proxy-user', 'create', '--email', 'form@example.com', '--username', 'rated-user', '--password-stdin'],
            'rated-user-password-1\n',
          )
        ).code,
      ).toBe(0);
      const page = await browser.newPage();
      await signIn(page, d.api, 'form@example.com', PASSWORD);
      await page.goto(`${d.api}/console/proxy-users`);
      const field = page.getByLabel('Rate limit of rated-user (for example 10mbit)');
      await field.fill('10 Mbit');
      await page.locator('tr[data-username="rated-user"]').getByRole('button', { name: 'Save limits' }).click();
      await page.waitForURL('**/console/proxy-users');
      expect(await page.textContent('[data-testid=flash]')).toContain('Saved the limits of rated-user');
      expect(await page.getByLabel('Rate limit of rated-user (for example 10mbit)').inputValue()).toBe('10mbit');
      // The operator sees the same value (bits per second).
      expect(
        (await admin(d.dataDir, ['proxy-user', 'set', '--email', 'form@example.com', '--username', 'rated-user'])).json
          .rate_limit,
      ).toBe(10_000_000);

      await page.getByLabel('Rate limit of rated-user (for example 10mbit)').fill('10mb');
      await page.locator('tr[data-username="rated-user"]').getByRole('button', { name: 'Save limits' }).click();
      await page.waitForURL('**/console/proxy-users');
      const flash = await page.textContent('[data-testid=flash]');
      expect(flash).toContain('Rate limit: expected a rate such as 10mbit');
      expect(flash).toContain('"10mb"');
      expect(await page.getByLabel('Rate limit of rated-user (for example 10mbit)').inputValue()).toBe('10mbit');
      await page.close();
    },
    patient(60_000),
  );

  it(
    'shows under each limit field the formats it takes, and "no limit" when it is empty',
    async () => {
      expect(
        (
          await admin(
            d.dataDir,
            ['proxy-user', 'create', '--email', 'form@example.com', '--username', 'formats-user', '--password-stdin'],
            'formats-user-password-1\n',
          )
        ).code,
      ).toBe(0);
      const page = await browser.newPage();
      await signIn(page, d.api, 'form@example.com', PASSWORD);
      await page.goto(`${d.api}/console/proxy-users`);
      const form = page.locator('tr[data-username="formats-user"] [data-testid=limits-form]');
      // What a person sees (innerText: rendered text only, no aria-labels, no placeholders).
      const text = await form.innerText();
      expect(text).toMatch(/50GiB/);
      expect(text).toMatch(/500MB/);
      expect(text).toMatch(/10mbit/);
      for (const name of ['traffic_limit', 'max_connections', 'rate_limit']) {
        expect(await form.locator(`input[name=${name}]`).getAttribute('placeholder')).toBe('no limit');
        expect(await form.locator(`input[name=${name}] + [data-testid=limit-format]`).isVisible()).toBe(true);
      }
      await page.close();
    },
    patient(60_000),
  );
});
