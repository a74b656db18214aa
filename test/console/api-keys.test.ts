// The Account page's "API keys" card: in Debian's chromium, a key made with its name, scopes and expiry is shown
// once and opens the usage API; its row's revoke button asks for a confirmation, then the key gets 401 at once.
// Over HTTP: both actions wait behind re-authentication, bad input makes nothing, and the audit records never hold
// the key.
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { USAGE_PATHS } from '../../src/contract/paths.js';
import { admin, inspectDb, startDaemon, type Daemon } from '../helpers/daemon.js';
import { launchChromium, signIn } from '../helpers/browser.js';
import { patient } from '../helpers/patience.js';
import { ConsoleClient, testid } from './client.js';

const PASSWORD = 'correct horse battery';
let seq = 0;

async function usage(d: Daemon, key: string): Promise<number> {
  return (await fetch(`${d.api}${USAGE_PATHS.summary}`, { headers: { authorization: `Bearer ${key}` } })).status;
}

async function keysOf(
  d: Daemon,
  email: string,
): Promise<
  Array<{ id: string; name: string; scopes: string[]; expires_at: string | null; allowed_ips: string[]; state: string }>
> {
  const r = await admin(d.dataDir, ['key', 'list', '--email', email]);
  return r.stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

describe('console API keys card', () => {
  let d: Daemon;
  let browser: Browser;

  async function account(): Promise<string> {
    const email = `keys${++seq}@example.com`;
    expect(
      (
        await admin(
          d.dataDir,
          ['account', 'create', '--email', email, '--password-stdin', '--verified'],
          `${PASSWORD}\n`,
        )
      ).code,
    ).toBe(0);
    return email;
  }

  beforeAll(async () => {
    d = await startDaemon();
    browser = await launchChromium();
  }, patient(60_000));
  afterAll(async () => {
    await browser?.close();
    await d?.stop();
  });

  it('makes a key (name, scopes, expiry) shown once, which opens usage; revokes it after a confirmation', async () => {
    const email = await account();
    const page = await browser.newPage();
    await signIn(page, d.api, email, PASSWORD);
    const card = page.locator('[data-testid=api-keys-card]');
    expect(await card.locator('[data-testid=api-keys-empty]').count()).toBe(1);
    await card.getByLabel('Name').fill('reporting script');
    await card.locator('[data-testid="api-key-scope-usage:read"]').check();
    await card.locator('[data-testid="api-key-scope-audit:read"]').check();
    await card.getByLabel('Expires (optional, UTC)').fill('2030-06-01');
    await card.getByRole('button', { name: 'Make key' }).click();
    await page.waitForSelector('[data-testid=api-key-value]');
    const key = (await page.textContent('[data-testid=api-key-value]'))!.trim();
    expect(key).toMatch(/^pxk_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/);
    const id = /^pxk_([0-9a-f]{16})_/.exec(key)![1]!;
    const row = page.locator(`[data-testid=api-key-row-${id}]`);
    expect(await row.textContent()).toContain('reporting script');
    expect(await row.textContent()).toContain('usage:read');
    expect(await row.textContent()).toContain('2030-06-01 00:00:00 UTC');
    expect(await usage(d, key)).toBe(200);
    expect(await keysOf(d, email)).toMatchObject([
      {
        id,
        name: 'reporting script',
        scopes: ['usage:read', 'audit:read'],
        expires_at: '2030-06-01T00:00:00Z',
        state: 'active',
      },
    ]);
    // Shown once: a reload hides it for good.
    await page.reload();
    expect(await page.locator('[data-testid=api-key-value]').count()).toBe(0);
    expect(await page.content()).not.toContain(key);
    // The row's revoke button asks first; Cancel keeps the key.
    await page
      .locator(`[data-testid=api-key-row-${id}]`)
      .getByRole('button', { name: /Revoke/ })
      .click();
    await page.waitForSelector('[data-testid=api-key-revoke-confirm]');
    await page.getByRole('link', { name: 'Cancel' }).click();
    await page.waitForURL('**/console/account#api-keys');
    expect(await usage(d, key)).toBe(200);
    await page
      .locator(`[data-testid=api-key-row-${id}]`)
      .getByRole('button', { name: /Revoke/ })
      .click();
    await page.getByRole('button', { name: 'Confirm and revoke' }).click();
    await page.waitForURL('**/console/account#api-keys');
    expect(await page.textContent('[data-testid=flash]')).toContain('revoked');
    expect(await page.locator(`[data-testid=api-key-row-${id}]`).count()).toBe(0);
    expect(await usage(d, key)).toBe(401);
    await page.close();
  });

  it('refuses bad input with a message naming the field, making nothing', async () => {
    const email = await account();
    const page = await browser.newPage();
    await signIn(page, d.api, email, PASSWORD);
    const card = page.locator('[data-testid=api-keys-card]');
    // No scope ticked.
    await card.getByLabel('Name').fill('no scopes');
    await card.getByRole('button', { name: 'Make key' }).click();
    expect(await page.textContent('[data-testid=flash]')).toMatch(/not made\. Scopes: tick at least one/);
    // A bad source.
    await card.getByLabel('Name').fill('bad source');
    await card.locator('[data-testid="api-key-scope-users:read"]').check();
    await card.getByLabel('Works only from (optional)').fill('10.0.0.0/33');
    await card.getByRole('button', { name: 'Make key' }).click();
    expect(await page.textContent('[data-testid=flash]')).toMatch(
      /not made\. Works only from: "10\.0\.0\.0\/33" is not an IP address or CIDR/,
    );
    expect(await page.locator('[data-testid=api-key-value]').count()).toBe(0);
    expect(await keysOf(d, email)).toEqual([]);
    await page.close();
  });
});

describe('console API keys over HTTP: re-authentication, limits, audit', () => {
  let d: Daemon;
  beforeAll(async () => {
    d = await startDaemon();
  }, patient(60_000));
  afterAll(async () => d?.stop());

  async function signedIn(): Promise<{ c: ConsoleClient; email: string }> {
    const email = `http-keys${++seq}@example.com`;
    expect(
      (
        await admin(
          d.dataDir,
          ['account', 'create', '--email', email, '--password-stdin', '--verified'],
          `${PASSWORD}\n`,
        )
      ).code,
    ).toBe(0);
    const c = new ConsoleClient(d.api);
    expect((await c.login(email, PASSWORD)).location).toBe('/console/account');
    await c.get('/console/account');
    return { c, email };
  }

  async function ageAuthentication(minutes: number) {
    const db = await inspectDb(d.dataDir, { write: true });
    try {
      for (const row of db.all<{ sid: string; data: string }>(
        'SELECT sid, data FROM console_sessions WHERE account_id IS NOT NULL',
      )) {
        const data = JSON.parse(row.data) as { authAtMs?: number };
        if (data.authAtMs)
          db.run(
            'UPDATE console_sessions SET data = ? WHERE sid = ?',
            JSON.stringify({ ...data, authAtMs: data.authAtMs - minutes * 60_000 }),
            row.sid,
          );
      }
    } finally {
      db.close();
    }
  }

  it('an old sign-in asks for the password before making or revoking a key, then does that very action', async () => {
    const { c, email } = await signedIn();
    await ageAuthentication(11);
    let r = await c.post('/console/api-keys', { name: 'after sudo', scope_usage_read: '1' });
    expect(r.location).toBe('/console/confirm');
    expect(await keysOf(d, email)).toEqual([]);
    r = await c.get('/console/confirm');
    expect(r.body).toContain('Making an API key');
    r = await c.post('/console/confirm', { password: PASSWORD });
    expect(r.location).toBe('/console/account#api-keys');
    const page = (await c.get('/console/account')).body;
    const key = testid(page, 'api-key-value')!;
    expect(key).toMatch(/^pxk_/);
    expect(await usage(d, key)).toBe(200);
    const [made] = await keysOf(d, email);
    expect(made).toMatchObject({ name: 'after sudo', scopes: ['usage:read'] });

    await ageAuthentication(11);
    await c.get(`/console/api-keys/${made!.id}/revoke`);
    r = await c.post(`/console/api-keys/${made!.id}/revoke`, {});
    expect(r.location).toBe('/console/confirm');
    expect(await usage(d, key)).toBe(200);
    expect((await c.get('/console/confirm')).body).toContain('Revoking an API key');
    r = await c.post('/console/confirm', { password: PASSWORD });
    expect(r.location).toBe('/console/account#api-keys');
    expect(await usage(d, key)).toBe(401);

    // A form that names its scopes in one field (or repeats it) is read too.
    await c.post('/console/api-keys', { name: 'listed', scopes: 'audit:read,usage:read' });
    expect((await keysOf(d, email)).find((k) => k.name === 'listed')).toMatchObject({
      scopes: ['usage:read', 'audit:read'],
    });
    await c.get('/console/account');
    await c.post('/console/api-keys', { name: 'nonsense', scopes: 'usage:read,root' });
    expect(testid((await c.get('/console/account')).body, 'flash')).toMatch(/Scopes: unknown scope (&quot;|")root/);

    // Recorded, never with the key.
    const records = (await admin(d.dataDir, ['audit', '--email', email])).stdout;
    const actions = records
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { action: string; target: string; actor: { type: string } });
    expect(
      actions
        .filter((a) => a.action.startsWith('api_key.') && a.target === made!.id)
        .map((a) => [a.action, a.target, a.actor.type]),
    ).toEqual([
      ['api_key.created', made!.id, 'console'],
      ['api_key.revoked', made!.id, 'console'],
    ]);
    expect(records).not.toContain(key.split('_').slice(2).join('_'));
  });

  it("another account's key, an unknown id or a revoked one cannot be revoked; the 21st live key is refused", async () => {
    const a = await signedIn();
    const b = await signedIn();
    const other = await admin(d.dataDir, [
      'key',
      'create',
      '--email',
      b.email,
      '--name',
      'b',
      '--scopes',
      'usage:read',
    ]);
    expect((await a.c.get(`/console/api-keys/${other.json.id}/revoke`)).location).toBe('/console/account#api-keys');
    await a.c.get('/console/account');
    await a.c.post(`/console/api-keys/${other.json.id}/revoke`, {});
    expect(testid((await a.c.get('/console/account')).body, 'flash')).toMatch(/no such API key/);
    expect(await usage(d, other.json.key)).toBe(200);
    for (let i = 0; i < 20; i++)
      expect(
        (await admin(d.dataDir, ['key', 'create', '--email', a.email, '--name', `k${i}`, '--scopes', 'usage:read']))
          .code,
      ).toBe(0);
    await a.c.post('/console/api-keys', { name: 'twenty-first', scope_usage_read: '1' });
    expect(testid((await a.c.get('/console/account')).body, 'flash')).toMatch(/not made: you have 20 API keys/);
    expect(await keysOf(d, a.email)).toHaveLength(20);
  });
});
