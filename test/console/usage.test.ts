// The console's Usage page in Debian's chromium: the month's total, the SVG chart, a row per proxy user
// (whitelist traffic under its IP), and the CSV download, for the signed-in account only; the CSV covers the
// period the page shows, also when a plan's period does not start on the 1st; a lifetime plan's period and limit.
import net from 'node:net';
import { readFileSync } from 'node:fs';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, databaseUrlOf, startDaemon, type Daemon } from '../helpers/daemon.js';
import { openStore } from '../../src/daemon/store/index.js';
import { launchChromium, signIn } from '../helpers/browser.js';
import { RawClient, basic } from '../gateway/helpers.js';
import { waitFor } from '../helpers/wait.js';
import { patient } from '../helpers/patience.js';

const PASSWORD = 'correct horse battery';
const PROXY_PASSWORD = 'usage-proxy-pass-1';

describe('console Usage page', () => {
  let d: Daemon;
  let browser: Browser;
  let target: net.Server;

  /** A tunnel that sends `up` bytes and gets `down` back. */
  async function transfer(user: string, up: number, down: number, host = '127.0.0.1'): Promise<void> {
    const c = await RawClient.connect(Number(d.httpProxy.split(':')[1]));
    c.write(
      `CONNECT ${host}:${(target.address() as net.AddressInfo).port} HTTP/1.1\r\nProxy-Authorization: ${basic(user, PROXY_PASSWORD)}\r\n\r\n`,
    );
    expect(await c.readUntil('\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /);
    c.write(`${down}\n`.padEnd(up, ' '));
    expect((await c.readToEnd(10_000)).length).toBe(down);
  }

  beforeAll(async () => {
    // Reads one line "N\n" (padded to the upload size), then answers N bytes.
    target = net.createServer((s) => {
      let got = '';
      s.on('data', (b) => {
        got += b.toString('latin1');
        const n = Number(got.split('\n')[0]);
        if (got.includes('\n') && got.length >= 1 && Number.isFinite(n) && !s.writableEnded)
          setTimeout(() => s.end(Buffer.alloc(n, 0x7a)), 50);
      });
      s.on('error', () => {});
    });
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', () => r()));
    d = await startDaemon({ args: ['--allow-private-targets'] });
    for (const [email, user] of [
      ['usage@example.com', 'crawler'],
      ['other@example.com', 'other-user'],
    ] as const) {
      expect(
        (
          await admin(
            d.dataDir,
            ['account', 'create', '--email', email, '--password-stdin', '--verified'],
            `${PASSWORD}\n`,
          )
        ).code,
      ).toBe(0);
      expect(
        (
          await admin(
            d.dataDir,
            ['proxy-user', 'create', '--email', email, '--username', user, '--password-stdin'],
            `${PROXY_PASSWORD}\n`,
          )
        ).code,
      ).toBe(0);
    }
    await waitFor(
      'admitted',
      () =>
        transfer('crawler', 10_000, 300_000).then(
          () => true,
          () => false,
        ),
      5_000,
    );
    await transfer('other-user', 5_000, 7_000);
    browser = await launchChromium();
  }, patient(60_000));

  afterAll(async () => {
    await browser?.close();
    await d?.stop();
    target?.close();
  });

  it(
    'shows the total, the chart, a row per user and downloads the CSV',
    async () => {
      const page = await browser.newPage({ acceptDownloads: true });
      await signIn(page, d.api, 'usage@example.com', PASSWORD);
      await page.getByRole('link', { name: 'Usage' }).click();
      await page.waitForURL('**/console/usage');
      await waitFor(
        'usage shown',
        async () => {
          await page.reload();
          return Number(await page.getAttribute('[data-testid=usage-total]', 'data-bytes')) === 310_000;
        },
        5_000,
      );
      expect(await page.textContent('[data-testid=usage-limit]')).toBe('No limit');
      expect(await page.locator('[data-testid=usage-chart]').evaluate((e) => e.tagName.toLowerCase())).toBe('svg');
      expect(await page.locator('[data-testid=usage-chart] rect.bar').count()).toBe(54); // 24 hours + 30 days
      expect(await page.textContent('[data-testid="usage-row-crawler"] [data-testid=usage-row-total]')).toBe(
        '302.73 KiB',
      );
      expect(await page.locator('[data-testid="usage-row-other-user"]').count()).toBe(0);

      const [download] = await Promise.all([page.waitForEvent('download'), page.click('[data-testid=usage-csv]')]);
      const csv = readFileSync((await download.path())!, 'utf8');
      expect(csv.split('\r\n')[0]).toBe('user,bytes_up,bytes_down,connections');
      expect(csv).toContain('crawler,10000,300000,');
      expect(csv).not.toContain('other-user');
      await page.close();
    },
    patient(60_000),
  );

  it(
    "Top domains: a row per domain, largest first, the account's own only",
    async () => {
      expect(
        (
          await admin(
            d.dataDir,
            ['account', 'create', '--email', 'domains@example.com', '--password-stdin', '--verified'],
            `${PASSWORD}\n`,
          )
        ).code,
      ).toBe(0);
      expect(
        (
          await admin(
            d.dataDir,
            ['proxy-user', 'create', '--email', 'domains@example.com', '--username', 'surfer', '--password-stdin'],
            `${PROXY_PASSWORD}\n`,
          )
        ).code,
      ).toBe(0);
      await waitFor(
        'admitted',
        () =>
          transfer('surfer', 2_000, 200_000, 'localhost').then(
            () => true,
            () => false,
          ),
        5_000,
      );
      await transfer('surfer', 1_000, 4_000);
      const page = await browser.newPage();
      await signIn(page, d.api, 'domains@example.com', PASSWORD);
      await page.goto(`${d.api}/console/usage`);
      const rows = page.locator('[data-testid=usage-domain-row]');
      // Usage is flushed every second: a flush can land between a transfer's upload and its download, so wait for
      // the totals, not just the rows (a row shown with the upload alone failed this once).
      await waitFor(
        'domains shown with their totals',
        async () => {
          await page.reload();
          return (
            (await rows.count()) === 2 &&
            (await rows.nth(1).locator('[data-testid=usage-domain-total]').textContent()) === '4.88 KiB'
          );
        },
        5_000,
      );
      expect(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-domain')))).toEqual([
        'localhost',
        '127.0.0.1',
      ]);
      expect(await rows.first().locator('[data-testid=usage-domain-total]').textContent()).toBe('197.27 KiB');
      expect(await rows.nth(1).locator('[data-testid=usage-domain-total]').textContent()).toBe('4.88 KiB');
      expect(await page.locator('[data-testid=usage-domain-other]').count()).toBe(0);
      await page.close();
    },
    patient(60_000),
  );

  it(
    "the CSV covers the page's period when the plan is anchored mid-month",
    async () => {
      const DAY = 86_400_000;
      const now = Date.now();
      const today = new Date(now);
      const monthStart = Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), 1);
      // An anchor day whose period start is not the 1st: today's (on the 2nd..28th), the 28th, or (on the 1st) the 15th.
      const day = today.getUTCDate();
      const anchorDay = day === 1 ? 15 : Math.min(day, 28);
      const periodStart =
        day === 1
          ? Date.UTC(today.getUTCFullYear(), today.getUTCMonth() - 1, 15)
          : Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), anchorDay);
      expect(Math.abs(periodStart - monthStart)).toBeGreaterThanOrEqual(DAY);
      // Usage inside one of the two spans and not the other: the page and its CSV must agree on it.
      const at = Math.min(periodStart, monthStart) + 3_600_000;
      const inPeriod = at >= periodStart;

      expect(
        (
          await admin(
            d.dataDir,
            ['account', 'create', '--email', 'anchored@example.com', '--password-stdin', '--verified'],
            `${PASSWORD}\n`,
          )
        ).code,
      ).toBe(0);
      expect(
        (
          await admin(
            d.dataDir,
            [
              'proxy-user',
              'create',
              '--email',
              'anchored@example.com',
              '--username',
              'anchored-user',
              '--password-stdin',
            ],
            `${PROXY_PASSWORD}\n`,
          )
        ).code,
      ).toBe(0);
      const store = await openStore({ dataDir: d.dataDir, databaseUrl: databaseUrlOf(d.dataDir) });
      try {
        const account = (await store.accounts.findByEmail('anchored@example.com'))!;
        await store.plans.set({
          accountId: account.id,
          trafficLimit: null,
          period: 'month',
          anchorDay,
          maxConnections: null,
          expiresAt: null,
        });
        const delta = {
          accountId: account.id,
          subject: 'user:anchored-user',
          bytesUp: 123_456,
          bytesDown: 0,
          connections: 1,
        };
        expect(await store.usage.addFlush('test-node', `anchored-${now}`, at, [delta])).toBe('ok');
      } finally {
        await store.close();
      }

      const page = await browser.newPage({ acceptDownloads: true });
      await signIn(page, d.api, 'anchored@example.com', PASSWORD);
      await page.goto(`${d.api}/console/usage`);
      const since = new Date(periodStart).toISOString().slice(0, 10);
      expect(await page.textContent('#period-title')).toContain(`since ${since}`);
      const shown = Number(await page.getAttribute('[data-testid=usage-total]', 'data-bytes'));
      expect(shown).toBe(inPeriod ? 123_456 : 0);

      const [download] = await Promise.all([page.waitForEvent('download'), page.click('[data-testid=usage-csv]')]);
      expect(download.suggestedFilename()).toBe(`usage-${since}.csv`);
      const csv = readFileSync((await download.path())!, 'utf8');
      const total = csv
        .split('\r\n')
        .find((l) => l.startsWith('total,'))!
        .split(',');
      expect(Number(total[1]) + Number(total[2])).toBe(shown);
      expect(csv.includes('anchored-user,123456,')).toBe(inPeriod);
      await page.close();
    },
    patient(60_000),
  );

  it(
    'Proxy users: "Save limits" stores a user\'s limits, the gateway applies them, bad values are explained',
    async () => {
      const page = await browser.newPage();
      await signIn(page, d.api, 'usage@example.com', PASSWORD);
      await page.goto(`${d.api}/console/proxy-users`);
      const form = page.locator('tr[data-username="crawler"] [data-testid=limits-form]');
      await form.locator('input[name=traffic_limit]').fill('12 parsecs');
      await form.getByRole('button', { name: 'Save limits' }).click();
      expect(await page.textContent('[data-testid=flash]')).toContain('Traffic limit: expected a size');
      await form.locator('input[name=traffic_limit]').fill('100KiB');
      await form.locator('input[name=max_connections]').fill('3');
      await form.getByRole('button', { name: 'Save limits' }).click();
      expect(await page.textContent('[data-testid=flash]')).toContain('Saved the limits of crawler');
      expect(await form.locator('input[name=traffic_limit]').inputValue()).toBe('100KiB');
      expect(await form.locator('input[name=max_connections]').inputValue()).toBe('3');
      // crawler has used ~300 KiB: over its new limit, refused (403) within about a second.
      await waitFor(
        'crawler refused',
        async () => {
          const c = await RawClient.connect(Number(d.httpProxy.split(':')[1]));
          c.write(
            `CONNECT 127.0.0.1:${(target.address() as net.AddressInfo).port} HTTP/1.1\r\nProxy-Authorization: ${basic('crawler', PROXY_PASSWORD)}\r\n\r\n`,
          );
          const head = await c.readUntil('\r\n\r\n');
          c.socket.destroy();
          return head.startsWith('HTTP/1.1 403 ');
        },
        3_000,
      );
      await page.goto(`${d.api}/console/usage`);
      await page.close();
    },
    patient(60_000),
  );

  it(
    "a lifetime plan: the period since the account began (no usage yet) and its limit for the plan's lifetime, as proxyctl usage says it",
    async () => {
      expect(
        (
          await admin(
            d.dataDir,
            ['account', 'create', '--email', 'lifetime@example.com', '--password-stdin', '--verified'],
            `${PASSWORD}\n`,
          )
        ).code,
      ).toBe(0);
      expect(
        (
          await admin(d.dataDir, [
            'plan',
            'set',
            '--email',
            'lifetime@example.com',
            '--traffic-limit',
            '1GiB',
            '--period',
            'lifetime',
          ])
        ).code,
      ).toBe(0);
      const page = await browser.newPage();
      await signIn(page, d.api, 'lifetime@example.com', PASSWORD);
      await page.goto(`${d.api}/console/usage`);
      expect(await page.textContent('#period-title')).toBe(
        `Since ${new Date().toISOString().slice(0, 10)} (lifetime plan, UTC)`,
      );
      expect(await page.textContent('[data-testid=usage-limit]')).toBe("1 GiB for the plan's lifetime");
      await page.close();
    },
    patient(60_000),
  );
});
