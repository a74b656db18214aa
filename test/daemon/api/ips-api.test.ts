// The dedicated-address endpoints on a real database (both backends): GET /openapi/v1/proxy/ips (users:read) lists
// the key's account's addresses only; POST /openapi/v1/proxy/ips/replace (users:write) swaps one (same node, else same
// country), at most --ip-replacements a month (10429 with Retry-After to the month's end), 10503 when none is free,
// 10404 for an address not the account's, 10400 naming the field of a bad body; both in /openapi.json with their scope.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IPS_PATHS } from '../../../src/contract/paths.js';
import { assignAddresses } from '../../../src/daemon/services/dedicated.js';
import { operatorContext } from '../../../src/daemon/services/audit.js';
import { bearer, makeTestApp, type TestApp } from '../../helpers/app.js';
import { BACKENDS } from '../../helpers/postgres.js';

describe.each(BACKENDS)('dedicated-address endpoints (%s)', (backend) => {
  let t: TestApp;
  let mine: { accountId: number };
  let theirs: { accountId: number };
  let reader: string;
  let writer: string;
  let usageOnly: string;

  const call = async (
    method: 'GET' | 'POST',
    url: string,
    key: string,
    body?: unknown,
    extra: Record<string, string> = {},
  ) => {
    const r = await t.app.inject({
      method,
      url,
      headers: { ...bearer(key), ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...extra },
      ...(body === undefined ? {} : { payload: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
    return { status: r.statusCode, headers: r.headers, body: r.json() as { code: number; message: string; data: any } };
  };

  beforeAll(async () => {
    t = await makeTestApp({ backend });
    mine = await t.account('ips-mine@example.com');
    theirs = await t.account('ips-theirs@example.com');
    reader = (await t.key(mine.accountId, ['users:read'])).key;
    writer = (await t.key(mine.accountId, ['users:write'])).key;
    usageOnly = (await t.key(mine.accountId, ['usage:read'])).key;
    await t.store.egress.register('ny-1', ['203.0.113.1', '203.0.113.2', '203.0.113.3'], {
      country: 'us',
      city: 'nyc',
    });
    await t.store.egress.register('de-1', ['198.51.100.1'], { country: 'de', city: null });
    await assignAddresses(t.store, mine.accountId, 'ny-1', '203.0.113.1', operatorContext());
    await assignAddresses(t.store, theirs.accountId, 'de-1', '198.51.100.1', operatorContext());
    t.ctx.dedicated.replacementsPerMonth = 2;
  });
  afterAll(async () => t?.close());

  it("lists the key's account's addresses only; a key without users:read is 10403", async () => {
    const r = await call('GET', IPS_PATHS.list, reader);
    expect(r.status).toBe(200);
    expect(r.body.data).toMatchObject({ total: 1, replacements: { used: 0, limit: 2 } });
    expect(r.body.data.items).toEqual([
      {
        address: '203.0.113.1',
        country: 'us',
        city: 'nyc',
        since: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
        bytes_up: 0,
        bytes_down: 0,
      },
    ]);
    const denied = await call('GET', IPS_PATHS.list, usageOnly);
    expect([denied.status, denied.body.code, denied.body.message]).toEqual([
      403,
      10403,
      'the key lacks scope users:read',
    ]);
    expect((await call('GET', `${IPS_PATHS.list}?page=2`, reader)).body).toMatchObject({
      code: 10400,
      message: expect.stringContaining('page'),
    });
  });

  it('bad bodies are 10400 naming the field, and nothing changes', async () => {
    const cases: Array<[unknown, RegExp]> = [
      [{}, /address/],
      [{ address: 7 }, /address/],
      [{ address: '203.0.113.01' }, /address/],
      [{ address: '::1' }, /address/],
      [{ address: '203.0.113.1', extra: 1 }, /extra/],
      ['{"address":"203.0.113.1"} trailing', /./],
    ];
    for (const [body, why] of cases) {
      const r = await call('POST', IPS_PATHS.replace, writer, body);
      expect(r.body.code, JSON.stringify(body)).toBe(10400);
      expect(r.body.message).toMatch(why);
    }
    expect((await call('POST', IPS_PATHS.replace, reader, { address: '203.0.113.1' })).body.code).toBe(10403);
    expect((await t.store.egress.list({ accountId: mine.accountId })).map((r) => r.address)).toEqual(['203.0.113.1']);
  });

  it("replaces within the allowance, then 10429 with Retry-After to the month's end; another account's address is 10404; none free is 10503", async () => {
    expect((await call('POST', IPS_PATHS.replace, writer, { address: '198.51.100.1' })).body).toMatchObject({
      code: 10404,
    });
    const idem = { 'idempotency-key': 'replace-203.0.113.1' };
    const first = await call('POST', IPS_PATHS.replace, writer, { address: '203.0.113.1' }, idem);
    expect([first.status, first.body.data]).toEqual([200, { old: '203.0.113.1', new: '203.0.113.2' }]);
    // A resend after a timeout (the same Idempotency-Key) answers the first answer again and uses no replacement.
    const resent = await call('POST', IPS_PATHS.replace, writer, { address: '203.0.113.1' }, idem);
    expect([resent.status, resent.headers['idempotent-replayed'], resent.body]).toEqual([200, 'true', first.body]);
    expect((await call('POST', IPS_PATHS.replace, writer, { address: '203.0.113.2' }, idem)).body.code).toBe(10409);
    const second = await call('POST', IPS_PATHS.replace, writer, { address: '203.0.113.2' });
    expect(second.body.data).toEqual({ old: '203.0.113.2', new: '203.0.113.3' });
    const third = await call('POST', IPS_PATHS.replace, writer, { address: '203.0.113.3' });
    expect([third.status, third.body.code]).toEqual([429, 10429]);
    // The clock says 2026-11-21T10:00:00Z: the month ends in 9 days and 14 hours.
    expect(third.headers['retry-after']).toBe(String(9 * 86_400 + 14 * 3_600));
    const listed = await call('GET', IPS_PATHS.list, reader);
    expect(listed.body.data.replacements).toEqual({ used: 2, limit: 2 });
    const theirsWriter = (await t.key(theirs.accountId, ['users:write'])).key;
    const none = await call('POST', IPS_PATHS.replace, theirsWriter, { address: '198.51.100.1' });
    expect([none.status, none.body.code, none.body.message]).toEqual([503, 10503, 'no free address to replace with']);
  });

  it('/openapi.json names both with their scopes', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json() as { paths: Record<string, any> };
    expect(doc.paths[IPS_PATHS.list].get['x-scope']).toBe('users:read');
    expect(doc.paths[IPS_PATHS.replace].post['x-scope']).toBe('users:write');
    expect(doc.paths[IPS_PATHS.replace].post.responses['503']).toBeDefined();
  });
});
