// Account security in the console, over HTTP against the built daemon (run `npm run build` first): re-authentication
// before sensitive actions (then the very action goes on), TOTP refused on bad input (malformed codes, a secret from
// another browser's set-up, an expired set-up), a code accepted once, the lock after 5 wrong second factors, passkey
// answers refused before any signature (none asked for, another challenge, expired), the Activity page and its CSV
// (the account's own records only), `proxyd admin account reset-2fa`, and `audit verify` exiting 1 on a tampered row.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { base32Decode, hotp, totpStep } from '../../src/daemon/services/totp.js';
import { admin, inspectDb, startDaemon, type Daemon } from '../helpers/daemon.js';
import { ConsoleClient, nextTotpCode as next, testid } from './client.js';

const PASSWORD = 'correct horse battery';
let daemon: Daemon;
let seq = 0;

beforeAll(async () => {
  daemon = await startDaemon({ args: ['--trust-proxy', '127.0.0.1/32'] });
});
afterAll(async () => {
  await daemon?.stop();
});

async function account(): Promise<string> {
  const email = `sec${++seq}@example.com`;
  const r = await admin(
    daemon.dataDir,
    ['account', 'create', '--email', email, '--password-stdin', '--verified'],
    `${PASSWORD}\n`,
  );
  expect(r.code, r.stderr).toBe(0);
  return email;
}

async function signedIn(email: string): Promise<ConsoleClient> {
  const c = new ConsoleClient(daemon.api);
  const r = await c.login(email, PASSWORD);
  expect(r.location).toBe('/console/account');
  await c.get('/console/account'); // the signed-in session's CSRF token
  return c;
}

/** Turns TOTP on from the page's secret; the secret, the recovery codes and the steps used. */
async function enableTotp(c: ConsoleClient) {
  await c.post('/console/2fa/totp/start', {});
  const page = (await c.get('/console/account')).body;
  const secret = testid(page, 'totp-secret')!.replace(/\s/g, '');
  const nonce = /name="enroll" value="([^"]+)"/.exec(page)![1]!;
  const used = { step: totpStep(Date.now()) - 2 };
  const r = await c.post('/console/2fa/totp/enable', { enroll: nonce, code: next(secret, used) });
  expect(r.location).toBe('/console/account#two-factor');
  const codes = [...(await c.get('/console/account')).body.matchAll(/<li><code>([a-z2-7-]+)<\/code><\/li>/g)].map(
    (m) => m[1]!,
  );
  expect(codes).toHaveLength(10);
  return { secret, codes, used };
}

/** Makes the session's last authentication `minutes` old, as time passing would. */
async function ageAuthentication(minutes: number) {
  const db = await inspectDb(daemon.dataDir, { write: true });
  try {
    for (const row of db.all<{ sid: string; data: string }>(
      'SELECT sid, data FROM console_sessions WHERE account_id IS NOT NULL',
    )) {
      const d = JSON.parse(row.data) as { authAtMs?: number };
      if (d.authAtMs)
        db.run(
          'UPDATE console_sessions SET data = ? WHERE sid = ?',
          JSON.stringify({ ...d, authAtMs: d.authAtMs - minutes * 60_000 }),
          row.sid,
        );
    }
  } finally {
    db.close();
  }
}

async function auditActions(email: string): Promise<string[]> {
  const r = await admin(daemon.dataDir, ['audit', '--email', email]);
  return r.stdout
    .split('\n')
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as { action: string }).action);
}

