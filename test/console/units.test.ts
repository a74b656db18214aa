// Pure pieces of the console: HTML escaping, byte sizes, the session table, the log-in limiter, the one-time secret seal.
import { afterEach, describe, expect, it } from 'vitest';
import { escapeHtml, html, raw } from '../../src/daemon/console/html.js';
import { usagePage } from '../../src/daemon/console/pages/usage.js';
import { connectionsPage } from '../../src/daemon/console/pages/connections.js';
import { connectionJson } from '../../src/daemon/services/connection-log.js';
import { LoginLimiter } from '../../src/daemon/console/login-limiter.js';
import { whitelistPage } from '../../src/daemon/console/pages/whitelist.js';
import { proxyUsersPage } from '../../src/daemon/console/pages/proxy-users.js';
import { lastPage, pager } from '../../src/daemon/console/layout.js';
import { loadSessionSecret, RevealSealer } from '../../src/daemon/console/session.js';
import { openStore, type Store } from '../../src/daemon/store/index.js';
import { hashPassword } from '../../src/daemon/secrets.js';
import { statSync } from 'node:fs';
import path from 'node:path';
import { tempDir } from '../helpers/daemon.js';

describe('html template', () => {
  it('escapes every interpolated value, keeps Html as is', () => {
    const evil = `<script>alert("x")</script>&'`;
    expect(html`<p title="${evil}">${evil}</p>`.value).toBe(
      '<p title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;</p>',
    );
    expect(html`<ul>${['a<', 'b'].map((x) => html`<li>${x}</li>`)}</ul>`.value).toBe(
      '<ul><li>a&lt;</li><li>b</li></ul>',
    );
    expect(html`${raw('<b>ok</b>')}${null}${undefined}${false}${0}`.value).toBe('<b>ok</b>0');
  });

  it("has one escaper, and it escapes ' too", () => {
    expect(escapeHtml(`<a href='x' title="y">&`)).toBe('&lt;a href=&#39;x&#39; title=&quot;y&quot;&gt;&amp;');
    // Control characters from elsewhere (a remark) show as escapes: no NUL in a page, no reordering by U+202E.
    expect(escapeHtml('a\u0000b\u202etxt.exe\u0007')).toBe('a\\u{0}b\\u{202e}txt.exe\\u{7}');
    // The plain right-to-left marks stay (a Hebrew or Arabic remark uses them).
    expect(escapeHtml('\u05e9\u200f\u0627\u061c')).toBe('\u05e9\u200f\u0627\u061c');
    // Tab and line breaks stay (a textarea's lines).
    expect(escapeHtml('one\ntwo\r\n\tthree')).toBe('one\ntwo\r\n\tthree');
  });

  it('writes a size the same way on the Usage and the Connections page (one formatter: "50 GiB", not "50.0 GiB")', () => {
    const GIB50 = 50 * 2 ** 30;
    const totals = { bytes_up: GIB50, bytes_down: 0, connections: 1 };
    const usage = usagePage({
      csrf: 't',
      email: 'a@example.com',
      periodLabel: 'This month',
      limit: 'No limit',
      byUser: { rows: [{ user: 'alice', ...totals }], total: totals },
      hours: { rows: [], total: totals },
      days: { rows: [], total: totals },
      domains: {
        domains: [{ domain: '<b>x</b>.example', ...totals }],
        other: { bytes_up: 1536, bytes_down: 0, connections: 1 },
      },
      hourStarts: [0],
      dayStarts: [0],
    }).value;
    const conns = connectionsPage({
      csrf: 't',
      email: 'a@example.com',
      filter: { user: '', ip: '', decision: '', reason: '' },
      rows: [
        {
          time: '2026-11-25T10:00:00.000Z',
          request_id: 'r1',
          protocol: 'connect',
          source_ip: '203.0.113.7',
          username: 'alice',
          target: 'example.com:443',
          decision: 'admitted',
          reason: null,
          bytes_up: GIB50,
          bytes_down: 1536,
          duration_ms: 5,
        },
      ],
      limit: 200,
      reasons: [],
    }).value;
    expect(usage).toContain('>50 GiB<');
    // The Top domains card: the same formatter, a domain as text.
    expect(usage).toMatch(/data-testid="usage-domain-total">50 GiB</);
    expect(usage).toMatch(/data-testid="usage-domain-other"[\s\S]*>1\.5 KiB</);
    expect(usage).toContain('&lt;b&gt;x&lt;/b&gt;.example');
    expect(conns).toContain('↑ 50 GiB ↓ 1.5 KiB');
    for (const page of [usage, conns]) expect(page).not.toMatch(/50\.0+ GiB/);
  });

  it('shows a record\'s time as "2026-11-25 10:00:00 UTC" whether it started on a whole second or not', () => {
    const record = (startedAt: number) =>
      connectionJson({
        id: 1,
        node: 'n',
        accountEmail: 'a@example.com',
        startedAt,
        requestId: `r${startedAt}`,
        protocol: 'connect',
        sourceIp: '203.0.113.7',
        username: 'alice',
        accountId: 1,
        target: 'example.com:443',
        reason: null,
        bytesUp: 1,
        bytesDown: 1,
        durationMs: 5,
      });
    const at = Date.UTC(2026, 10, 25, 10, 0, 0);
    const page = connectionsPage({
      csrf: 't',
      email: 'a@example.com',
      filter: { user: '', ip: '', decision: '', reason: '' },
      rows: [record(at), record(at + 112)],
      limit: 200,
      reasons: [],
    }).value;
    expect([...page.matchAll(/<time datetime="([^"]+)">([^<]+)<\/time>/g)].map((m) => [m[1], m[2]])).toEqual([
      ['2026-11-25T10:00:00Z', '2026-11-25 10:00:00 UTC'],
      ['2026-11-25T10:00:00.112Z', '2026-11-25 10:00:00 UTC'],
    ]);
  });

  /** The Proxy users page of one user, `crawler`, with these limits (none when absent). */
  const crawlerPage = (trafficLimit?: number) =>
    proxyUsersPage({
      csrf: 't',
      email: 'a@example.com',
      users: [{ id: 1, account_id: 1, username: 'crawler', status: 'active', created_at: 0 }],
      total: 1,
      page: 1,
      pageSize: 50,
      limits: new Map(
        trafficLimit === undefined
          ? []
          : [['crawler', { accountId: 1, username: 'crawler', trafficLimit, maxConnections: null }]],
      ),
      revealed: null,
    }).value;

  it("shows a user's own expiry and target rules (set with the API), and says when it has expired", () => {
    const page = (expiresAt: number | null, allow: string[], deny: string[]) =>
      proxyUsersPage({
        csrf: 't',
        email: 'a@example.com',
        users: [{ id: 1, account_id: 1, username: 'crawler', status: 'active', created_at: 0 }],
        total: 1,
        page: 1,
        pageSize: 50,
        limits: new Map([
          [
            'crawler',
            { accountId: 1, username: 'crawler', trafficLimit: null, maxConnections: null, expiresAt, allow, deny },
          ],
        ]),
        revealed: null,
        nowMs: Date.UTC(2026, 10, 25),
      }).value;
    const set = page(Date.UTC(2026, 11, 1, 12), ['example.com'], ['*.ads.example', '192.0.2.0/24']);
    expect(set).toMatch(
      /data-testid="user-expires"><time datetime="2026-12-01T12:00:00.000Z">2026-12-01 12:00 UTC<\/time><\/dd>/,
    );
    expect(set).toMatch(/data-testid="user-allow"><code[^>]*>example.com<\/code>/);
    expect(set).toMatch(/data-testid="user-deny"><code[^>]*>\*.ads.example, 192.0.2.0\/24<\/code>/);
    expect(set).not.toContain('user-expired');
    expect(page(Date.UTC(2026, 10, 1), [], [])).toContain('data-testid="user-expired">Expired');
    const none = crawlerPage();
    expect(none).toMatch(/data-testid="user-expires"><span class="muted">never/);
    expect(none).toMatch(/data-testid="user-deny"><span class="muted">none of its own/);
  });

  it('the proxy-user limits form shows a limit exactly (saved unchanged, it stays to the byte)', () => {
    // 310,000 bytes was shown as "302.73KiB", which saved back unchanged became 309,996.
    expect(crawlerPage(310_000)).toContain('name="traffic_limit" value="310kB"');
  });

  it('the proxy-user limits form says what each field takes, in text on the page (not only in aria-labels)', () => {
    const page = crawlerPage();
    const visible = page.replace(/aria-label="[^"]*"/g, '');
    expect(visible).toMatch(/data-testid="limit-format">[^<]*50GiB/);
    expect(visible).toMatch(/data-testid="limit-format">[^<]*10mbit/);
    expect(page).not.toContain('placeholder="none"');
    expect(page).toContain('placeholder="no limit"');
  });

  it("the Top domains' share is of all the period's traffic, not of the largest domain", () => {
    const t = (n: number) => ({ bytes_up: n, bytes_down: 0, connections: 1 });
    const page = usagePage({
      csrf: 't',
      email: 'a@example.com',
      periodLabel: 'This month',
      limit: 'No limit',
      byUser: { rows: [], total: t(0) },
      hours: { rows: [], total: t(0) },
      days: { rows: [], total: t(0) },
      // 600 + 300 + 100 (other) = 1,000: the largest domain is 60 % of it, not a full bar.
      domains: {
        domains: [
          { domain: 'big.example', ...t(600) },
          { domain: 'small.example', ...t(300) },
        ],
        other: t(100),
      },
      hourStarts: [0],
      dayStarts: [0],
    }).value;
    const meters = [...page.matchAll(/<meter min="0" max="(\d+)" value="(\d+)"/g)].map((m) => [
      Number(m[1]),
      Number(m[2]),
    ]);
    expect(meters).toEqual([
      [1000, 600],
      [1000, 300],
      [1000, 100],
    ]);
    expect([...page.matchAll(/data-testid="usage-domain-share">([^<]+)</g)].map((m) => m[1])).toEqual([
      '60 %',
      '30 %',
      '10 %',
    ]);
  });

  it('the pager: the range shown and previous/next links; nothing when one page holds all', () => {
    const href = (p: number) => `/x?page=${p}`;
    expect(pager(1, 20, 20, href)).toBe('');
    const mid = String(pager(2, 20, 45, href));
    expect(mid).toContain('Showing 21–40 of 45');
    expect(mid).toContain('href="/x?page=1" rel="prev"');
    expect(mid).toContain('href="/x?page=3" rel="next"');
    const end = String(pager(3, 20, 45, href));
    expect(end).toContain('Showing 41–45 of 45');
    expect(end).not.toContain('rel="next"');
    expect(lastPage(0, 20)).toBe(1);
    expect(lastPage(45, 20)).toBe(3);
  });

  it('renders a remark with markup as text on the whitelist page', () => {
    const page = whitelistPage({
      csrf: 't',
      email: 'a@example.com',
      verified: true,
      filter: { status: 'all', ip: '', page: 1 },
      items: [
        {
          whitelist_id: 1,
          ip: '8.8.8.8',
          remark: '<img src=x onerror=alert(1)>',
          status: 1,
          created_at: '2026-11-21T10:00:00Z',
        },
      ],
      total: 1,
      pageSize: 20,
    }).value;
    expect(page).not.toContain('<img src=x');
    expect(page).toContain('&lt;img src=x onerror=alert(1)&gt;');
  });
});

