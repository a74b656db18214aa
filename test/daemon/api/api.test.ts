// The whitelist API contract, on each store backend (SQLite, PostgreSQL): the same tests, parameterised.
import { gzipSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeTestApp, q, type TestApp } from '../../helpers/app.js';
import { BACKENDS } from '../../helpers/postgres.js';
import { ADD, DEL, LIST } from '../../helpers/daemon.js';

describe.each(BACKENDS)('whitelist API on %s', (backend) => {
  let t: TestApp;
  beforeEach(async () => {
    t = await makeTestApp({ backend });
  });
  afterEach(async () => {
    await t.close();
  });

  const json = { 'content-type': 'application/json' };
  const pub = (i: number) => `8.8.${(i >> 8) & 255}.${i & 255}`;

  async function add(token: string, items: unknown, extra: Record<string, string> = {}) {
    return t.app.inject({
      method: 'POST',
      url: ADD + q(token),
      headers: { ...json, ...extra },
      payload: JSON.stringify({ items }),
    });
  }
  async function del(token: string, ips: unknown) {
    return t.app.inject({ method: 'POST', url: DEL + q(token), headers: json, payload: JSON.stringify({ ips }) });
  }
  async function list(token: string, query = '') {
    return t.app.inject({ method: 'GET', url: LIST + q(token) + query });
  }
  function total(token: string) {
    return list(token).then((r) => r.json().data.total as number);
  }

  describe('envelope', () => {
    it('carries code, message, requestId, data; X-Request-Id and no-store on every response', async () => {
      const { token } = await t.account('a@example.com');
      for (const r of [await list(token), await list('nope'), await t.app.inject({ url: '/openapi/v1/nope' })]) {
        const body = r.json();
        expect(Object.keys(body).sort()).toEqual(['code', 'data', 'message', 'requestId']);
        expect(r.headers['x-request-id']).toBe(body.requestId);
        expect(r.headers['cache-control']).toBe('no-store');
      }
    });

    it('answers 405 for a wrong method and 404 elsewhere, both as envelopes', async () => {
      const r = await t.app.inject({ method: 'GET', url: ADD });
      expect(r.statusCode).toBe(405);
      expect(r.json().code).toBe(10405);
      const n = await t.app.inject({ method: 'GET', url: '/nothing?api_key=secret-looking' });
      expect(n.statusCode).toBe(404);
      expect(n.body).not.toContain('secret-looking');
      // The daemon's own endpoints too (a POST to /healthz was a 404, as if it did not exist).
      for (const url of ['/healthz', '/metrics', '/ip', '/openapi.json']) {
        const m = await t.app.inject({ method: 'POST', url });
        expect(m.statusCode, url).toBe(405);
        expect(m.headers.allow).toBe('GET, HEAD');
        expect(m.json().code).toBe(10405);
      }
    });
  });

  describe('api_key authentication', () => {
    it('gives byte-identical 401 bodies (but the request id) for every cause', async () => {
      const { token, accountId } = await t.account('a@example.com');
      const other = await t.account('b@example.com');
      const [ak] = token.split('.');
      const wrongSecret = `${ak}.${'A'.repeat(43)}`;
      const unknownKey = `ak${'f'.repeat(20)}.${token.split('.')[1]}`;
      await t.store.tokens.disable(other.accountId);
      const suspended = await t.account('c@example.com');
      await t.store.accounts.setStatus(suspended.accountId, 'suspended');
      const urls = [
        LIST, // missing
        `${LIST}?api_key=`, // empty
        `${LIST}?api_key=${token}&api_key=${token}`, // repeated
        `${LIST}?api_key=not-a-token`, // malformed
        `${LIST}?api_key=${unknownKey}`, // unknown access key
        `${LIST}?api_key=${wrongSecret}`, // wrong secret
        `${LIST}?api_key=${other.token}`, // disabled token
        `${LIST}?api_key=${suspended.token}`, // account not active
      ];
      const bodies = new Set<string>();
      for (const url of urls) {
        const r = await t.app.inject({ url });
        expect(r.statusCode).toBe(401);
        const b = r.json();
        expect(b).toMatchObject({ code: 10401, message: 'invalid api key', data: null });
        bodies.add(r.body.replace(b.requestId, 'ID'));
      }
      expect(bodies.size).toBe(1);
      expect(accountId).toBeGreaterThan(0);
    });

    it('never reads Authorization: Bearer or X-API-Key', async () => {
      const { token } = await t.account('a@example.com');
      for (const headers of [{ authorization: `Bearer ${token}` }, { 'x-api-key': token }]) {
        const r = await t.app.inject({ url: LIST, headers });
        expect(r.statusCode).toBe(401);
      }
    });

    it('kills the old token at once on reset', async () => {
      const { token, accountId } = await t.account('a@example.com');
      expect((await list(token)).statusCode).toBe(200);
      const { mintToken } = await import('../../../src/daemon/secrets.js');
      const n = mintToken();
      await t.store.tokens.replace(accountId, n.accessKey, n.secretHash);
      expect((await list(token)).statusCode).toBe(401);
      expect((await list(n.token)).statusCode).toBe(200);
    });
  });

  describe('add', () => {
    it('adds, and reports each failing item with its code while keeping the rest', async () => {
      const { token } = await t.account('a@example.com');
      const r = await add(token, [
        { ip: '8.8.8.8', remark: 'office' },
        { ip: '01.2.3.4' },
        { ip: '10.0.0.1' },
        { ip: '223.5.5.5' },
        { ip: '9.9.9.9', remark: 'x'.repeat(256) },
        { ip: '8.8.8.8' },
        { ip: '1.36.0.1' }, // HK
        { ip: '202.175.1.1' }, // MO
        { ip: '1.34.0.1' }, // TW
        { ip: '::ffff:8.8.4.4' },
        { ip: '9.9.9.10', remark: '😀'.repeat(255) },
      ]);
      expect(r.statusCode).toBe(200);
      const b = r.json();
      expect(b.code).toBe(10431);
      expect(b.message).toBe('5 succeeded, 6 failed');
      expect(b.data.success_count).toBe(5);
      expect(b.data.failed_count).toBe(6);
      expect(b.data.failed_items.map((f: { ip: string; code: number }) => [f.ip, f.code])).toEqual([
        ['01.2.3.4', 10420],
        ['10.0.0.1', 10421],
        ['223.5.5.5', 10422],
        ['9.9.9.9', 10423],
        ['8.8.8.8', 10425],
        ['::ffff:8.8.4.4', 10420],
      ]);
      for (const f of b.data.failed_items) expect(typeof f.reason).toBe('string');
      expect(await total(token)).toBe(5);
    });

    it('answers as one-by-one processing in order, however many items are in flight at once', async () => {
      const { token } = await t.account('a@example.com');
      // The same IP three times among 40 others: the first occurrence wins with its own remark.
      const items = Array.from({ length: 40 }, (_, i) => ({ ip: pub(i), remark: `r${i}` }));
      items.splice(7, 0, { ip: pub(30), remark: 'early' });
      items.splice(25, 0, { ip: pub(30), remark: 'late' });
      const b = (await add(token, items)).json();
      expect(b.data.success_count).toBe(40);
      expect(b.data.failed_items.map((f: { ip: string; code: number }) => [f.ip, f.code])).toEqual([
        [pub(30), 10425],
        [pub(30), 10425],
      ]);
      const listed = (await list(token, '&page_size=100')).json().data.items as Array<{ ip: string; remark: string }>;
      expect(listed.find((e) => e.ip === pub(30))!.remark).toBe('early');
      // Newest first: the reverse of the order the items were sent in.
      const firstSeen = [...new Set(items.map((i) => i.ip))];
      expect(listed.map((e) => e.ip)).toEqual(firstSeen.reverse());
    });

    it('returns 200 with empty failed_items when every item succeeds', async () => {
      const { token } = await t.account('a@example.com');
      const r = await add(token, [{ ip: '8.8.8.8' }]);
      expect(r.json()).toMatchObject({ code: 200, data: { success_count: 1, failed_count: 0, failed_items: [] } });
    });

    it('keeps every valid item of a 100-item batch with failures in the middle', async () => {
      const { token } = await t.account('a@example.com');
      const items = Array.from({ length: 100 }, (_, i) => ({ ip: i % 10 === 5 ? `192.168.0.${i}` : pub(i) }));
      const r = await add(token, items);
      const b = r.json();
      expect(b.data.success_count).toBe(90);
      expect(b.data.failed_items).toHaveLength(10);
      expect(await total(token)).toBe(90);
    });

    it('refuses an unverified account with 403/10403 and processes nothing', async () => {
      const { token } = await t.account('a@example.com', { verified: false });
      const r = await add(token, [{ ip: '8.8.8.8' }]);
      expect(r.statusCode).toBe(403);
      expect(r.json().code).toBe(10403);
      expect(await total(token)).toBe(0);
    });

    it('gives another account 10427 for a held IP, with the same text as a releasing one', async () => {
      const a = await t.account('a@example.com');
      const b = await t.account('b@example.com');
      await add(a.token, [{ ip: '8.8.8.8' }]);
      const r = (await add(b.token, [{ ip: '8.8.8.8' }])).json();
      expect(r.data.failed_items[0]).toMatchObject({ ip: '8.8.8.8', code: 10427, reason: 'IP unavailable' });
    });

    it.each([
      ['not JSON', 'items'],
      ['{"items":[{"ip":"8.8.8.8"}]} {"x":1}', 'trailing JSON'],
      ['{"items":[{"ip":"8.8.8.8"}],"extra":1}', 'unknown top-level field'],
      ['{"items":[{"ip":"8.8.8.8","remark":"a","x":1}]}', 'unknown item field'],
      ['{"items":[{"ip":8}]}', 'wrong type'],
      ['{"items":[{"ip":"8.8.8.8","remark":null}]}', 'null remark'],
      ['{"items":{}}', 'items not an array'],
      ['{}', 'missing items'],
      ['{"items":[]}', 'empty array'],
      ['[]', 'not an object'],
      ['{"items":[{"ip":"8.8.8.8"}],"__proto__":{"x":1}}', '__proto__ key'],
      ['{"items":[{"ip":"8.8.8.8","constructor":{}}]}', 'constructor key'],
      ['', 'empty body'],
    ])('rejects %j (%s) with 10400 and processes nothing', async (payload) => {
      const { token } = await t.account('a@example.com');
      const r = await t.app.inject({ method: 'POST', url: ADD + q(token), headers: json, payload });
      expect(r.statusCode).toBe(200);
      expect(r.json().code).toBe(10400);
      expect(r.json().data).toBeNull();
      expect(await total(token)).toBe(0);
    });

    it('rejects a non-JSON content type, an unknown query parameter and a body over 256 KiB with 10400', async () => {
      const { token } = await t.account('a@example.com');
      const body = JSON.stringify({ items: [{ ip: '8.8.8.8' }] });
      for (const [url, headers, payload] of [
        [ADD + q(token), { 'content-type': 'text/plain' }, body],
        [ADD + q(token), { 'content-type': 'application/x-www-form-urlencoded' }, body],
        // JSON is UTF-8: another charset would be decoded wrongly.
        [ADD + q(token), { 'content-type': 'application/json; charset=latin1' }, body],
        [ADD + q(token), { 'content-type': 'application/json;charset="ISO-8859-1"' }, body],
        [`${ADD}${q(token)}&debug=1`, json, body],
        [ADD + q(token), json, JSON.stringify({ items: [{ ip: '8.8.8.8', remark: 'x'.repeat(300 * 1024) }] })],
      ] as const) {
        const r = await t.app.inject({ method: 'POST', url, headers, payload });
        expect(r.json().code).toBe(10400);
      }
      expect(await total(token)).toBe(0);
      for (const [type, ip] of [
        ['application/json; charset=utf-8', '8.8.8.8'],
        ['application/json; charset="UTF-8"', '8.8.4.4'],
        ['application/json;charset=utf8', '9.9.9.9'],
      ]) {
        const r = await t.app.inject({
          method: 'POST',
          url: ADD + q(token),
          headers: { 'content-type': type! },
          payload: JSON.stringify({ items: [{ ip }] }),
        });
        expect(r.json().code, type).toBe(200);
      }
    });

    it('refuses a body in a content encoding other than identity with 10400 naming it, and processes nothing', async () => {
      // It was ignored: a gzipped body was "not valid UTF-8", a plain one labelled gzip was processed as it came.
      const { token } = await t.account('a@example.com');
      const body = JSON.stringify({ items: [{ ip: '8.8.8.8' }] });
      for (const [encoding, payload] of [
        ['gzip', gzipSync(body)],
        ['gzip', body],
        ['br', body],
      ] as const) {
        const r = await t.app.inject({
          method: 'POST',
          url: ADD + q(token),
          headers: { ...json, 'content-encoding': encoding },
          payload,
        });
        expect({ encoding, code: r.json().code, message: r.json().message }).toEqual({
          encoding,
          code: 10400,
          message: 'invalid parameters: content-encoding must be identity',
        });
      }
      expect(await total(token)).toBe(0);
      const r = await t.app.inject({
        method: 'POST',
        url: ADD + q(token),
        headers: { ...json, 'content-encoding': 'identity' },
        payload: body,
      });
      expect(r.json().code).toBe(200);
    });

    it('accepts application/json with a charset', async () => {
      const { token } = await t.account('a@example.com');
      const r = await add(token, [{ ip: '8.8.8.8' }], { 'content-type': 'application/json; charset=utf-8' });
      expect(r.json().code).toBe(200);
    });

    it('stores a remark with a NUL or an unpaired surrogate, as U+FFFD, and fails no other item for it', async () => {
      // PostgreSQL's text holds neither: the whole batch failed with 10500 (retry), the plain items with it.
      const { token } = await t.account('a@example.com');
      const payload =
        '{"items":[{"ip":"8.8.8.8","remark":"a\\u0000b"},{"ip":"8.8.8.9","remark":"\\ud800x"},{"ip":"8.8.8.10","remark":"ok"}]}';
      const r = await t.app.inject({ method: 'POST', url: ADD + q(token), headers: json, payload });
      expect(r.json()).toMatchObject({ code: 200, data: { success_count: 3, failed_items: [] } });
      const remarks = (await list(token))
        .json()
        .data.items.map((i: { ip: string; remark: string }) => [i.ip, i.remark]);
      expect(remarks).toEqual([
        ['8.8.8.10', 'ok'],
        ['8.8.8.9', '\ufffdx'],
        ['8.8.8.8', 'a\ufffdb'],
      ]);
    });

    it('answers 10413 for 101 items and processes nothing', async () => {
      const { token } = await t.account('a@example.com');
      const r = await add(
        token,
        Array.from({ length: 101 }, (_, i) => ({ ip: pub(i) })),
      );
      expect(r.json().code).toBe(10413);
      expect(await total(token)).toBe(0);
    });

    it('checks the token before the body: a bad token with a bad body is 401', async () => {
      const r = await t.app.inject({ method: 'POST', url: `${ADD}?api_key=x`, headers: json, payload: 'garbage' });
      expect(r.statusCode).toBe(401);
    });
  });

  describe('delete', () => {
    it('removes, releases the claim at once, and says 10426 for absent or foreign IPs alike', async () => {
      const a = await t.account('a@example.com');
      const b = await t.account('b@example.com', { verified: false });
      await add(a.token, [{ ip: '8.8.8.8' }, { ip: '9.9.9.9' }]);
      const foreign = (await del(b.token, ['8.8.8.8'])).json();
      const absent = (await del(b.token, ['1.1.1.1'])).json();
      expect(foreign.data.failed_items[0].code).toBe(10426);
      expect(foreign.data.failed_items[0].reason).toBe(absent.data.failed_items[0].reason);
      const r = (await del(a.token, ['8.8.8.8', '8.8.8.8', 'bogus'])).json();
      expect(r.code).toBe(10431);
      expect(r.data.success_count).toBe(1);
      expect(r.data.failed_items.map((f: { code: number }) => f.code)).toEqual([10426, 10420]);
      // Unverified accounts may still delete; and may not add — so verify b, then take the released IP.
      await t.store.accounts.setVerified(b.accountId, true);
      expect((await add(b.token, [{ ip: '8.8.8.8' }])).json().code).toBe(200);
    });

    it('validates like add: 10400 for bad bodies, 10413 for 101 ips', async () => {
      const { token } = await t.account('a@example.com');
      expect((await del(token, [])).json().code).toBe(10400);
      expect((await del(token, [1])).json().code).toBe(10400);
      expect(
        (
          await del(
            token,
            Array.from({ length: 101 }, (_, i) => pub(i)),
          )
        ).json().code,
      ).toBe(10413);
    });
  });

  describe('closed accounts', () => {
    it('hold their IPs "being released" for the grace period, then free them', async () => {
      const a = await t.account('a@example.com');
      const b = await t.account('b@example.com');
      await add(a.token, [{ ip: '8.8.8.8' }]);
      await t.store.accounts.setStatus(a.accountId, 'closed');
      expect((await list(a.token)).statusCode).toBe(401);
      expect((await add(b.token, [{ ip: '8.8.8.8' }])).json().data.failed_items[0].code).toBe(10427);
      t.clock.now += 599_000;
      expect((await add(b.token, [{ ip: '8.8.8.8' }])).json().data.failed_items[0].code).toBe(10427);
      t.clock.now += 2_000;
      expect((await add(b.token, [{ ip: '8.8.8.8' }])).json().code).toBe(200);
    });
  });

  describe('list', () => {
    it('pages newest first with a stable order and exact item fields', async () => {
      const { token } = await t.account('a@example.com');
      await add(token, [{ ip: pub(1), remark: 'one' }, { ip: pub(2) }, { ip: pub(3) }]);
      t.clock.now += 1000;
      await add(token, [{ ip: pub(4) }, { ip: pub(5) }]);
      const p1 = (await list(token, '&page=1&page_size=2')).json().data;
      const p2 = (await list(token, '&page=2&page_size=2')).json().data;
      const p3 = (await list(token, '&page=3&page_size=2')).json().data;
      expect([...p1.items, ...p2.items, ...p3.items].map((i: { ip: string }) => i.ip)).toEqual([
        pub(5),
        pub(4),
        pub(3),
        pub(2),
        pub(1),
      ]);
      expect(p1).toMatchObject({ page: 1, page_size: 2, total: 5 });
      const item = p3.items[0];
      expect(Object.keys(item).sort()).toEqual(['created_at', 'ip', 'remark', 'status', 'whitelist_id']);
      expect(item).toMatchObject({ ip: pub(1), remark: 'one', status: 1, created_at: '2026-11-21T10:00:00Z' });
      expect(Number.isInteger(item.whitelist_id)).toBe(true);
    });

    it('filters by status and ip', async () => {
      const { token, accountId } = await t.account('a@example.com');
      await add(token, [{ ip: pub(1) }, { ip: pub(2) }]);
      await t.store.whitelist.setStatus(accountId, pub(1), 2);
      expect((await list(token, '&status=disabled')).json().data.items.map((i: { ip: string }) => i.ip)).toEqual([
        pub(1),
      ]);
      expect((await list(token, '&status=active')).json().data.total).toBe(1);
      expect((await list(token, `&ip=${pub(2)}`)).json().data.items[0].ip).toBe(pub(2));
      expect((await list(token, '&status=all')).json().data.total).toBe(2);
    });

    it('answers a page far past the last, up to page 999999999 of 100, with no items and the total', async () => {
      // On PostgreSQL the offset (99,999,999,800) overflowed an integer: HTTP 500, 10500.
      const { token } = await t.account('a@example.com');
      await add(token, [{ ip: pub(1) }]);
      for (const query of ['&page=999999999&page_size=100', '&page=21474838&page_size=100', '&page=2']) {
        const r = (await list(token, query)).json();
        expect({ query, code: r.code, items: r.data?.items, total: r.data?.total }).toEqual({
          query,
          code: 200,
          items: [],
          total: 1,
        });
      }
    });

    it.each([
      '&page_size=101',
      '&page_size=0',
      '&page=0',
      '&page=-1',
      '&page=1.5',
      '&page=',
      '&status=on',
      '&ip=01.2.3.4',
      '&foo=1',
      '&page=1&page=2',
      '&page_size=1e2',
    ])('rejects %s with 10400 naming the field', async (query) => {
      const { token } = await t.account('a@example.com');
      const r = (await list(token, query)).json();
      expect(r.code).toBe(10400);
      expect(r.message).toMatch(/^invalid parameters: \w+/);
    });

    it.each(['&__proto__=1', '&__proto__=x&page=1', '&constructor=1'])(
      'rejects the unknown parameter %s too (it once slipped through as a prototype)',
      async (query) => {
        const { token } = await t.account('a@example.com');
        const r = (await list(token, query)).json();
        expect(r.code).toBe(10400);
        expect(r.message).toBe(`invalid parameters: ${query.slice(1).split('=')[0]}`);
      },
    );
  });

  describe('rate limits', () => {
    it('allows 10 adds per rolling minute with no double burst at a window edge', async () => {
      const { token } = await t.account('a@example.com');
      const start = t.clock.now;
      for (let i = 0; i < 5; i++) expect((await add(token, [{ ip: pub(i) }])).statusCode).toBe(200);
      t.clock.now = start + 30_000;
      for (let i = 5; i < 10; i++) expect((await add(token, [{ ip: pub(i) }])).statusCode).toBe(200);
      t.clock.now = start + 59_999;
      const limited = await add(token, [{ ip: pub(99) }]);
      expect(limited.statusCode).toBe(429);
      expect(limited.json().code).toBe(10429);
      expect(limited.headers['retry-after']).toBe('1');
      // A fixed window would reset here and allow 10 more; the rolling window frees only the 5 from t=0.
      t.clock.now = start + 60_001;
      for (let i = 10; i < 15; i++) expect((await add(token, [{ ip: pub(i) }])).statusCode).toBe(200);
      const again = await add(token, [{ ip: pub(98) }]);
      expect(again.statusCode).toBe(429);
      expect(Number(again.headers['retry-after'])).toBe(30);
      expect(await total(token)).toBe(15);
    });

    it('limits list to 60 and delete to 10 per token, independently', async () => {
      const { token } = await t.account('a@example.com');
      for (let i = 0; i < 60; i++) expect((await list(token)).statusCode).toBe(200);
      expect((await list(token)).statusCode).toBe(429);
      for (let i = 0; i < 10; i++) expect((await del(token, [pub(i)])).statusCode).toBe(200);
      expect((await del(token, [pub(0)])).statusCode).toBe(429);
    });

    it('locks a source IP out after 20 invalid tokens, without checking the token', async () => {
      const { token } = await t.account('a@example.com');
      for (let i = 0; i < 20; i++) expect((await list('bad')).statusCode).toBe(401);
      const r = await list(token);
      expect(r.statusCode).toBe(429);
      expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
      t.clock.now += 60_001;
      expect((await list(token)).statusCode).toBe(200);
    });
  });
});