describe('re-authentication before sensitive actions', () => {
  it('an old sign-in asks for the password again, refuses a wrong one, then carries out the very action', async () => {
    const email = await account();
    const c = await signedIn(email);
    await ageAuthentication(11);
    await c.get('/console/token/confirm');
    let r = await c.post('/console/token', {});
    expect(r.location).toBe('/console/confirm');
    r = await c.get('/console/confirm');
    expect(r.body).toContain('Making a new API token');
    expect(r.body).toContain('name="password"');
    r = await c.post('/console/confirm', { password: 'not it at all' });
    expect(r.status).toBe(401);
    expect(testid(r.body, 'confirm-message')).toContain('wrong');
    expect(await auditActions(email)).not.toContain('token.reset');
    r = await c.post('/console/confirm', { password: PASSWORD });
    expect(r.location).toBe('/console/account');
    expect(testid((await c.get('/console/account')).body, 'api-token')).toMatch(/^ak/);
    expect(await auditActions(email)).toContain('token.reset');
    // Within the window now: no second prompt.
    await c.get('/console/account');
    expect((await c.post('/console/webhook/remove', {})).location).toBe('/console/account');
  });

  it("with a second factor on: the password, then a code; the form's fields are kept (the email change goes through)", async () => {
    const email = await account();
    const c = await signedIn(email);
    const { secret, used } = await enableTotp(c);
    await ageAuthentication(11);
    let r = await c.post('/console/email', { email: `moved-${email}` });
    expect(r.location).toBe('/console/confirm');
    await c.get('/console/confirm');
    r = await c.post('/console/confirm', { password: PASSWORD });
    expect(r.status).toBe(200);
    expect(r.body).toContain('data-testid="second-factor-code"');
    expect(r.body).not.toContain('name="password"');
    r = await c.post('/console/confirm', { code: next(secret, used) });
    expect(r.location).toBe('/console/account');
    expect(testid((await c.get('/console/account')).body, 'account-email')).toBe(`moved-${email}`);
  });
});

