// Every account-changing action leaves exactly one audit record with the right actor type, source IP and request
// id, from the console, the API token and `proxyd admin`, on each backend; and no secret the test made (passwords,
// the token, proxy passwords, the TOTP secret, recovery codes, the webhook secret) is in any record or log line.
// Against the built daemon (run `npm run build` first).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, PROXYD, run, startDaemon, type Daemon } from '../helpers/daemon.js';
import { BACKENDS } from '../helpers/postgres.js';
import { ConsoleClient, nextTotpCode, testid, type Page } from './client.js';

const PASSWORD = 'correct horse battery';
const NEW_PASSWORD = 'another horse, stapled';
const SOURCE = '198.51.100.23';
const API_SOURCE = '198.51.100.77';

interface AuditLine {
  id: number;
  account: string;
  actor: { type: string; id: string | null };
  source_ip: string | null;
  request_id: string | null;
  action: string;
  target: string | null;
  details: Record<string, unknown>;
}

describe.each(BACKENDS)('audit records of every action, on %s', (backend) => {
  let daemon: Daemon;
  const secrets: string[] = [PASSWORD, NEW_PASSWORD];
  let email = `actions-${backend}@example.com`;
  let seen = 0;

  beforeAll(async () => {
    daemon = await startDaemon({ backend, args: ['--trust-proxy', '127.0.0.1/32', '--allow-private-webhooks'] });
  });
  afterAll(async () => {
    await daemon?.stop();
  });

  const records = async (): Promise<AuditLine[]> => {
    const r = await admin(daemon.dataDir, ['audit', '--email', email]);
    expect(r.code, r.stderr).toBe(0);
    return r.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as AuditLine);
  };
  /** The records written since the last call: exactly `actions`, in order. */
  const fresh = async (...actions: string[]): Promise<AuditLine[]> => {
    const all = await records();
    const out = all.slice(seen);
    seen = all.length;
    expect(out.map((r) => r.action)).toEqual(actions);
    return out;
  };
  const fromConsole = (r: AuditLine, page: Page) => {
    expect(r).toMatchObject({
      actor: { type: 'console' },
      source_ip: SOURCE,
      request_id: page.headers.get('x-request-id'),
    });
    expect(r.actor.id).toMatch(/^[0-9a-f]{16}$/);
  };
  const fromOperator = (r: AuditLine) => {
    expect(r.actor.type).toBe('operator');
    expect(r.source_ip).toBeNull();
    expect(r.request_id).toMatch(/^[0-9a-f-]{36}$/);
  };

  it('console, API token and operator actions each leave one record; none holds a secret', async () => {
    // Operator: the account is made (its chain's first record).
    expect(
      (
        await admin(
          daemon.dataDir,
          ['account', 'create', '--email', email, '--password-stdin', '--verified'],
          `${PASSWORD}\n`,
        )
      ).code,
    ).toBe(0);
    fromOperator((await fresh('account.created'))[0]!);

    const c = new ConsoleClient(daemon.api, { 'x-forwarded-for': SOURCE });
    await c.get('/console/login');
    let p = await c.post('/console/login', { email, password: 'wrong password here' });
    expect(p.status).toBe(401);
    const [failed] = await fresh('console.login_failed');
    expect(failed).toMatchObject({
      actor: { type: 'console', id: null },
      source_ip: SOURCE,
      request_id: p.headers.get('x-request-id'),
      details: { step: 'password' },
    });
    p = await c.post('/console/login', { email, password: PASSWORD });
    expect(p.location).toBe('/console/account');
    fromConsole((await fresh('console.login'))[0]!, p);

    // Token reset (a sensitive action, within minutes of the log-in: no second prompt).
    await c.get('/console/token/confirm');
    p = await c.post('/console/token', {});
    expect(p.location).toBe('/console/account');
    const [reset] = await fresh('token.reset');
    fromConsole(reset!, p);
    const token = testid((await c.get('/console/account')).body, 'api-token')!;
    expect(token).toMatch(/^ak/);
    secrets.push(token, token.split('.')[1]!);
    expect(reset!.target).toBe(token.split('.')[0]);

    // The API, by token: one record per request listing the IPs, the token named by its access key.
    const api = async (path: 'add' | 'delete', body: object) => {
      const res = await fetch(`${daemon.api}/openapi/v1/proxy/whitelist/${path}?api_key=${encodeURIComponent(token)}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': API_SOURCE },
        body: JSON.stringify(body),
      });
      expect(res.status).toBe(200);
      return res.headers.get('x-request-id');
    };
    let rid = await api('add', { items: [{ ip: '8.8.8.8' }, { ip: '8.8.4.4' }, { ip: '10.0.0.1' }] });
    const [added] = await fresh('whitelist.added');
    expect(added).toMatchObject({
      actor: { type: 'token', id: token.split('.')[0] },
      source_ip: API_SOURCE,
      request_id: rid,
      details: { ips: ['8.8.8.8', '8.8.4.4'], requested: 3 },
    });
    rid = await api('delete', { ips: ['8.8.4.4'] });
    expect((await fresh('whitelist.deleted'))[0]).toMatchObject({
      actor: { type: 'token' },
      request_id: rid,
      details: { ips: ['8.8.4.4'] },
    });

    // Console: whitelist add, status, delete.
    await c.get('/console/whitelist');
    p = await c.post('/console/whitelist/add', { ip: '1.1.1.1', remark: 'office' });
    fromConsole((await fresh('whitelist.added'))[0]!, p);
    p = await c.post('/console/whitelist/status', { ip: '1.1.1.1', status: 'disabled' });
    fromConsole((await fresh('whitelist.status_changed'))[0]!, p);
    p = await c.post('/console/whitelist/delete', { ip: '1.1.1.1' });
    fromConsole((await fresh('whitelist.deleted'))[0]!, p);

    // Proxy users: created, changed (limits), password rotated, deleted.
    await c.get('/console/proxy-users');
    p = await c.post('/console/proxy-users', { username: `pu-${backend}` });
    fromConsole((await fresh('proxy_user.created'))[0]!, p);
    let page = (await c.get('/console/proxy-users')).body;
    secrets.push(testid(page, 'proxy-password')!);
    const id = /action="\/console\/proxy-users\/(\d+)\/reset"/.exec(page)![1]!;
    p = await c.post(`/console/proxy-users/${id}/limits`, {
      traffic_limit: '5GiB',
      max_connections: '10',
      rate_limit: '',
    });
    expect((await fresh('proxy_user.changed'))[0]).toMatchObject({
      target: `pu-${backend}`,
      details: { traffic_limit: 5 * 2 ** 30, max_connections: 10 },
    });
    p = await c.post(`/console/proxy-users/${id}/reset`, {});
    fromConsole((await fresh('proxy_user.password_rotated'))[0]!, p);
    page = (await c.get('/console/proxy-users')).body;
    secrets.push(testid(page, 'proxy-password')!);
    p = await c.post(`/console/proxy-users/${id}/delete`, {});
    fromConsole((await fresh('proxy_user.deleted'))[0]!, p);

    // Target rules, webhook set and removed.
    await c.get('/console/account');
    p = await c.post('/console/target-rules', { deny: 'blocked.example', allow: '' });
    expect((await fresh('rules.changed'))[0]).toMatchObject({ details: { deny: ['blocked.example'], allow: [] } });
    p = await c.post('/console/webhook', { url: 'http://127.0.0.1:9/hook', thresholds: '80,100' });
    const [hook] = await fresh('webhook.set');
    fromConsole(hook!, p);
    const whsec = testid((await c.get('/console/account')).body, 'webhook-secret')!;
    expect(whsec).toMatch(/^whsec_/);
    secrets.push(whsec);
    p = await c.post('/console/webhook/remove', {});
    fromConsole((await fresh('webhook.removed'))[0]!, p);

    // Password and email.
    p = await c.post('/console/password', { current_password: PASSWORD, new_password: NEW_PASSWORD });
    fromConsole((await fresh('account.password_changed'))[0]!, p);
    await c.get('/console/account');
    p = await c.post('/console/email', { email: `renamed-${backend}@example.com` });
    const oldEmail = email;
    email = `renamed-${backend}@example.com`;
    const [moved] = await fresh('account.email_changed');
    fromConsole(moved!, p);
    expect(moved!.details).toEqual({ from: oldEmail, to: email });

    // Second factor on: the secret from the page, a code for it.
    await c.post('/console/2fa/totp/start', {});
    page = (await c.get('/console/account')).body;
    const secret = testid(page, 'totp-secret')!.replace(/\s/g, '');
    secrets.push(secret, testid(page, 'totp-secret')!);
    const nonce = /name="enroll" value="([^"]+)"/.exec(page)![1]!;
    const used = { step: 0 };
    p = await c.post('/console/2fa/totp/enable', { enroll: nonce, code: nextTotpCode(secret, used) });
    fromConsole((await fresh('2fa.enabled'))[0]!, p);
    page = (await c.get('/console/account')).body;
    const codes = [...page.matchAll(/<li><code>([a-z2-7-]+)<\/code><\/li>/g)].map((m) => m[1]!);
    expect(codes).toHaveLength(10);
    secrets.push(...codes, ...codes.map((x) => x.replace(/-/g, '')));

    // Log out; log in with a wrong code (a failed log-in), then a recovery code (used, then the log-in).
    p = await c.post('/console/logout', {});
    fromConsole((await fresh('console.logout'))[0]!, p);
    await c.get('/console/login');
    p = await c.post('/console/login', { email, password: NEW_PASSWORD });
    expect(p.location).toBe('/console/login/2fa');
    expect(await fresh()).toEqual([]);
    await c.get('/console/login/2fa');
    p = await c.post('/console/login/2fa', { code: '000000' });
    expect(p.status).toBe(401);
    expect((await fresh('console.login_failed'))[0]).toMatchObject({
      details: { step: 'second_factor' },
      source_ip: SOURCE,
    });
    p = await c.post('/console/login/2fa', { code: codes[0]! });
    expect(p.location).toBe('/console/account');
    const [spent, login] = await fresh('2fa.recovery_code_used', 'console.login');
    expect(spent).toMatchObject({ details: { left: 9 }, request_id: p.headers.get('x-request-id') });
    expect(login).toMatchObject({ details: { method: 'recovery_code' } });

    // Another browser signs in; this one signs it out.
    const other = new ConsoleClient(daemon.api, { 'x-forwarded-for': SOURCE });
    await other.get('/console/login');
    await other.post('/console/login', { email, password: NEW_PASSWORD });
    await other.get('/console/login/2fa');
    expect((await other.post('/console/login/2fa', { code: nextTotpCode(secret, used) })).location).toBe(
      '/console/account',
    );
    await fresh('console.login');
    page = (await c.get('/console/account')).body;
    const handles = [...page.matchAll(/data-testid="session-row-([0-9a-f]{16})"(?! data-current)/g)].map((m) => m[1]!);
    expect(handles).toHaveLength(1);
    p = await c.post(`/console/sessions/${handles[0]}/end`, {});
    expect((await fresh('console.session_ended'))[0]).toMatchObject({
      target: handles[0],
      request_id: p.headers.get('x-request-id'),
    });
    expect((await other.get('/console/account')).location).toBe('/console/login');

    // Second factor off: always a fresh second factor first.
    p = await c.post('/console/2fa/disable', {});
    expect(p.location).toBe('/console/confirm');
    await c.get('/console/confirm');
    p = await c.post('/console/confirm', { code: nextTotpCode(secret, used) });
    expect(p.location).toBe('/console/account#two-factor');
    fromConsole((await fresh('2fa.disabled'))[0]!, p);

    // Operator actions.
    const op = async (args: string[], action: string, input?: string) => {
      const r = await admin(daemon.dataDir, args, input);
      expect(r.code, r.stderr).toBe(0);
      fromOperator((await fresh(action))[0]!);
      return r;
    };
    await op(['account', 'set', '--email', email, '--status', 'suspended'], 'account.suspended');
    await op(['account', 'set', '--email', email, '--status', 'active'], 'account.reactivated');
    await op(['plan', 'set', '--email', email, '--traffic-limit', '10GiB'], 'plan.changed');
    const minted = await op(['token', 'reset', '--email', email], 'token.reset');
    secrets.push(minted.json.token as string);
    await op(['token', 'disable', '--email', email], 'token.disabled');
    const made = await op(
      ['proxy-user', 'create', '--email', email, '--username', `op-${backend}`],
      'proxy_user.created',
    );
    secrets.push(made.json.password as string);
    await op(
      ['proxy-user', 'set', '--email', email, '--username', `op-${backend}`, '--max-connections', '3'],
      'proxy_user.changed',
    );
    await op(['policy', 'set', '--email', email, '--deny', 'none'], 'rules.changed');
    await op(
      ['whitelist', 'set-status', '--email', email, '--ip', '8.8.8.8', '--status', 'disabled'],
      'whitelist.status_changed',
    );
    const set = await op(
      ['webhook', 'set', '--email', email, '--url', 'http://127.0.0.1:9/x', '--allow-private-webhooks'],
      'webhook.set',
    );
    secrets.push(set.json.secret as string);
    await op(['webhook', 'remove', '--email', email], 'webhook.removed');

    // Nothing secret anywhere: the records, the daemon's log, and the chain holds.
    const text = JSON.stringify(await records()) + daemon.logs.join('\n');
    for (const s of secrets) {
      expect(s.length).toBeGreaterThan(5);
      expect(text.includes(s), `a secret (${s.slice(0, 4)}…) in a record or log line`).toBe(false);
    }
    const verify = await run(PROXYD, [
      'admin',
      'audit',
      'verify',
      '--data-dir',
      daemon.dataDir,
      ...(daemon.databaseUrl ? ['--database-url', daemon.databaseUrl] : []),
    ]);
    expect(verify.code, verify.stderr).toBe(0);
    expect(JSON.parse(verify.stdout)).toMatchObject({ ok: true });
  }, 120_000);
});
