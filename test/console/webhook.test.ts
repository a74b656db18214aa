// The Account page's webhook card in Debian's chromium: the URL rule (https:// and a public address on a daemon
// without --allow-private-webhooks), the signing secret shown once, the webhook removed.
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, databaseUrlOf, startDaemon, type Daemon } from '../helpers/daemon.js';
import { launchChromium, signIn } from '../helpers/browser.js';
import { openStore } from '../../src/daemon/store/index.js';
import { patient } from '../helpers/patience.js';

const PASSWORD = 'correct horse battery';

describe('console webhook card', () => {
  let d: Daemon;
  let browser: Browser;

  beforeAll(async () => {
    d = await startDaemon();
    expect(
      (
        await admin(
          d.dataDir,
          ['account', 'create', '--email', 'hook-owner@example.com', '--password-stdin', '--verified'],
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
    'refuses http:// and private receivers, shows the secret once, removes',
    async () => {
      const page = await browser.newPage();
      await signIn(page, d.api, 'hook-owner@example.com', PASSWORD);
      await page.goto(`${d.api}/console/account`);
      const card = page.locator('[data-testid=webhook-card]');
      for (const [url, why] of [
        ['http://93.184.216.34/hook', 'must be https://'],
        ['https://127.0.0.1/hook', 'private or reserved'],
      ] as const) {
        await card.locator('input[name=url]').fill(url);
        await card.getByRole('button', { name: 'Save webhook' }).click();
        expect(await page.textContent('[data-testid=flash]')).toContain(why);
        expect(await page.locator('[data-testid=webhook-url]').count()).toBe(0);
      }
      await card.locator('input[name=url]').fill('https://93.184.216.34/hook');
      await card.locator('input[name=thresholds]').fill('50, 90,100');
      await card.getByRole('button', { name: 'Save webhook' }).click();
      const secret = (await page.textContent('[data-testid=webhook-secret]'))!;
      expect(secret).toMatch(/^whsec_/);
      expect(await page.textContent('[data-testid=webhook-url]')).toBe('https://93.184.216.34/hook');
      expect(await page.textContent('[data-testid=webhook-thresholds]')).toBe('50 %, 90 %, 100 %');
      // The secret is the one events are signed with, and it is not shown again.
      const store = await openStore({ dataDir: d.dataDir, databaseUrl: databaseUrlOf(d.dataDir) });
      try {
        const account = (await store.accounts.findByEmail('hook-owner@example.com'))!;
        expect((await store.webhooks.get(account.id))?.secret).toBe(secret);
      } finally {
        await store.close();
      }
      await page.reload();
      expect(await page.locator('[data-testid=webhook-secret]').count()).toBe(0);
      expect(await page.content()).not.toContain(secret);
      await page.getByRole('button', { name: 'Remove webhook' }).click();
      expect(await page.textContent('[data-testid=flash]')).toContain('removed');
      expect(await page.locator('[data-testid=webhook-url]').count()).toBe(0);
      await page.close();
    },
    patient(60_000),
  );

  it(
    'draws the URL field like the other fields, as wide as the card, and shows how requests are signed',
    async () => {
      for (const viewport of [
        { width: 1280, height: 860 },
        { width: 390, height: 844 },
      ]) {
        const page = await browser.newPage({ viewport });
        await signIn(page, d.api, 'hook-owner@example.com', PASSWORD);
        await page.goto(`${d.api}/console/account`);
        const card = page.locator('[data-testid=webhook-card]');
        const url = card.locator('input[name=url]');
        const thresholds = card.locator('input[name=thresholds]');
        // The same box as the thresholds field below it: height, font, border, width.
        const style = (l: typeof url) =>
          l.evaluate((e) => {
            const cs = (globalThis as any).getComputedStyle(e);
            return {
              height: cs.height,
              fontSize: cs.fontSize,
              border: cs.borderTopWidth,
              radius: cs.borderTopLeftRadius,
              width: e.getBoundingClientRect().width,
            };
          });
        expect(await style(url)).toEqual(await style(thresholds));
        const cardBox = (await card.boundingBox())!;
        expect((await url.boundingBox())!.width).toBeGreaterThan(cardBox.width * 0.8);
        // A long URL is shown whole in the field's width at desktop size (no truncation to a dozen characters).
        const long = 'https://hooks.example.com/proxyd/events/northwind-trading';
        await url.fill(long);
        if (viewport.width > 400) expect(await url.evaluate((e: any) => e.scrollWidth <= e.clientWidth)).toBe(true);
        const signing = await card.locator('[data-testid=webhook-signing]').innerText();
        expect(signing).toContain('Proxyd-Signature: t=UNIX,v1=HEX');
        expect(signing).toContain('HMAC-SHA256');
        expect(signing).toContain('whsec_');
        expect(signing).toMatch(/prefix included/);
        expect(signing).toContain('Proxyd-Event-Id');
        await page.close();
      }
    },
    patient(60_000),
  );
});