describe('TOTP', () => {
  it("bad input turns nothing on: a malformed code, a code for another browser's secret, another browser's form, an expired set-up", async () => {
    const email = await account();
    const a = await signedIn(email);
    const b = await signedIn(email);
    await a.post('/console/2fa/totp/start', {});
    const pageA = (await a.get('/console/account')).body;
    const secretA = testid(pageA, 'totp-secret')!.replace(/\s/g, '');
    const nonceA = /name="enroll" value="([^"]+)"/.exec(pageA)![1]!;
    await b.post('/console/2fa/totp/start', {});
    const pageB = (await b.get('/console/account')).body;
    const nonceB = /name="enroll" value="([^"]+)"/.exec(pageB)![1]!;
    const codeA = hotp(base32Decode(secretA)!, totpStep(Date.now()));

    const flash = async (c: ConsoleClient) => testid((await c.get('/console/account')).body, 'flash');
    await b.post('/console/2fa/totp/enable', { enroll: nonceB, code: '12 34' });
    expect(await flash(b)).toContain('Enter the 6-digit code');
    await b.post('/console/2fa/totp/enable', { enroll: nonceB, code: codeA });
    expect(await flash(b)).toContain('does not match the secret shown in this browser');
    await b.post('/console/2fa/totp/enable', { enroll: nonceA, code: codeA });
    expect(await flash(b)).toContain('started in another browser or has expired');
    // A's own set-up, expired.
    const db = await inspectDb(daemon.dataDir, { write: true });
    for (const row of db.all<{ sid: string; data: string }>(
      "SELECT sid, data FROM console_sessions WHERE data LIKE '%enrollTotp%'",
    )) {
      const d = JSON.parse(row.data) as { enrollTotp: { expiresAtMs: number } };
      d.enrollTotp.expiresAtMs = Date.now() - 1;
      db.run('UPDATE console_sessions SET data = ? WHERE sid = ?', JSON.stringify(d), row.sid);
    }
    db.close();
    await a.post('/console/2fa/totp/enable', { enroll: nonceA, code: codeA });
    expect(await flash(a)).toContain('started in another browser or has expired');
    expect(testid((await a.get('/console/account')).body, 'two-factor-state')).toBe('Off');
    expect(await auditActions(email)).not.toContain('2fa.enabled');
  });

  it('a code is accepted once; 5 wrong second factors lock the second step for 15 min, saying until when', async () => {
    const email = await account();
    const c = await signedIn(email);
    const { secret, used } = await enableTotp(c);
    const login = async () => {
      const x = new ConsoleClient(daemon.api);
      await x.get('/console/login');
      expect((await x.post('/console/login', { email, password: PASSWORD })).location).toBe('/console/login/2fa');
      await x.get('/console/login/2fa');
      return x;
    };
    const code = next(secret, used);
    const first = await login();
    expect((await first.post('/console/login/2fa', { code })).location).toBe('/console/account');
    const replay = await login();
    let r = await replay.post('/console/login/2fa', { code });
    expect(r.status).toBe(401);
    expect(testid(r.body, 'login-message')).toContain('used already');
    // Malformed is not counted; wrong ones are (the replay above was the first).
    r = await replay.post('/console/login/2fa', { code: 'abc' });
    expect(testid(r.body, 'login-message')).toContain('Enter the 6-digit code');
    for (let i = 0; i < 3; i++) expect((await replay.post('/console/login/2fa', { code: '000000' })).status).toBe(401);
    r = await replay.post('/console/login/2fa', { code: '000000' });
    expect(testid(r.body, 'login-message')).toMatch(/locked until (\d{4}-\d{2}-\d{2} )?\d{2}:\d{2} UTC/);
    // Locked: even a right code is refused, with the time.
    r = await replay.post('/console/login/2fa', { code: next(secret, used) });
    expect(r.status).toBe(429);
    const until = /locked until (?:(\d{4}-\d{2}-\d{2}) )?(\d{2}):(\d{2}) UTC/.exec(testid(r.body, 'login-message')!)!;
    const lockEnds = new Date(`${until[1] ?? new Date().toISOString().slice(0, 10)}T${until[2]}:${until[3]}:00Z`);
    expect(Math.abs(lockEnds.getTime() - (Date.now() + 15 * 60_000))).toBeLessThan(2 * 60_000);
    expect((await auditActions(email)).filter((a) => a === 'console.login_failed')).toHaveLength(5);
  });

  it('proxyd admin account reset-2fa turns it off, recorded; verify then exits 1 after a record is edited', async () => {
    const email = await account();
    const c = await signedIn(email);
    await enableTotp(c);
    const r = await admin(daemon.dataDir, ['account', 'reset-2fa', '--email', email]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.json).toEqual({ email, second_factor: 'off', was_on: true });
    expect((await auditActions(email)).at(-1)).toBe('2fa.reset');
    const x = new ConsoleClient(daemon.api);
    expect((await x.login(email, PASSWORD)).location).toBe('/console/account');

    expect((await admin(daemon.dataDir, ['audit', 'verify'])).code).toBe(0);
    const db = await inspectDb(daemon.dataDir, { write: true });
    const row = db.get<{ id: number; seq: number }>(
      "SELECT id, seq FROM audit_log WHERE action = '2fa.reset' ORDER BY id DESC LIMIT 1",
    );
    db.run("UPDATE audit_log SET source_ip = '203.0.113.1' WHERE id = ?", row.id);
    db.close();
    const v = await admin(daemon.dataDir, ['audit', 'verify']);
    expect(v.code).toBe(1);
    expect(v.stderr).toContain(`record ${row.id} (seq ${row.seq})`);
    expect(v.stderr).toContain('edited');
    expect(v.json).toMatchObject({ ok: false, broken: { record_id: row.id, problem: 'edited' } });
    const fix = await inspectDb(daemon.dataDir, { write: true });
    fix.run('UPDATE audit_log SET source_ip = NULL WHERE id = ?', row.id);
    fix.close();
    expect((await admin(daemon.dataDir, ['audit', 'verify'])).code).toBe(0);

    // The head to keep elsewhere, checked later; the log filtered by a family; an unknown action refused.
    const head = await admin(daemon.dataDir, ['audit', 'head', '--email', email]);
    expect(head.code, head.stderr).toBe(0);
    expect(head.json).toMatchObject({ account: email, anchor_seq: 0 });
    expect(head.json.seq).toBeGreaterThan(row.seq); // the log-in after the reset came after it
    expect(head.json.hash).toMatch(/^[0-9a-f]{64}$/);
    const kept = `${daemon.dataDir}/heads.jsonl`;
    (await import('node:fs')).writeFileSync(kept, head.stdout);
    const withHeads = await admin(daemon.dataDir, ['audit', 'verify', '--heads', kept]);
    expect(withHeads.code, withHeads.stderr).toBe(0);
    const family = await admin(daemon.dataDir, ['audit', '--email', email, '--action', '2fa']);
    expect(
      family.stdout
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { action: string }).action),
    ).toEqual(['2fa.enabled', '2fa.reset']);
    const unknown = await admin(daemon.dataDir, ['audit', '--action', 'nope']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('--action: no action "nope"');
  });
});