describe('console session table', () => {
  const stores: Store[] = [];
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close();
  });

  it('stores, expires, and ends sessions per account', async () => {
    let now = 1_000_000;
    const store = await openStore({ dataDir: tempDir(), nowMs: () => now * 1000 });
    stores.push(store);
    const a = await store.accounts.create('a@example.com', await hashPassword('pw pw pw pw'), true);
    const b = await store.accounts.create('b@example.com', await hashPassword('pw pw pw pw'), true);
    if (a === 'exists' || b === 'exists') throw new Error('setup');
    const s = store.sessions;
    await s.set('s1', { accountId: a.id, data: '{"x":1}', expiresAtSec: now + 100 });
    await s.set('s2', { accountId: a.id, data: '{}', expiresAtSec: now + 100 });
    await s.set('s3', { accountId: b.id, data: '{}', expiresAtSec: now + 100 });
    await s.set('anon', { accountId: null, data: '{}', expiresAtSec: now + 10 });
    expect(await s.get('s1')).toEqual({ accountId: a.id, data: '{"x":1}', expiresAtSec: now + 100 });
    expect(await s.countForAccount(a.id)).toBe(2);
    expect(await s.destroyOthers(a.id, 's1')).toBe(1);
    expect(await s.get('s2')).toBeNull();
    expect(await s.destroyForAccount(a.id)).toBe(1);
    expect(await s.get('s1')).toBeNull();
    expect(await s.get('s3')).not.toBeNull();
    now += 11;
    expect(await s.get('anon')).toBeNull();
    now += 100;
    expect(await s.pruneExpired()).toBe(1);
    expect(await s.get('s3')).toBeNull();
  });
});

