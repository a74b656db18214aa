// The console on a phone (390 × 844 CSS px, as an iPhone 12–15 shows it) in Debian's chromium: every page, with
// real data in it (usage, refused and admitted connections, long reason codes, limits, a webhook, an API key, a token and a
// password shown once), measured as it lays out: nothing wider than the viewport (the page, and no element
// running off its edge, also inside a scrolling strip), "Log out" on screen and clickable without scrolling,
// badges kept as one-line pills, refusal reasons in lines of words, and the Usage chart's text at least 9 px.
// Names that do not break (an IPv6 address pasted into the whitelist form, an IPv6 literal or a long host name as a
// target) wrap in their cell, on a phone and on a desktop's screen alike.
import net from 'node:net';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, startDaemon, type Daemon } from '../helpers/daemon.js';
import { launchChromium, signIn } from '../helpers/browser.js';
import { RawClient, basic } from '../gateway/helpers.js';
import { waitFor } from '../helpers/wait.js';
import { patient } from '../helpers/patience.js';

const WIDTH = 390;
const HEIGHT = 844;
const EMAIL = 'phone@example.com';
const PASSWORD = 'correct horse battery';
const PROXY_PASSWORD = 'phone-proxy-pass-1';
const DESKTOP = { width: 1280, height: 900 };
// Targets the service's rules refuse at once (never dialled): the longest names a record's target cell shows.
const LONG_TARGETS = [
  '[2001:db8:1234:5678:abcd:ef01:2345:6789]',
  'averyveryverylonghostnamewithoutanyhyphensthatgoesonandonandon.blocked.example',
];

interface Layout {
  scrollWidth: number;
  innerWidth: number;
  /** Elements whose box leaves [0, WIDTH] horizontally (a selector-ish description and their edges). */
  offEdge: string[];
  /** Badges drawn on more than one line or taller than wide. */
  badBadges: string[];
  /** Chart texts smaller than 9 px on screen. */
  smallChartText: string[];
  /** Refusal reasons broken into more lines than their words need at this width. */
  squeezedReasons: string[];
  /** "Log out": on screen and the element at its centre. */
  logout: { visible: boolean; hit: boolean } | null;
}

/** Measures the page as laid out (runs in the browser: the test's TypeScript has no DOM types, so the page's globals are untyped here). */
function measure(width: number, height: number): Layout {
  const page = globalThis as any;
  const document = page.document;
  const getComputedStyle = page.getComputedStyle as (e: any) => any;
  const name = (el: any) => {
    const id = el.id ? `#${el.id}` : '';
    const testid = el.getAttribute('data-testid');
    const cls =
      typeof el.className === 'string' && el.className ? `.${el.className.trim().split(/\s+/).join('.')}` : '';
    return `${el.tagName.toLowerCase()}${id}${cls}${testid ? `[data-testid=${testid}]` : ''} "${(el.textContent ?? '').trim().slice(0, 40)}"`;
  };
  const offEdge: string[] = [];
  for (const el of Array.from(document.querySelectorAll('body *')) as any[]) {
    const r = el.getBoundingClientRect();
    if (r.width <= 1 || r.height <= 1) continue; // nothing drawn, or visually hidden (clipped to 1 px)
    const cs = getComputedStyle(el);
    if (cs.visibility === 'hidden' || cs.display === 'none') continue;
    // Inside something clipped away for screen readers only (a stacked table's header row, `.visually-hidden`).
    let clipped = false;
    for (let a = el; a && !clipped; a = a.parentElement)
      clipped = getComputedStyle(a).clipPath !== 'none' || getComputedStyle(a).clip !== 'auto';
    if (clipped) continue;
    if (r.left < -0.5 || r.right > width + 0.5)
      offEdge.push(`${name(el)} [${Math.round(r.left)}, ${Math.round(r.right)}]`);
  }
  const badBadges = (Array.from(document.querySelectorAll('.badge')) as any[])
    .filter((b) => {
      const r = b.getBoundingClientRect();
      return (
        r.width > 0 &&
        (b.getClientRects().length > 1 ||
          r.height > 2 * parseFloat(getComputedStyle(b).fontSize) * 1.6 ||
          r.width < r.height)
      );
    })
    .map(
      (b) =>
        `${name(b)} ${Math.round(b.getBoundingClientRect().width)}×${Math.round(b.getBoundingClientRect().height)}`,
    );
  const smallChartText = (Array.from(document.querySelectorAll('svg text')) as any[])
    .map((t) => ({ t, px: parseFloat(getComputedStyle(t).fontSize) * (t.getScreenCTM()?.a ?? 1) }))
    .filter((x) => x.px < 9)
    .map((x) => `${name(x.t)} ${x.px.toFixed(1)} px`);
  // A reason at this width needs at most ceil(its one-line width / the cell's width) + 1 lines; one word a line is far more.
  const squeezedReasons = (Array.from(document.querySelectorAll('[data-testid=conn-reason]')) as any[])
    .filter((e) => {
      const lh = parseFloat(getComputedStyle(e).lineHeight) || parseFloat(getComputedStyle(e).fontSize) * 1.5;
      const lines = Math.round(e.getBoundingClientRect().height / lh);
      const words = (e.textContent ?? '').trim().split(/\s+/).length;
      return lines > 2 && lines >= words - 1;
    })
    .map((e) => `${name(e)} ${Math.round(e.getBoundingClientRect().width)} px wide`);
  const button = (Array.from(document.querySelectorAll('button')) as any[]).find(
    (b) => b.textContent?.trim() === 'Log out',
  );
  let logout: Layout['logout'] = null;
  if (button) {
    const r = button.getBoundingClientRect();
    const visible = r.left >= 0 && r.right <= width && r.top >= 0 && r.bottom <= height;
    const hit = visible && button.contains(document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2));
    logout = { visible, hit };
  }
  return {
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: page.innerWidth,
    offEdge,
    badBadges,
    smallChartText,
    squeezedReasons,
    logout,
  };
}

