// The console's Connections page in Debian's chromium, on each backend: the signed-in account sees its own
// records with their precise reasons (the client only heard a uniform 407), filters them, and sees nothing of
// another account's records nor of attempts that matched no account (those are the operator's).
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, startDaemon, type Daemon } from '../helpers/daemon.js';
import { BACKENDS } from '../helpers/postgres.js';
import { RawClient, basic, startTcpEcho } from '../gateway/helpers.js';
import { waitFor } from '../helpers/wait.js';
import { launchChromium, signIn } from '../helpers/browser.js';
import { patient } from '../helpers/patience.js';

const PASSWORD = 'correct horse battery';
const PROXY_PASSWORD = 'proxy-password-12345';

describe.each(BACKENDS)('console Connections page on %s', (backend) => {
  let d: Daemon;
  let browser: Browser;
  let echo: Awaited<ReturnType<typeof startTcpEcho>>;
  const ids: Record<string, string> = {};

  /** A CONNECT through the gateway; the gateway's request id. */
  async function attempt(user: string, password: string): Promise<string> {
    const c = await RawClient.connect(Number(d.httpProxy.split(':')[1]));
    c.write(`CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${basic(user, password)}\r\n\r\n`);
    const head = await c.readUntil('\r\n\r\n');
    c.socket.destroy();
    return /X-Request-Id: ([^\r]+)/.exec(head)![1]!;
  }

  beforeAll(async () => {
    echo = await startTcpEcho();
    d = await startDaemon({ backend, args: ['--allow-private-targets'] });
    for (const [email, user] of [
      ['mine@example.com', 'mine-user'],
      ['theirs@example.com', 'their-user'],
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
      'users admitted',
      async () => await attempt('mine-user', PROXY_PASSWORD).then((id) => ((ids.admitted = id), true)),
      5_000,
    );
    ids.wrong = await attempt('mine-user', 'not-my-password');
    ids.theirs = await attempt('their-user', 'not-their-password');
    ids.nobody = await attempt('nobody-at-all', 'whatever');
    browser = await launchChromium();
  }, patient(60_000));

  afterAll(async () => {
    await browser?.close();
    await d?.stop();
    echo?.server.close();
  });

  it(
    'shows the account its own records with precise reasons, filters them, and nothing else',
    async () => {
      const page = await browser.newPage();
      await signIn(page, d.api, 'mine@example.com', PASSWORD);
      await page.getByRole('link', { name: 'Connections' }).click();
      await page.waitForURL('**/console/connections');

      // Records reach the page within a couple of seconds of the attempts (written in batches).
      await waitFor(
        'records shown',
        async () => {
          await page.reload();
          return (await page.locator('[data-testid=conn-row]').count()) >= 2;
        },
        5_000,
      );
      const shown = await page
        .locator('[data-testid=conn-row]')
        .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-request-id')));
      expect(shown).toContain(ids.wrong);
      expect(shown).toContain(ids.admitted);
      expect(shown).not.toContain(ids.theirs);
      expect(shown).not.toContain(ids.nobody);
      const wrongRow = page.locator(`[data-testid=conn-row][data-request-id="${ids.wrong}"]`);
      expect(await wrongRow.getAttribute('data-reason')).toBe('wrong_password');
      expect(await wrongRow.locator('[data-testid=conn-reason]').textContent()).toContain('Wrong password');
      expect(await page.content()).not.toContain('not-my-password');

      // Filter: refused only, then by reason.
      await page.getByLabel('Result').selectOption('refused');
      await page.getByRole('button', { name: 'Filter' }).click();
      await page.waitForURL('**/console/connections?*decision=refused*');
      const refused = await page
        .locator('[data-testid=conn-row]')
        .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-request-id')));
      expect(refused).toEqual([ids.wrong]);
      await page.goto(`${d.api}/console/connections?reason=user_disabled`);
      expect(await page.locator('[data-testid=conn-row]').count()).toBe(0);
      expect(await page.textContent('[data-testid=conn-empty]')).toContain('No records match');
      // A bad IP filter is explained, not a 500.
      const res = await page.goto(`${d.api}/console/connections?ip=not-an-ip`);
      expect(res?.status()).toBe(200);
      expect(await page.textContent('[role=alert]')).toContain('complete IP address');
      // Any spelling of the address finds its records (they hold 127.0.0.1).
      await page.goto(`${d.api}/console/connections?ip=${encodeURIComponent('::FFFF:127.0.0.1')}`);
      expect(await page.locator(`[data-testid=conn-row][data-request-id="${ids.wrong}"]`).count()).toBe(1);
      await page.close();
    },
    patient(60_000),
  );

  it(
    'explains a filter value it does not know instead of showing every record unfiltered',
    async () => {
      const page = await browser.newPage();
      await signIn(page, d.api, 'mine@example.com', PASSWORD);
      await page.goto(`${d.api}/console/connections`);
      await waitFor(
        'records shown',
        async () => {
          await page.reload();
          return (await page.locator('[data-testid=conn-row]').count()) >= 2;
        },
        5_000,
      );

      let res = await page.goto(`${d.api}/console/connections?decision=maybe`);
      expect(res?.status()).toBe(200);
      let alert = await page.textContent('[data-testid=conn-filter-error]');
      expect(alert).toContain('"maybe"');
      expect(alert).toContain('admitted or refused');
      expect(await page.locator('[data-testid=conn-row]').count()).toBe(0);

      res = await page.goto(`${d.api}/console/connections?reason=bogus`);
      expect(res?.status()).toBe(200);
      alert = await page.textContent('[data-testid=conn-filter-error]');
      expect(alert).toContain('"bogus"');
      for (const r of ['wrong_password', 'no_exit', 'admission_unavailable']) expect(alert).toContain(r);
      expect(await page.locator('[data-testid=conn-row]').count()).toBe(0);

      // Both at once: both named.
      await page.goto(`${d.api}/console/connections?decision=maybe&reason=bogus`);
      alert = await page.textContent('[data-testid=conn-filter-error]');
      expect(alert).toContain('"maybe"');
      expect(alert).toContain('"bogus"');
      await page.close();
    },
    patient(60_000),
  );

  it(
    "offers in its Reason filter only reasons an account's records can carry (no unknown_user, no not_whitelisted)",
    async () => {
      const page = await browser.newPage();
      await signIn(page, d.api, 'mine@example.com', PASSWORD);
      await page.goto(`${d.api}/console/connections`);
      const options = await page.locator('#f-reason option').evaluateAll((os) => os.map((o: any) => o.value));
      expect(options).toContain('wrong_password');
      expect(options).toContain('bad_username_params');
      expect(options).not.toContain('unknown_user');
      expect(options).not.toContain('not_whitelisted');
      // Asked for anyway (an old link): explained like any value the filter does not offer.
      await page.goto(`${d.api}/console/connections?reason=unknown_user`);
      const alert = await page.textContent('[data-testid=conn-filter-error]');
      expect(alert).toContain('"unknown_user"');
      expect(alert).not.toMatch(/choose one of[^"]*unknown_user/);
      await page.close();
    },
    patient(60_000),
  );
});
