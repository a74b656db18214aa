// The console's IPs page in Debian's chromium, on each backend: the account's dedicated addresses with their
// country, city, since and bytes this period (metered by the address traffic left from), a replacement within the
// monthly allowance (then the buttons are disabled), and nothing of another account's addresses.
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

describe.each(BACKENDS)('console IPs page on %s', (backend) => {
  let d: Daemon;
  let browser: Browser;
  let echo: Awaited<ReturnType<typeof startTcpEcho>>;

  beforeAll(async () => {
    echo = await startTcpEcho();
    d = await startDaemon({
      backend,
      args: [
        '--allow-private-targets',
        '--egress-pool',
        '127.0.0.2-127.0.0.5',
        '--node-name',
        'n1',
        '--location',
        'us:nyc',
        '--ip-replacements',
        '1',
      ],
    });
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
    const r = await admin(d.dataDir, [
      'ip',
      'assign',
      '--email',
      'mine@example.com',
      '--node',
      'n1',
      '--addresses',
      '127.0.0.2,127.0.0.3',
    ]);
    expect(r.code, r.stderr).toBe(0);
    // 1,000 bytes each way through 127.0.0.2, once the daemon has read the assignment.
    await waitFor(
      'traffic through 127.0.0.2',
      async () => {
        const c = await RawClient.connect(Number(d.httpProxy.split(':')[1]));
        try {
          c.write(
            `CONNECT 127.0.0.1:${echo.port} HTTP/1.1\r\nProxy-Authorization: ${basic('mine-user-ip-127.0.0.2', PROXY_PASSWORD)}\r\n\r\n`,
          );
          const head = await c.readUntil('\r\n\r\n');
          if (!head.startsWith('HTTP/1.1 200')) return false;
          c.write('x'.repeat(1000));
          await c.read(1000);
          return true;
        } finally {
          c.socket.destroy();
        }
      },
      patient(5_000),
    );
    browser = await launchChromium();
  }, patient(60_000));

  afterAll(async () => {
    await browser?.close();
    await d?.stop();
    echo?.server.close();
  });

  it(
    "lists the account's addresses with the bytes that left from each, and replaces one within the allowance",
    async () => {
      const page = await browser.newPage();
      await signIn(page, d.api, 'mine@example.com', PASSWORD);
      await page.getByRole('link', { name: 'IPs' }).click();
      await page.waitForURL('**/console/ips');
      expect(await page.locator('[data-testid^=ip-row-]').count()).toBe(2);
      const row2 = page.locator('[data-testid="ip-row-127.0.0.2"]');
      expect(await row2.textContent()).toContain('US');
      expect(await row2.textContent()).toContain('nyc');
      await waitFor(
        'bytes by address shown',
        async () => {
          await page.reload();
          return /↑ 1000 B ↓ 1000 B|↑ 1,000 B|1000 B/.test(
            (await page.locator('[data-testid="ip-row-127.0.0.2"] [data-testid=ip-bytes]').textContent()) ?? '',
          );
        },
        patient(15_000),
      );
      expect(await page.locator('[data-testid="ip-row-127.0.0.3"] [data-testid=ip-bytes]').textContent()).toContain(
        '0 B',
      );
      expect(await page.textContent('[data-testid=ip-replacements-left]')).toBe('1');

      await page.locator('[data-testid="ip-row-127.0.0.3"] button:has-text("Replace")').click();
      await page.waitForURL('**/console/ips');
      expect(await page.textContent('[data-testid=flash]')).toContain('Replaced 127.0.0.3 with 127.0.0.4');
      expect(await page.locator('[data-testid="ip-row-127.0.0.3"]').count()).toBe(0);
      expect(await page.locator('[data-testid="ip-row-127.0.0.4"]').count()).toBe(1);
      expect(await page.textContent('[data-testid=ip-replacements-left]')).toBe('0');
      expect(await page.locator('[data-testid="ip-row-127.0.0.2"] button:has-text("Replace")').isDisabled()).toBe(true);
      const list = await admin(d.dataDir, ['ip', 'list', '--node', 'n1']);
      expect(list.stdout).toContain(
        '"address":"127.0.0.3","node":"n1","country":"us","city":"nyc","account":null,"assigned_at":null,"state":"quarantined"',
      );
      const audit = await admin(d.dataDir, ['audit', '--email', 'mine@example.com', '--action', 'ip.replaced']);
      expect(audit.stdout).toContain('"old":"127.0.0.3"');
      // Exactly one record, by the console session (SPEC section 20: the actor is whoever did it).
      const records = audit.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { actor: { type: string }; target: string; details: { new: string } });
      expect(records.map((r) => [r.actor.type, r.target, r.details.new])).toEqual([
        ['console', '127.0.0.3', '127.0.0.4'],
      ]);
      await page.close();
    },
    patient(60_000),
  );

  it(
    'another account sees none of them',
    async () => {
      const page = await browser.newPage();
      await signIn(page, d.api, 'theirs@example.com', PASSWORD);
      await page.goto(`${d.api}/console/ips`);
      expect(await page.locator('[data-testid^=ip-row-]').count()).toBe(0);
      expect(await page.textContent('[data-testid=ip-empty]')).toContain('shared pool');
      // A replacement of someone else's address is refused and changes nothing.
      const csrf = await page.getAttribute('input[name=_csrf]', 'value');
      const res = await page.request.post(`${d.api}/console/ips/replace`, {
        form: { _csrf: csrf!, address: '127.0.0.2' },
        maxRedirects: 0,
      });
      expect(res.status()).toBe(303);
      await page.goto(`${d.api}/console/ips`);
      expect(await page.textContent('[data-testid=flash]')).toContain('127.0.0.2 is not one of your addresses');
      await page.close();
    },
    patient(60_000),
  );
});
