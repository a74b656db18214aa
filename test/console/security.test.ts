// Console sessions, CSRF, log-in limits and headers, against the built daemon (run `npm run build` first).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, inspectDb, startDaemon, type Daemon } from '../helpers/daemon.js';
import { ConsoleClient, setCookieHeader } from './client.js';
import { patient } from '../helpers/patience.js';

const PASSWORD = 'correct horse battery';

let daemon: Daemon;
let seq = 0;

async function account(opts: { verified?: boolean } = {}): Promise<string> {
  const email = `user${++seq}@example.com`;
  const r = await admin(
    daemon.dataDir,
    ['account', 'create', '--email', email, '--password-stdin', ...(opts.verified === false ? [] : ['--verified'])],
    `${PASSWORD}\n`,
  );
  expect(r.code, r.stderr).toBe(0);
  return email;
}

async function signedIn(email: string, headers: Record<string, string> = {}): Promise<ConsoleClient> {
  const c = new ConsoleClient(daemon.api, headers);
  const r = await c.login(email, PASSWORD);
  expect(r.status).toBe(303);
  expect(r.location).toBe('/console/account');
  return c;
}

beforeAll(async () => {
  daemon = await startDaemon({ args: ['--trust-proxy', '127.0.0.1/32'] });
});
afterAll(async () => {
  await daemon?.stop();
});