describe('passkey answers refused before any signature is looked at', () => {
  const fake = (challenge: string) => ({
    id: 'AAAA',
    rawId: 'AAAA',
    type: 'public-key',
    response: {
      clientDataJSON: Buffer.from(
        JSON.stringify({ type: 'webauthn.create', challenge, origin: 'http://localhost' }),
      ).toString('base64url'),
      attestationObject: 'AAAA',
    },
  });
  const postJson = async (c: ConsoleClient, path: string, body: object) => {
    const res = await fetch(`${daemon.api}${path}`, {
      method: 'POST',
      headers: { cookie: c.cookie!, 'content-type': 'application/json' },
      body: JSON.stringify({ _csrf: c.csrf, ...body }),
    });
    return { status: res.status, body: (await res.json()) as { message?: string; challenge?: string } };
  };

  it('none asked for, one for another challenge, a malformed one, an expired one: a clear message, nothing added', async () => {
    const email = await account();
    const c = await signedIn(email);
    await c.get('/console/account');
    let r = await postJson(c, '/console/2fa/passkey/register', { response: fake('x') });
    expect(r).toMatchObject({ status: 400, body: { message: expect.stringContaining('No passkey request is open') } });
    const opts = await postJson(c, '/console/2fa/passkey/options', {});
    expect(opts.body.challenge).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    r = await postJson(c, '/console/2fa/passkey/register', { response: fake('another-challenge') });
    expect(r).toMatchObject({ status: 400, body: { message: expect.stringContaining('for another request') } });
    await postJson(c, '/console/2fa/passkey/options', {});
    r = await postJson(c, '/console/2fa/passkey/register', { response: { id: 5 } });
    expect(r).toMatchObject({ status: 400, body: { message: expect.stringContaining('malformed') } });
    const fresh = await postJson(c, '/console/2fa/passkey/options', {});
    const db = await inspectDb(daemon.dataDir, { write: true });
    for (const row of db.all<{ sid: string; data: string }>(
      "SELECT sid, data FROM console_sessions WHERE data LIKE '%webauthn%'",
    )) {
      const d = JSON.parse(row.data) as { webauthn: { expiresAtMs: number } };
      d.webauthn.expiresAtMs = Date.now() - 1;
      db.run('UPDATE console_sessions SET data = ? WHERE sid = ?', JSON.stringify(d), row.sid);
    }
    db.close();
    r = await postJson(c, '/console/2fa/passkey/register', { response: fake(fresh.body.challenge!) });
    expect(r).toMatchObject({ status: 400, body: { message: expect.stringContaining('expired') } });
    expect(testid((await c.get('/console/account')).body, 'two-factor-state')).toBe('Off');
    expect(await auditActions(email)).not.toContain('2fa.passkey_added');
  });
});

describe('Activity page', () => {
  it("lists the account's own records with filters and a CSV; another account's never", async () => {
    const email = await account();
    const other = await account();
    const c = await signedIn(email);
    const o = await signedIn(other);
    await o.get('/console/whitelist');
    await o.post('/console/whitelist/add', { ip: '4.4.4.4', remark: '' });
    await c.get('/console/whitelist');
    await c.post('/console/whitelist/add', { ip: '5.5.5.5', remark: '' });
    let r = await c.get('/console/activity');
    expect(r.status).toBe(200);
    expect(r.body).toContain('data-action="whitelist.added"');
    expect(r.body).toContain('5.5.5.5');
    expect(r.body).not.toContain('4.4.4.4');
    r = await c.get('/console/activity?action=whitelist');
    expect([...r.body.matchAll(/data-testid="audit-row" data-action="([^"]+)"/g)].map((m) => m[1])).toEqual([
      'whitelist.added',
    ]);
    r = await c.get('/console/activity?action=nope');
    expect(testid(r.body, 'audit-filter-error')).toContain('no action &quot;nope&quot;');
    const today = new Date().toISOString().slice(0, 10);
    r = await c.get(`/console/activity?from=2020-01-01&to=2020-01-02`);
    expect(r.body).toContain('data-testid="audit-empty"');
    const csv = await c.get(`/console/activity.csv?from=${today}`);
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toContain('text/csv');
    expect(csv.headers.get('content-disposition')).toContain('attachment');
    const lines = csv.body.trim().split('\r\n');
    expect(lines[0]).toBe('time,action,actor_type,actor_id,source_ip,request_id,target,details,id,seq,hash');
    expect(lines.some((l) => l.includes('whitelist.added') && l.includes('5.5.5.5'))).toBe(true);
    expect(csv.body).not.toContain('4.4.4.4');
    expect((await c.get('/console/activity.csv?from=bad')).status).toBe(400);
  });
});