describe('requests the HTTP parser refuses', () => {
  it('get the envelope with its headers, not a framework body', async () => {
    const { clientErrorResponse } = await import('../../../src/daemon/api/app.js');
    const big = clientErrorResponse(Object.assign(new Error('x'), { code: 'HPE_HEADER_OVERFLOW' }))!;
    expect(big).toMatch(/^HTTP\/1\.1 431 /);
    const bad = clientErrorResponse(Object.assign(new Error('x'), { code: 'HPE_INVALID_METHOD' }))!;
    expect(bad).toMatch(/^HTTP\/1\.1 400 /);
    for (const r of [big, bad]) {
      expect(r).toMatch(/\r\nx-content-type-options: nosniff\r\n/i);
      expect(r).toMatch(/\r\ncache-control: no-store\r\n/i);
      const body = JSON.parse(r.split('\r\n\r\n')[1]!);
      expect(body).toMatchObject({ code: 10400, data: null });
      expect(r).toContain(`X-Request-Id: ${body.requestId}`);
    }
    expect(clientErrorResponse(Object.assign(new Error('x'), { code: 'ECONNRESET' }))).toBeNull();
  });
});

describe('behind a trusted balancer (--trust-proxy)', () => {
  let t: TestApp;
  beforeEach(async () => {
    t = await makeTestApp({ trustProxy: ['127.0.0.1/32'] });
  });
  afterEach(async () => {
    await t.close();
  });
  const ip = (xff: string) =>
    t.app.inject({ url: '/ip', headers: { 'x-forwarded-for': xff } }).then((r) => r.json().ip as string);

  it('reads the address of an X-Forwarded-For entry that carries a port (Azure Application Gateway writes ip:port)', async () => {
    expect(await ip('198.51.100.7')).toBe('198.51.100.7');
    expect(await ip('198.51.100.7:50123')).toBe('198.51.100.7');
    expect(await ip('10.0.0.1, 198.51.100.8:443')).toBe('198.51.100.8');
    expect(await ip('[2001:db8::1]:443')).toBe('2001:db8::1');
    expect(await ip('[2001:db8::2]')).toBe('2001:db8::2');
    expect(await ip('garbage:443')).toBe('127.0.0.1');
    // An entry naming no address counts as the balancer's own, as a request without the header does.
    expect(await ip('garbage')).toBe('127.0.0.1');
  });

  it('locks a source out after 20 invalid tokens whatever port the balancer writes with it', async () => {
    const { token } = await t.account('a@example.com');
    const from = (port: number) => ({ 'x-forwarded-for': `198.51.100.7:${port}` });
    for (let i = 0; i < 20; i++)
      expect((await t.app.inject({ url: LIST + q('bad'), headers: from(40000 + i) })).statusCode).toBe(401);
    const r = await t.app.inject({ url: LIST + q(token), headers: from(41000) });
    expect(r.statusCode).toBe(429);
    expect(r.json().message).toContain('for source IP 198.51.100.7 ');
  });

  it('counts an IPv6 source by its /64 for the lock-out (one host holds the whole /64); another /64 is apart', async () => {
    const { token } = await t.account('a@example.com');
    const from = (ip: string) => ({ 'x-forwarded-for': ip });
    for (let i = 0; i < 20; i++)
      expect(
        (await t.app.inject({ url: LIST + q('bad'), headers: from(`2001:db8:1:2::${(i + 1).toString(16)}`) }))
          .statusCode,
      ).toBe(401);
    const r = await t.app.inject({ url: LIST + q(token), headers: from('2001:db8:1:2:ffff:ffff:ffff:ffff') });
    expect(r.statusCode).toBe(429);
    expect(r.json().message).toContain('for source IP 2001:db8:1:2:ffff:ffff:ffff:ffff ');
    expect((await t.app.inject({ url: LIST + q(token), headers: from('2001:db8:1:3::1') })).statusCode).toBe(200);
  });
});