describe('console at phone width (390 × 844)', () => {
  let d: Daemon;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let target: net.Server;
  let targetPort: number;

  async function connect(user: string, password: string, host = '127.0.0.1'): Promise<string> {
    const c = await RawClient.connect(Number(d.httpProxy.split(':')[1]));
    c.write(`CONNECT ${host}:${targetPort} HTTP/1.1\r\nProxy-Authorization: ${basic(user, password)}\r\n\r\n`);
    const head = await c.readUntil('\r\n\r\n');
    if (/^HTTP\/1\.1 200 /.test(head)) {
      c.write('x'.repeat(2_000));
      await c.readToEnd(10_000);
    }
    c.socket.destroy();
    return head;
  }

  /** `signedIn`: a page with the navigation and "Log out" (not log-in, nor an error page, which has no navigation). */
  async function check(
    label: string,
    signedIn = true,
    on: Page = page,
    { width, height } = { width: WIDTH, height: HEIGHT },
  ): Promise<void> {
    if (process.env.PHONE_SHOTS)
      await on.screenshot({ path: `${process.env.PHONE_SHOTS}/${label.replace(/\W+/g, '-')}.png`, fullPage: true });
    const l = (await on.evaluate(`(${measure.toString()})(${width}, ${height})`)) as Layout;
    expect.soft(l.innerWidth, `${label}: the page zoomed out to fit something wider`).toBe(width);
    expect.soft(l.scrollWidth, `${label}: the page scrolls sideways`).toBeLessThanOrEqual(width);
    expect.soft(l.offEdge, `${label}: elements off the edge`).toEqual([]);
    expect.soft(l.badBadges, `${label}: badges not one-line pills`).toEqual([]);
    expect.soft(l.smallChartText, `${label}: chart text under 9 px`).toEqual([]);
    expect.soft(l.squeezedReasons, `${label}: reasons one word a line`).toEqual([]);
    if (signedIn)
      expect.soft(l.logout, `${label}: "Log out" on screen and clickable`).toEqual({ visible: true, hit: true });
  }

  beforeAll(async () => {
    // Reads what comes, answers 5,000 bytes, closes.
    target = net.createServer((s) => {
      s.once('data', () => s.end(Buffer.alloc(5_000, 0x61)));
      s.on('error', () => {});
    });
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', () => r()));
    targetPort = (target.address() as net.AddressInfo).port;
    d = await startDaemon({
      args: [
        '--allow-private-targets',
        '--allow-private-webhooks',
        '--egress-pool',
        '127.0.0.2-127.0.0.4',
        '--node-name',
        'phone-node',
        '--location',
        'us:new_york_city',
      ],
    });
    expect(
      (
        await admin(
          d.dataDir,
          ['account', 'create', '--email', EMAIL, '--password-stdin', '--verified'],
          `${PASSWORD}\n`,
        )
      ).code,
    ).toBe(0);
    for (const u of ['crawler-eu-frankfurt-01', 'monitoring']) {
      expect(
        (
          await admin(
            d.dataDir,
            ['proxy-user', 'create', '--email', EMAIL, '--username', u, '--password-stdin'],
            `${PROXY_PASSWORD}\n`,
          )
        ).code,
      ).toBe(0);
    }
    expect(
      (
        await admin(d.dataDir, [
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
        ])
      ).code,
    ).toBe(0);
    expect(
      (await admin(d.dataDir, ['plan', 'set', '--email', EMAIL, '--traffic-limit', '100GiB', '--period', 'month']))
        .code,
    ).toBe(0);
    // Two dedicated addresses (the IPs page): the account's traffic leaves from them.
    expect(
      (
        await admin(d.dataDir, [
          'ip',
          'assign',
          '--email',
          EMAIL,
          '--node',
          'phone-node',
          '--addresses',
          '127.0.0.2-127.0.0.3',
        ])
      ).code,
    ).toBe(0);
    // An API key with every scope and long sources: its row on the Account page.
    expect(
      (
        await admin(d.dataDir, [
          'key',
          'create',
          '--email',
          EMAIL,
          '--name',
          'nightly reporting script of the northwind-trading account',
          '--scopes',
          'usage:read,users:read,users:write,rules:read,rules:write,audit:read',
          '--allowed-ips',
          '2001:db8:1234:5678::/64,203.0.113.0/24',
          '--expires',
          '2030-01-01',
        ])
      ).code,
    ).toBe(0);
    expect(
      (
        await admin(d.dataDir, [
          'webhook',
          'set',
          '--email',
          EMAIL,
          '--url',
          'http://127.0.0.1:9/hooks/proxyd/usage-events-for-the-northwind-trading-account',
          '--allow-private-webhooks',
        ])
      ).code,
    ).toBe(0);
    // A target the service denies: the longest reason code a customer sees.
    expect(
      (await admin(d.dataDir, ['policy', 'set', '--global', '--deny', 'blocked.example,2001:db8::/32'])).code,
    ).toBe(0);
    await waitFor(
      'admitted',
      async () => /^HTTP\/1\.1 200 /.test(await connect('crawler-eu-frankfurt-01', PROXY_PASSWORD)),
      10_000,
    );
    await connect('monitoring', PROXY_PASSWORD);
    await connect('crawler-eu-frankfurt-01', 'not the password');
    await waitFor(
      'the service policy refuses',
      async () => /^HTTP\/1\.1 403 /.test(await connect('monitoring', PROXY_PASSWORD, 'blocked.example')),
      10_000,
    );
    for (const host of LONG_TARGETS)
      expect(await connect('monitoring', PROXY_PASSWORD, host)).toMatch(/^HTTP\/1\.1 403 /);
    browser = await launchChromium();
    context = await browser.newContext({
      viewport: { width: WIDTH, height: HEIGHT },
      deviceScaleFactor: 2,
      isMobile: true,
      hasTouch: true,
    });
    page = await context.newPage();
  }, patient(120_000));

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await d?.stop();
    target?.close();
  });

  it(
    'lays out every page within the viewport, with Log out reachable and chart text of 9 px or more',
    async () => {
      await page.goto(`${d.api}/console/login`);
      await check('login', false);
      await page.getByLabel('Email').fill(EMAIL);
      await page.getByLabel('Password').fill('not my password');
      await page.getByRole('button', { name: 'Log in' }).click();
      await check('login (wrong password)', false);
      await page.getByLabel('Password').fill(PASSWORD);
      await page.getByRole('button', { name: 'Log in' }).click();
      await page.waitForURL('**/console/account');
      await check('account');
      await page.getByRole('button', { name: 'Create token' }).click();
      await check('token confirm');
      await page.getByRole('button', { name: 'Confirm' }).click();
      await page.waitForSelector('[data-testid=api-token]');
      await check('token shown');
      await page.goto(`${d.api}/console/account`);
      await page.getByRole('button', { name: 'Set up an authenticator app' }).click();
      await page.waitForSelector('[data-testid=totp-qr]');
      await page.evaluate('window.scrollTo(0, 0)'); // the answer lands on the card's anchor, below the nav
      await check('two-factor set-up (QR code and secret)');
      await page.goto(`${d.api}/console/confirm`);
      await check('confirm (re-authentication)');
      await page.goto(`${d.api}/console/activity`);
      await check('activity');

      await page.goto(`${d.api}/console/whitelist`);
      await page.fill('input[name=ip]', '8.8.4.4 10.0.0.8 1.1.1.1 2001:0db8:85a3:0000:0000:8a2e:0370:7334');
      await page.fill('input[name=remark]', 'Build server in the Frankfurt office, second rack');
      await page.getByRole('button', { name: 'Add' }).click();
      await check('whitelist (with a failure table)');

      await page.goto(`${d.api}/console/proxy-users`);
      await check('proxy users');
      await page.click('tr[data-username="monitoring"] button:has-text("Reset password")');
      await page.waitForSelector('[data-testid=proxy-password]');
      await check('proxy users (password shown)');

      await page.goto(`${d.api}/console/ips`);
      expect(await page.locator('[data-testid^=ip-row-]').count()).toBe(2);
      await check('ips');

      await page.goto(`${d.api}/console/usage`);
      await waitFor(
        'usage shown',
        async () => {
          await page.reload();
          return (
            Number(await page.getAttribute('[data-testid=usage-total]', 'data-bytes')) > 0 &&
            (await page.locator('[data-testid=usage-domain-row]').count()) > 0
          );
        },
        10_000,
      );
      await check('usage');

      await page.goto(`${d.api}/console/connections`);
      await waitFor(
        'refusals shown',
        async () => {
          await page.reload();
          return (
            (await page.locator('[data-testid=conn-row][data-reason=target_denied_service]').count()) >
              LONG_TARGETS.length &&
            (await page.locator('[data-testid=conn-row][data-reason=wrong_password]').count()) > 0
          );
        },
        10_000,
      );
      await check('connections');
      await page.goto(`${d.api}/console/connections?decision=refused&reason=wrong_password`);
      await check('connections (filtered)');

      await page.goto(`${d.api}/console/no-such-page`);
      await check('not found', false);
      await page.goto(`${d.api}/console/account`);
      await page.getByRole('button', { name: 'Log out', exact: true }).click();
      await page.waitForURL('**/console/login?notice=logged-out');
    },
    patient(120_000),
  );

  it(
    'on a desktop screen too, a long target or an IPv6 address wraps in its cell: no table wider than its card',
    async () => {
      const wide = await browser.newContext({ viewport: DESKTOP });
      try {
        const p = await wide.newPage();
        await signIn(p, d.api, EMAIL, PASSWORD);
        await p.goto(`${d.api}/console/whitelist`);
        await p.fill('input[name=ip]', '9.9.9.9 2001:0db8:85a3:0000:0000:8a2e:0370:7334');
        await p.getByRole('button', { name: 'Add' }).click();
        await check('desktop whitelist (with a failure table)', true, p, DESKTOP);
        await p.goto(`${d.api}/console/connections`);
        expect(await p.locator('[data-testid=conn-row][data-reason=target_denied_service]').count()).toBeGreaterThan(
          LONG_TARGETS.length,
        );
        await check('desktop connections', true, p, DESKTOP);
        for (const where of ['usage', 'proxy-users', 'account', 'ips']) {
          await p.goto(`${d.api}/console/${where}`);
          await check(`desktop ${where}`, true, p, DESKTOP);
        }
      } finally {
        await wide.close();
      }
    },
    patient(60_000),
  );
});