describe('console sessions', () => {
  it('sets an HttpOnly, SameSite=Strict cookie on /console, Secure only over TLS', async () => {
    const email = await account();
    const c = new ConsoleClient(daemon.api);
    await c.get('/console/login');
    const r = await c.post('/console/login', { email, password: PASSWORD });
    const cookie = setCookieHeader(r)!;
    expect(cookie).toMatch(/HttpOnly/i);
    expect(cookie).toMatch(/SameSite=Strict/i);
    expect(cookie).toMatch(/Path=\/console/);
    expect(cookie).not.toMatch(/Secure/i);

    const tls = new ConsoleClient(daemon.api, { 'x-forwarded-proto': 'https' });
    await tls.get('/console/login');
    const r2 = await tls.post('/console/login', { email, password: PASSWORD });
    expect(setCookieHeader(r2)).toMatch(/;\s*Secure/i);
  });

  it('a visitor who has not logged in costs no database row, however often the log-in page is fetched; log-in still works', async () => {
    const db = await inspectDb(daemon.dataDir);
    const anonymousRows = () =>
      db.get<{ n: number }>('SELECT count(*) AS n FROM console_sessions WHERE account_id IS NULL').n;
    const before = anonymousRows();
    for (let i = 0; i < 40; i++) expect((await new ConsoleClient(daemon.api).get('/console/login')).status).toBe(200);
    const visitor = new ConsoleClient(daemon.api);
    await visitor.get('/console/login');
    await visitor.get('/console/login'); // the same visitor again, with its cookie
    await visitor.post('/console/login', { email: 'nobody@example.com', password: 'not the one' });
    expect(anonymousRows()).toBe(before);
    // The form still needs its own token: another visitor's, or none, is refused.
    const other = new ConsoleClient(daemon.api);
    await other.get('/console/login');
    const email = await account();
    expect((await other.post('/console/login', { email, password: PASSWORD }, { csrf: visitor.csrf! })).status).toBe(
      403,
    );
    expect((await other.post('/console/login', { email, password: PASSWORD }, { csrf: false })).status).toBe(403);
    const fresh = new ConsoleClient(daemon.api);
    expect((await fresh.post('/console/login', { email, password: PASSWORD }, { csrf: visitor.csrf! })).status).toBe(
      403,
    );
    expect((await other.login(email, PASSWORD)).status).toBe(303);
    expect((await other.get('/console/account')).status).toBe(200);
    db.close();
  });

  it('refuses a form post without its CSRF token (403), and with a wrong one', async () => {
    const c = await signedIn(await account());
    const page = await c.get('/console/whitelist');
    expect(page.status).toBe(200);
    const missing = await c.post('/console/whitelist/add', { ip: '8.8.8.8', remark: '' }, { csrf: false });
    expect(missing.status).toBe(403);
    expect(missing.headers.get('content-type')).toMatch(/text\/html/);
    expect(missing.body).toContain('This form has expired');
    const wrong = await c.post('/console/whitelist/add', { ip: '8.8.8.8', remark: '' }, { csrf: 'abc-not-a-token' });
    expect(wrong.status).toBe(403);
    // Nothing was added by either.
    const list = await c.get('/console/whitelist');
    expect(list.body).not.toContain('data-ip="8.8.8.8"');
    // The log-in form is protected as well.
    const anon = new ConsoleClient(daemon.api);
    await anon.get('/console/login');
    expect((await anon.post('/console/login', { email: 'x@example.com', password: 'y' }, { csrf: false })).status).toBe(
      403,
    );
    // Token reset too.
    expect((await c.post('/console/token', {}, { csrf: false })).status).toBe(403);
  });

  it("ends a suspended account's session at once, for good", async () => {
    const email = await account();
    const c = await signedIn(email);
    expect((await c.get('/console/account')).status).toBe(200);
    const oldCookie = c.cookie;
    const s = await admin(daemon.dataDir, ['account', 'set', '--email', email, '--status', 'suspended']);
    expect(s.code, s.stderr).toBe(0);
    const r = await c.get('/console/account');
    expect(r.status).toBe(303);
    expect(r.location).toBe('/console/login?notice=inactive');
    // Re-activating does not bring the session back: it was deleted server-side.
    await admin(daemon.dataDir, ['account', 'set', '--email', email, '--status', 'active']);
    const again = new ConsoleClient(daemon.api);
    again.cookie = oldCookie;
    const r2 = await again.get('/console/account');
    expect(r2.status).toBe(303);
    expect(r2.location).toBe('/console/login');
    // A suspended account cannot log in either (the right password says so).
    await admin(daemon.dataDir, ['account', 'set', '--email', email, '--status', 'suspended']);
    const fresh = new ConsoleClient(daemon.api);
    const r3 = await fresh.login(email, PASSWORD);
    expect(r3.status).toBe(403);
    expect(r3.body).toContain('suspended');
  });

  it('log out kills the cookie; log out everywhere and a password change end the other sessions', async () => {
    const email = await account();
    const a = await signedIn(email);
    const b = await signedIn(email);
    const cOld = await signedIn(email);
    await a.get('/console/account');
    const aCookie = a.cookie;
    const out = await a.post('/console/logout', {});
    expect(out.status).toBe(303);
    // Cleared with the attributes it was set with.
    const cleared = setCookieHeader(out)!;
    expect(cleared).toMatch(/HttpOnly/i);
    expect(cleared).toMatch(/SameSite=Strict/i);
    expect(cleared).toMatch(/Path=\/console/);
    expect(out.location).toBe('/console/login?notice=logged-out');
    const dead = new ConsoleClient(daemon.api);
    dead.cookie = aCookie;
    expect((await dead.get('/console/account')).location).toBe('/console/login');
    expect((await b.get('/console/account')).status).toBe(200);

    // Password change: b continues (under a new id), cOld is logged out.
    await b.get('/console/account');
    const changed = await b.post('/console/password', {
      current_password: PASSWORD,
      new_password: 'a much better passphrase',
    });
    expect(changed.status).toBe(303);
    const bPage = await b.get('/console/account');
    expect(bPage.status).toBe(200);
    expect(bPage.body).toContain('Your password has been changed');
    expect((await cOld.get('/console/account')).location).toBe('/console/login');
    const relog = new ConsoleClient(daemon.api);
    expect((await relog.login(email, PASSWORD)).status).toBe(401);
    expect((await relog.login(email, 'a much better passphrase')).status).toBe(303);

    // Log out everywhere ends both remaining sessions.
    await b.get('/console/account');
    expect((await b.post('/console/sessions/end-all', {})).location).toBe('/console/login?notice=ended-all');
    expect((await relog.get('/console/account')).location).toBe('/console/login');
  });

  it('a wrong password does not say which part was wrong', async () => {
    const email = await account();
    const c = new ConsoleClient(daemon.api);
    const wrongPw = await c.login(email, 'nope nope nope');
    const noUser = await c.login('nobody@example.com', 'nope nope nope');
    expect(wrongPw.status).toBe(401);
    expect(noUser.status).toBe(401);
    const msg = (b: string) => /data-testid="login-message"><p>([^<]*)</.exec(b)?.[1];
    expect(msg(wrongPw.body)).toBe('Wrong email or password.');
    expect(msg(noUser.body)).toBe(msg(wrongPw.body));
  });

  it('rate limits failed log-ins per account', async () => {
    const email = await account();
    const c = new ConsoleClient(daemon.api, { 'x-forwarded-for': '198.51.100.7' });
    for (let i = 0; i < 10; i++) expect((await c.login(email, `wrong ${i}`)).status).toBe(401);
    const blocked = await c.login(email, PASSWORD);
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(blocked.body).toContain('Too many failed log-in attempts');
    // Another account from another address is not affected.
    const other = new ConsoleClient(daemon.api, { 'x-forwarded-for': '198.51.100.8' });
    expect((await other.login(await account(), PASSWORD)).status).toBe(303);
  });

  it('guesses at the current password on the password form count as failed log-ins: blocked after the same 10', async () => {
    const email = await account();
    const c = await signedIn(email, { 'x-forwarded-for': '198.51.100.10' });
    for (let i = 0; i < 10; i++) {
      await c.get('/console/account');
      await c.post('/console/password', {
        current_password: `guess ${i} guess`,
        new_password: 'a much better passphrase',
      });
      expect((await c.get('/console/account')).body).toContain('The current password is wrong');
    }
    await c.get('/console/account');
    const blocked = await c.post('/console/password', {
      current_password: PASSWORD,
      new_password: 'a much better passphrase',
    });
    expect(blocked.status).toBe(303);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await c.get('/console/account')).body).toContain('Too many wrong passwords');
    // Not changed, and the log-in form is closed to that account too (one count).
    expect(
      (await new ConsoleClient(daemon.api, { 'x-forwarded-for': '198.51.100.11' }).login(email, PASSWORD)).status,
    ).toBe(429);
  });

  it('rate limits failed log-ins per source IP across accounts', async () => {
    const c = new ConsoleClient(daemon.api, { 'x-forwarded-for': '198.51.100.9' });
    for (let i = 0; i < 20; i++) expect((await c.login(`nobody${i}@example.com`, 'wrong')).status).toBe(401);
    expect((await c.login(await account(), PASSWORD)).status).toBe(429);
  });

  it('counts failed log-ins by source IP also when the balancer writes a port with it (ip:port)', async () => {
    const from = (port: number) => new ConsoleClient(daemon.api, { 'x-forwarded-for': `198.51.100.12:${port}` });
    for (let i = 0; i < 20; i++)
      expect((await from(40000 + i).login(`nobody-port${i}@example.com`, 'wrong')).status).toBe(401);
    expect((await from(41000).login(await account(), PASSWORD)).status).toBe(429);
  });

  it('counts failed log-ins of an IPv6 source by its /64 (one host holds the whole /64)', async () => {
    const from = (ip: string) => new ConsoleClient(daemon.api, { 'x-forwarded-for': ip });
    for (let i = 0; i < 20; i++)
      expect(
        (await from(`2001:db8:7:7::${(i + 1).toString(16)}`).login(`nobody-v6-${i}@example.com`, 'wrong')).status,
      ).toBe(401);
    expect((await from('2001:db8:7:7::ffff').login(await account(), PASSWORD)).status).toBe(429);
    expect((await from('2001:db8:7:8::1').login(await account(), PASSWORD)).status).toBe(303);
  });

  it('serves HTML with a strict CSP for every console answer, errors included', async () => {
    const anon = new ConsoleClient(daemon.api);
    const login = await anon.get('/console/login');
    expect(login.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(login.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(login.headers.get('referrer-policy')).toBe('no-referrer');
    expect(login.body).not.toMatch(/<script>|style="/);
    const missing = await anon.get('/console/nope');
    expect(missing.status).toBe(404);
    expect(missing.headers.get('content-type')).toMatch(/text\/html/);
    const signedOut = await anon.get('/console/whitelist');
    expect(signedOut.status).toBe(303);
    expect(signedOut.location).toBe('/console/login');
    const css = await anon.get('/console/assets/console.css');
    expect(css.status).toBe(200);
    expect(css.headers.get('content-type')).toMatch(/text\/css/);
    expect(css.headers.get('set-cookie')).toBeNull();
    // A malformed form body is an HTML error page, not JSON and not a 500.
    const c = await signedIn(await account());
    await c.get('/console/whitelist');
    const bad = await fetch(`${daemon.api}/console/whitelist/add`, {
      method: 'POST',
      headers: { cookie: c.cookie!, 'content-type': 'application/json' },
      body: '{"ip":',
    });
    expect(bad.status).toBeGreaterThanOrEqual(400);
    expect(bad.status).toBeLessThan(500);
    expect(bad.headers.get('content-type')).toMatch(/text\/html/);
  });

  it('shows the add failure when the account is not verified (10403), nothing added', async () => {
    const c = await signedIn(await account({ verified: false }));
    await c.get('/console/whitelist');
    const r = await c.post('/console/whitelist/add', { ip: '8.8.8.8', remark: '' });
    expect(r.status).toBe(303);
    const page = await c.get('/console/whitelist');
    expect(page.body).toContain('10403');
    expect(page.body).not.toContain('data-ip="8.8.8.8"');
  });

  it('never logs a password, a token or a session id', async () => {
    const joined = daemon.logs.join('\n');
    expect(joined).not.toContain(PASSWORD);
    expect(joined).not.toContain('a much better passphrase');
    expect(joined).not.toMatch(/proxyd_console=/);
  });
});

describe('console with several workers', () => {
  it(
    'shares sessions and the one-time token across workers (secret file in the data dir)',
    async () => {
      const d = await startDaemon({ args: ['--workers', '2'] });
      try {
        const r = await admin(
          d.dataDir,
          ['account', 'create', '--email', 'w@example.com', '--password-stdin', '--verified'],
          `${PASSWORD}\n`,
        );
        expect(r.code, r.stderr).toBe(0);
        for (let i = 0; i < 4; i++) {
          const c = new ConsoleClient(d.api);
          expect((await c.login('w@example.com', PASSWORD)).status).toBe(303);
          for (let j = 0; j < 4; j++) expect((await c.get('/console/account')).status).toBe(200);
          expect((await c.post('/console/token', {})).status).toBe(303);
          expect((await c.get('/console/account')).body).toContain('data-testid="api-token"');
        }
      } finally {
        await d.stop();
      }
    },
    patient(60_000),
  );
});
