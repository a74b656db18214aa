// The Account page's "Target rules" card in Debian's chromium: the owner edits the account's lists, a bad item is
// named and nothing changes, and what is saved is what the gateway refuses (403, the account's text).
import net from 'node:net';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, startDaemon, type Daemon } from '../helpers/daemon.js';
import { launchChromium, signIn } from '../helpers/browser.js';
import { sleep } from '../helpers/wait.js';
import { patient } from '../helpers/patience.js';

const PASSWORD = 'correct horse battery';
const PROXY_PASSWORD = 'rules-proxy-password-1';

function connectStatus(d: Daemon, target: string): Promise<string> {
  const [host, port] = d.httpProxy.split(':') as [string, string];
  return new Promise((resolve, reject) => {
    const s = net.connect(Number(port), host);
    let buf = '';
    s.on('error', reject);
    s.on('connect', () =>
      s.write(
        `CONNECT ${target} HTTP/1.1\r\nProxy-Authorization: Basic ${Buffer.from(`crawler:${PROXY_PASSWORD}`).toString('base64')}\r\n\r\n`,
      ),
    );
    s.on('data', (c: Buffer) => {
      buf += c.toString('latin1');
      if (!buf.includes('\r\n\r\n')) return;
      s.destroy();
      resolve(buf.slice(0, buf.indexOf('\r\n\r\n')));
    });
  });
}

describe('console target rules card', () => {
  let d: Daemon;
  let browser: Browser;
  let target: net.Server;

  beforeAll(async () => {
    d = await startDaemon({ args: ['--allow-private-targets'] });
    expect(
      (
        await admin(
          d.dataDir,
          ['account', 'create', '--email', 'rules@example.com', '--password-stdin', '--verified'],
          `${PASSWORD}\n`,
        )
      ).code,
    ).toBe(0);
    expect(
      (
        await admin(
          d.dataDir,
          ['proxy-user', 'create', '--email', 'rules@example.com', '--username', 'crawler', '--password-stdin'],
          `${PROXY_PASSWORD}\n`,
        )
      ).code,
    ).toBe(0);
    target = net.createServer((s) => s.on('error', () => {}).pipe(s));
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
    browser = await launchChromium();
  }, patient(60_000));

  afterAll(async () => {
    await browser?.close();
    await d?.stop();
    target?.close();
  });

  it(
    'saves both lists, names a bad item without changing anything, and the gateway refuses what is denied',
    async () => {
      const page = await browser.newPage();
      await signIn(page, d.api, 'rules@example.com', PASSWORD);
      await page.goto(`${d.api}/console/account`);
      const card = page.getByTestId('rules-card');
      expect(await card.getByRole('heading', { name: 'Target rules' }).count()).toBe(1);

      await page.getByLabel('Denied targets').fill('Blocked.Example\n127.0.0.0/8');
      await page.getByLabel('Allowed targets only').fill('');
      await page.getByRole('button', { name: 'Save target rules' }).click();
      await page.waitForURL('**/console/account');
      expect(await page.textContent('[data-testid=flash]')).toContain('Saved your target rules');
      expect(await page.inputValue('[data-testid=rules-deny]')).toBe('blocked.example\n127.0.0.0/8');
      expect((await admin(d.dataDir, ['policy', 'show', '--email', 'rules@example.com'])).json).toEqual({
        scope: 'account',
        email: 'rules@example.com',
        deny: ['blocked.example', '127.0.0.0/8'],
        allow: [],
      });

      // The gateway refuses it (the daemon's view follows within a second).
      const addr = `127.0.0.1:${(target.address() as net.AddressInfo).port}`;
      let head = '';
      for (let i = 0; i < 40 && !head.startsWith('HTTP/1.1 403'); i++) {
        head = await connectStatus(d, addr);
        if (!head.startsWith('HTTP/1.1 403')) await sleep(50);
      }
      expect(head).toContain('details="target denied by account policy"');

      // A bad item: named, nothing changed.
      await page.getByLabel('Denied targets').fill('fine.example\n10.0.0.1/8');
      await page.getByLabel('Allowed targets only').fill('good.example, exa mple.com');
      await page.getByRole('button', { name: 'Save target rules' }).click();
      await page.waitForURL('**/console/account');
      const flash = await page.textContent('[data-testid=flash]');
      expect(flash).toContain('Denied targets: "10.0.0.1/8": host bits set (the network is 10.0.0.0/8)');
      expect(flash).toContain('were not changed');
      expect(await page.inputValue('[data-testid=rules-deny]')).toBe('blocked.example\n127.0.0.0/8');
      expect((await admin(d.dataDir, ['policy', 'show', '--email', 'rules@example.com'])).json.deny).toEqual([
        'blocked.example',
        '127.0.0.0/8',
      ]);

      // Emptied: the target is reachable again.
      await page.getByLabel('Denied targets').fill('');
      await page.getByRole('button', { name: 'Save target rules' }).click();
      await page.waitForURL('**/console/account');
      for (let i = 0; i < 40 && !head.startsWith('HTTP/1.1 200'); i++) {
        head = await connectStatus(d, addr);
        if (!head.startsWith('HTTP/1.1 200')) await sleep(50);
      }
      expect(head).toMatch(/^HTTP\/1\.1 200 /);
      await page.close();
    },
    patient(60_000),
  );
});