describe('log-in limiter', () => {
  it('blocks an account after 10 failures and a source IP after 20, for a rolling 15 minutes', () => {
    let now = 0;
    const l = new LoginLimiter(undefined, () => now);
    const k = LoginLimiter.keys('A@Example.com ', '192.0.2.1');
    expect(k.account).toBe('account:a@example.com');
    for (let i = 0; i < 10; i++) {
      expect(l.retryAfterSec(k)).toBe(0);
      l.recordFailure(k);
      now += 1000;
    }
    expect(l.retryAfterSec(k)).toBe(15 * 60 - 10);
    now = 15 * 60 * 1000 + 1;
    expect(l.retryAfterSec(k)).toBe(0);
    for (let i = 0; i < 20; i++) l.recordFailure(LoginLimiter.keys(`u${i}@example.com`, '192.0.2.2'));
    expect(l.retryAfterSec(LoginLimiter.keys('other@example.com', '192.0.2.2'))).toBeGreaterThan(0);
    expect(l.retryAfterSec(LoginLimiter.keys('other@example.com', '192.0.2.3'))).toBe(0);
    l.close();
  });
});

describe('session secret and one-time secrets', () => {
  it('keeps one secret per data dir in a 0600 file', () => {
    const dir = tempDir();
    const dbFile = path.join(dir, 'proxyd.db');
    const s1 = loadSessionSecret(dbFile);
    expect(s1.length).toBeGreaterThanOrEqual(32);
    expect(loadSessionSecret(dbFile)).toBe(s1);
    expect(statSync(path.join(dir, 'console-session.key')).mode & 0o777).toBe(0o600);
  });

  it('seals a token so the session row never holds it in clear text', () => {
    const sealer = new RevealSealer('x'.repeat(40));
    const sealed = sealer.seal('akabc.secret-part');
    expect(sealed).not.toContain('secret-part');
    expect(sealer.open(sealed)).toBe('akabc.secret-part');
    expect(new RevealSealer('y'.repeat(40)).open(sealed)).toBeNull();
    expect(sealer.open('garbage')).toBeNull();
  });
});
