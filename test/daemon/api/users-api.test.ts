// The customer API's proxy users, target rules and gateway endpoints (SPEC 19) on a real database, both backends,
// through HTTP with API keys: every row of the endpoint table, the same 10404 for an absent user and another
// account's, 10409, 10413, unknown and malformed fields (10400 naming each, nothing changed), the batch's items each
// on its own, Idempotency-Key (replay, a different body, two at once), scopes, and the audit records.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROXY_PATHS } from '../../../src/contract/paths.js';
import { verifyChains } from '../../../src/daemon/services/audit.js';
import { bearer, makeTestApp, type TestApp } from '../../helpers/app.js';
import { inspectDb } from '../../helpers/daemon.js';
import { BACKENDS } from '../../helpers/postgres.js';

const USERS = PROXY_PATHS.users;
const userPath = (u: string) => `${USERS}/${encodeURIComponent(u)}`;

describe.each(BACKENDS)('proxy users over the API (%s)', (backend) => {
  let t: TestApp;
  let acc: { accountId: number; token: string };
  let other: { accountId: number; token: string };
  let key: { key: string; id: string };
  let otherKey: { key: string; id: string };

  type Reply = {
    status: number;
    headers: Record<string, unknown>;
    body: { code: number; message: string; requestId: string; data: any };
  };
  async function call(
    method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE',
    url: string,
    body?: unknown,
    headers: Record<string, string> = {},
    k = key.key,
  ): Promise<Reply> {
    const r = await t.app.inject({
      method,
      url,
      headers: { ...bearer(k), ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      ...(body !== undefined ? { payload: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });
    return { status: r.statusCode, headers: r.headers, body: r.json() };
  }
  const total = async () => (await call('GET', `${USERS}?page_size=100`)).body.data.total as number;

  beforeAll(async () => {
    t = await makeTestApp({ backend, limits: { keyReads: 100_000, keyWrites: 100_000 } });
    acc = await t.account('users-api@example.com');
    other = await t.account('users-api-other@example.com');
    key = await t.key(acc.accountId, 'all');
    otherKey = await t.key(other.accountId, 'all');
  });
  afterAll(async () => t?.close());

  it('create: USER plus the password shown once (chosen or generated, ≥ 20 characters); show and list return USER', async () => {
    const chosen = await call('POST', USERS, {
      username: 'alice',
      password: 'alice-password-1',
      traffic_limit: '50GiB',
      max_connections: 5,
      rate_limit: '10mbit',
      expires_at: '2027-01-01T00:00:00Z',
      allow: ['example.com', '203.0.113.0/24'],
      deny: ['*.bad.example'],
    });
    expect(chosen.status).toBe(200);
    expect(chosen.body.code).toBe(200);
    expect(chosen.body.data).toEqual({
      username: 'alice',
      status: 'active',
      created_at: '2026-11-21T10:00:00Z',
      traffic_limit: 50 * 2 ** 30,
      max_connections: 5,
      rate_limit: '10mbit',
      expires_at: '2027-01-01T00:00:00Z',
      allow: ['example.com', '203.0.113.0/24'],
      deny: ['*.bad.example'],
      used: { bytes_up: 0, bytes_down: 0, period_start: '2026-11-01T00:00:00Z' },
      password: 'alice-password-1',
    });
    const generated = await call('POST', USERS, { username: 'bob', status: 'disabled' });
    expect(generated.body.code).toBe(200);
    expect(generated.body.data.password).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    expect(generated.body.data).toMatchObject({
      username: 'bob',
      status: 'disabled',
      traffic_limit: null,
      max_connections: null,
      rate_limit: null,
      expires_at: null,
      allow: [],
      deny: [],
    });

    const shown = await call('GET', userPath('alice'));
    expect(shown.body.code).toBe(200);
    const { password: _p, ...alice } = chosen.body.data;
    expect(shown.body.data).toEqual(alice);
    expect(JSON.stringify(shown.body)).not.toContain('alice-password-1');

    const list = await call('GET', USERS);
    expect(list.body.data).toMatchObject({ page: 1, page_size: 20, total: 2 });
    expect(list.body.data.items.map((u: { username: string }) => u.username)).toEqual(['alice', 'bob']);
    expect(list.body.data.items[0]).toEqual(alice);
  });

  it('list: page, page_size, status and q (a username prefix); bad or unknown parameters → 10400 naming them', async () => {
    for (const u of ['carol', 'carl', 'dave']) expect((await call('POST', USERS, { username: u })).body.code).toBe(200);
    const names = async (query: string) =>
      ((await call('GET', `${USERS}${query}`)).body.data.items as Array<{ username: string }>).map((u) => u.username);
    expect(await names('?q=car')).toEqual(['carl', 'carol']);
    expect(await names('?status=disabled')).toEqual(['bob']);
    expect(await names('?status=active&page_size=2&page=2')).toEqual(['carol', 'dave']);
    expect((await call('GET', `${USERS}?page_size=2&page=2`)).body.data).toMatchObject({
      page: 2,
      page_size: 2,
      total: 5,
    });
    expect(await names('?page=9')).toEqual([]);
    // `_` and `%` are themselves, not patterns.
    expect(await names('?q=_')).toEqual([]);
    for (const [query, field] of [
      ['?page_size=101', 'page_size'],
      ['?page=0', 'page'],
      ['?status=gone', 'status'],
      ['?q=a%20b', 'q'],
      ['?sort=name', 'sort'],
      ['?q=a&q=b', 'q'],
    ] as const) {
      const r = await call('GET', `${USERS}${query}`);
      expect({ query, code: r.body.code }).toEqual({ query, code: 10400 });
      expect(r.body.message).toContain(field);
    }
  });

  it("10404 with the same body for an absent user and another account's, on every user endpoint", async () => {
    expect((await call('POST', USERS, { username: 'theirs' }, {}, otherKey.key)).body.code).toBe(200);
    const answers = new Set<string>();
    for (const name of ['nobody', 'theirs', 'bad name!', 'x']) {
      for (const [method, url, body] of [
        ['GET', userPath(name), undefined],
        ['PATCH', userPath(name), { status: 'disabled' }],
        ['POST', `${userPath(name)}/password`, {}],
        ['DELETE', userPath(name), undefined],
      ] as const) {
        const r = await call(method, url, body);
        expect({ method, name, status: r.status }).toEqual({ method, name, status: 404 });
        answers.add(JSON.stringify({ ...r.body, requestId: '' }));
      }
    }
    expect([...answers]).toEqual([
      JSON.stringify({ code: 10404, message: 'not found: no such proxy user', requestId: '', data: null }),
    ]);
    // Theirs is untouched.
    expect((await call('GET', userPath('theirs'), undefined, {}, otherKey.key)).body.data.status).toBe('active');
  });

  it("a taken username → 409 10409 (this account's or another's), nothing changed", async () => {
    for (const name of ['alice', 'theirs']) {
      const r = await call('POST', USERS, { username: name, password: 'another-password-1' });
      expect({ status: r.status, code: r.body.code }).toEqual({ status: 409, code: 10409 });
      expect(r.body.message).toContain(name);
    }
    expect(await total()).toBe(5);
  });

  it('unknown and malformed fields → 10400 naming the field, nothing created', async () => {
    const before = await total();
    const cases: Array<[unknown, string]> = [
      [{ username: 'newbie', colour: 'red' }, 'colour'],
      [{}, 'username'],
      [{ username: 42 }, 'username'],
      [{ username: 'ab' }, 'username'],
      [{ username: 'has space' }, 'username'],
      [{ username: 'eve-session-1' }, '-session-'],
      [{ username: 'eve-country-us' }, '-country-'],
      [{ username: 'eve-city-paris' }, '-city-'],
      [{ username: 'newbie', password: 'short' }, 'password'],
      [{ username: 'newbie', password: 'bad\npassword-long' }, 'password'],
      [{ username: 'newbie', password: 7 }, 'password'],
      [{ username: 'newbie', status: 'paused' }, 'status'],
      [{ username: 'newbie', traffic_limit: 'lots' }, 'traffic_limit'],
      [{ username: 'newbie', traffic_limit: -1 }, 'traffic_limit'],
      [{ username: 'newbie', traffic_limit: true }, 'traffic_limit'],
      // Whole and over 1, but past 2^53 - 1: the message names the bound (it said "at least 1").
      [{ username: 'newbie', traffic_limit: 1e300 }, 'traffic_limit (a whole number of bytes, 1 to 9007199254740991'],
      [{ username: 'newbie', traffic_limit: '9000000TiB' }, 'up to 9007199254740991 bytes'],
      [{ username: 'newbie', max_connections: 0 }, 'max_connections'],
      [{ username: 'newbie', max_connections: '5' }, 'max_connections'],
      [{ username: 'newbie', rate_limit: '10 parsecs' }, 'rate_limit'],
      [{ username: 'newbie', expires_at: 'tomorrow' }, 'expires_at'],
      [{ username: 'newbie', expires_at: '2026-02-30' }, 'expires_at'],
      [{ username: 'newbie', allow: 'example.com' }, 'allow'],
      [{ username: 'newbie', allow: ['exa mple.com'] }, 'exa mple.com'],
      [{ username: 'newbie', deny: ['10.0.0.1/8'] }, 'deny'],
      [{ username: 'newbie', deny: ['a.com,b.com'] }, 'deny'],
      [[{ username: 'newbie' }], 'body'],
      ['{"username":"newbie"} {}', 'body'],
      ['{"username":"newbie","username":"other"}', 'duplicate key username'],
    ];
    for (const [body, named] of cases) {
      const r = await call('POST', USERS, body);
      expect({ body, status: r.status, code: r.body.code }).toEqual({ body, status: 200, code: 10400 });
      expect(r.body.message, JSON.stringify(body)).toContain(named);
    }
    const notJson = await t.app.inject({
      method: 'POST',
      url: USERS,
      headers: { ...bearer(key.key), 'content-type': 'text/plain' },
      payload: '{"username":"newbie"}',
    });
    expect(notJson.json().code).toBe(10400);
    // Larger than the 256 KiB bound: refused whole.
    const big = await call('POST', USERS, {
      username: 'newbie',
      allow: Array.from({ length: 20_000 }, (_, i) => `host${i}.example.com`),
    });
    expect(big.body.code).toBe(10400);
    expect(await total()).toBe(before);
  });

  it('batch: each item on its own (10400 naming the field, 10409 taken or twice), created passwords once; > 100 → 10413; a malformed item refuses the whole request', async () => {
    const before = await total();
    const r = await call('POST', PROXY_PATHS.usersBatch, {
      items: [
        { username: 'batch-a' },
        { username: 'batch-b', password: 'batch-b-password', max_connections: 3 },
        { username: 'alice' },
        { username: 'batch-a' },
        { username: 'x-session-y' },
        { username: 'batch-c', rate_limit: 'fast' },
        { username: 'batch-d', deny: ['evil.example'] },
      ],
    });
    expect(r.body.code).toBe(10431);
    expect(r.body.message).toBe('3 succeeded, 4 failed');
    expect(r.body.data.success_count).toBe(3);
    expect(r.body.data.failed_count).toBe(4);
    expect(r.body.data.failed_items.map((f: { username: string; code: number }) => [f.username, f.code])).toEqual([
      ['alice', 10409],
      ['batch-a', 10409],
      ['x-session-y', 10400],
      ['batch-c', 10400],
    ]);
    expect(r.body.data.failed_items[2].reason).toContain('-session-');
    expect(r.body.data.failed_items[3].reason).toContain('items.5.rate_limit');
    expect(r.body.data.created.map((c: { username: string }) => c.username)).toEqual(['batch-a', 'batch-b', 'batch-d']);
    expect(r.body.data.created[1].password).toBe('batch-b-password');
    expect(r.body.data.created[0].password).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    expect((await call('GET', userPath('batch-b'))).body.data.max_connections).toBe(3);
    expect((await call('GET', userPath('batch-d'))).body.data.deny).toEqual(['evil.example']);
    expect(await total()).toBe(before + 3);

    const all = await call('POST', PROXY_PATHS.usersBatch, { items: [{ username: 'batch-e' }] });
    expect(all.body.code).toBe(200);
    expect(all.body.data).toMatchObject({ success_count: 1, failed_count: 0, failed_items: [] });

    const tooMany = await call('POST', PROXY_PATHS.usersBatch, {
      items: Array.from({ length: 101 }, (_, i) => ({ username: `many-${i}` })),
    });
    expect(tooMany.body.code).toBe(10413);
    for (const [body, named] of [
      [{ items: [] }, 'items'],
      [{ items: 'x' }, 'items'],
      [{}, 'items'],
      [{ items: [{ username: 'fine-1' }], extra: 1 }, 'extra'],
      [{ items: [{ username: 'fine-1' }, { username: 'fine-2', colour: 'red' }] }, 'items.1.colour'],
      [{ items: [{ username: 'fine-1' }, { username: 'fine-2', max_connections: 'x' }] }, 'items.1.max_connections'],
      [{ items: [{ username: 'fine-1' }, 'fine-2'] }, 'items.1'],
    ] as const) {
      const bad = await call('POST', PROXY_PATHS.usersBatch, body);
      expect({ body, code: bad.body.code }).toEqual({ body, code: 10400 });
      expect(bad.body.message).toContain(named);
    }
    expect(await total()).toBe(before + 4);
  });

  it('PATCH: any field but username and password; null clears a limit; status; bad values → 10400 naming them, nothing changed', async () => {
    const r = await call('PATCH', userPath('alice'), {
      traffic_limit: null,
      max_connections: 9,
      status: 'disabled',
      allow: [],
      deny: ['10.0.0.0/8'],
      expires_at: null,
    });
    expect(r.body.code).toBe(200);
    expect(r.body.data).toMatchObject({
      username: 'alice',
      status: 'disabled',
      traffic_limit: null,
      max_connections: 9,
      rate_limit: '10mbit',
      expires_at: null,
      allow: [],
      deny: ['10.0.0.0/8'],
    });
    const kept = (await call('GET', userPath('alice'))).body.data;
    for (const [body, named] of [
      [{ username: 'alice2' }, 'username'],
      [{ password: 'new-password-123' }, 'password'],
      [{ max_connections: -3 }, 'max_connections'],
      [{ status: 'on' }, 'status'],
      [{ rate_limit: 'x', max_connections: 2 }, 'rate_limit'],
      [{ deny: ['ok.example', 'exa mple'] }, 'exa mple'],
      [{ allow: ['none'] }, 'allow ("none": write [] to empty the list)'],
      [{ nickname: 'al' }, 'nickname'],
      ['[]', 'body'],
    ] as const) {
      const bad = await call('PATCH', userPath('alice'), body);
      expect({ body, code: bad.body.code }).toEqual({ body, code: 10400 });
      expect(bad.body.message).toContain(named);
    }
    expect((await call('GET', userPath('alice'))).body.data).toEqual(kept);
    // Back on, limits cleared: no settings left.
    const cleared = await call('PATCH', userPath('alice'), {
      status: 'active',
      max_connections: null,
      rate_limit: null,
      deny: [],
    });
    expect(cleared.body.data).toMatchObject({
      status: 'active',
      traffic_limit: null,
      max_connections: null,
      rate_limit: null,
      expires_at: null,
      allow: [],
      deny: [],
    });
    // Nothing to change: the user as it is.
    expect((await call('PATCH', userPath('alice'), {})).body.data).toEqual(cleared.body.data);
  });

  it('password rotation: given or generated, in the answer once; DELETE answers {username} and the user is gone', async () => {
    const given = await call('POST', `${userPath('carl')}/password`, { password: 'carl-new-password' });
    expect(given.body).toMatchObject({ code: 200, data: { username: 'carl', password: 'carl-new-password' } });
    const generated = await call('POST', `${userPath('carl')}/password`);
    expect(generated.body.data.password).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    expect((await call('POST', `${userPath('carl')}/password`, { password: 'short' })).body.code).toBe(10400);
    expect(
      (await call('POST', `${userPath('carl')}/password`, { password: 'long-enough-1', extra: 1 })).body.message,
    ).toContain('extra');
    const del = await call('DELETE', userPath('carl'));
    expect(del.body).toMatchObject({ code: 200, data: { username: 'carl' } });
    expect((await call('GET', userPath('carl'))).status).toBe(404);
    expect((await call('DELETE', userPath('carl'))).status).toBe(404);
  });

  it('target rules: GET and PUT (each list given replaces it, [] empties it); a bad item → 10400 naming it, nothing changes', async () => {
    expect((await call('GET', PROXY_PATHS.rules)).body.data).toEqual({ allow: [], deny: [] });
    const put = await call('PUT', PROXY_PATHS.rules, { deny: ['Bad.Example.', '192.0.2.0/24'], allow: [] });
    expect(put.body).toMatchObject({ code: 200, data: { deny: ['bad.example', '192.0.2.0/24'], allow: [] } });
    for (const [body, named] of [
      [{ deny: ['fine.example', 'not a name'] }, 'not a name'],
      [{ allow: ['10.0.0.1/8'] }, '10.0.0.1/8'],
      [{ deny: 'x.example' }, 'deny'],
      [{ block: [] }, 'block'],
      // The text forms' word for an empty list is no item here: it would have emptied the list ([] does that).
      [{ deny: ['none'] }, '"none": write [] to empty the list'],
      [{ allow: [' None '] }, '"none": write [] to empty the list'],
    ] as const) {
      const bad = await call('PUT', PROXY_PATHS.rules, body);
      expect({ body, code: bad.body.code }).toEqual({ body, code: 10400 });
      expect(bad.body.message).toContain(named);
    }
    expect((await call('GET', PROXY_PATHS.rules)).body.data).toEqual({
      allow: [],
      deny: ['bad.example', '192.0.2.0/24'],
    });
    expect((await call('PUT', PROXY_PATHS.rules, { deny: [] })).body.data).toEqual({ allow: [], deny: [] });
  });

  it('gateway: any scope; the listeners as customers reach them, UDP, locations', async () => {
    const usageOnly = await t.key(acc.accountId, ['usage:read']);
    Object.assign(t.ctx.gateway, {
      http: { host: '127.0.0.1', port: 3128 },
      socks5: { host: '127.0.0.1', port: 1080 },
      publicHost: 'proxy.example.com',
      location: { country: 'us', city: 'nyc' },
    });
    const r = await call('GET', PROXY_PATHS.gateway, undefined, {}, usageOnly.key);
    expect(r.body).toMatchObject({
      code: 200,
      data: {
        http: 'proxy.example.com:3128',
        socks5: 'proxy.example.com:1080',
        udp: true,
        locations: [{ country: 'us', cities: ['nyc'], exits: 1 }],
      },
    });
    expect((await call('GET', `${PROXY_PATHS.gateway}?x=1`)).body.code).toBe(10400);
  });

  it('scopes: reads need users:read / rules:read, writes users:write / rules:write (403 10403 naming it)', async () => {
    const readOnly = await t.key(acc.accountId, ['users:read', 'rules:read']);
    expect((await call('GET', USERS, undefined, {}, readOnly.key)).body.code).toBe(200);
    for (const [method, url, body, scope] of [
      ['POST', USERS, { username: 'scoped' }, 'users:write'],
      ['POST', PROXY_PATHS.usersBatch, { items: [{ username: 'scoped' }] }, 'users:write'],
      ['PATCH', userPath('alice'), { status: 'disabled' }, 'users:write'],
      ['DELETE', userPath('alice'), undefined, 'users:write'],
      ['POST', `${userPath('alice')}/password`, {}, 'users:write'],
      ['PUT', PROXY_PATHS.rules, { deny: [] }, 'rules:write'],
    ] as const) {
      const r = await call(method, url, body, {}, readOnly.key);
      expect({ url, method, status: r.status, code: r.body.code, message: r.body.message }).toEqual({
        url,
        method,
        status: 403,
        code: 10403,
        message: `the key lacks scope ${scope}`,
      });
    }
    const usersOnly = await t.key(acc.accountId, ['users:write']);
    expect((await call('GET', USERS, undefined, {}, usersOnly.key)).body.message).toBe(
      'the key lacks scope users:read',
    );
    expect((await call('GET', PROXY_PATHS.rules, undefined, {}, usersOnly.key)).body.message).toBe(
      'the key lacks scope rules:read',
    );
    expect((await call('GET', USERS, undefined, { authorization: `Bearer ${acc.token}` })).status).toBe(401);
  });

  it('405 with Allow for a method a path does not take; GET …/users/batch is the user named batch', async () => {
    const r = await call('PUT', USERS, {});
    expect(r.status).toBe(405);
    expect(r.headers.allow).toBe('GET, HEAD, POST');
    expect((await call('POST', userPath('alice'), {})).headers.allow).toBe('GET, HEAD, PATCH, DELETE');
    expect((await call('GET', PROXY_PATHS.usersBatch)).status).toBe(404);
  });

  it('Idempotency-Key: the same request again → the first answer with Idempotent-Replayed, nothing done; another body → 409; a bad key → 10400', async () => {
    const before = await total();
    const idem = { 'idempotency-key': 'create-frank-1' };
    const first = await call('POST', USERS, { username: 'frank' }, idem);
    expect(first.body.code).toBe(200);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const again = await call('POST', USERS, { username: 'frank' }, idem);
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body); // the first answer, its password and request id included
    // Header and body name one request id (SPEC 3.1): the first one's, on the replay too.
    expect(first.headers['x-request-id']).toBe(first.body.requestId);
    expect(again.headers['x-request-id']).toBe(first.body.requestId);
    expect(await total()).toBe(before + 1);
    if (t.store.dataDir && backend === 'sqlite') {
      // The kept answer is sealed: the password shown once is not in the database in the clear.
      const db = await inspectDb(t.store.dataDir);
      try {
        const rows = db.all<{ response: string }>('SELECT response FROM idempotency_keys');
        expect(rows.length).toBeGreaterThan(0);
        for (const r of rows) expect(r.response).not.toContain(first.body.data.password);
        expect(rows.map((r) => r.response).join('')).not.toContain('"password"');
      } finally {
        db.close();
      }
    }
    const other = await call('POST', USERS, { username: 'frank2' }, idem);
    expect({ status: other.status, code: other.body.code }).toEqual({ status: 409, code: 10409 });
    expect(other.body.message).toContain('Idempotency-Key');
    const otherPath = await call('POST', PROXY_PATHS.usersBatch, { username: 'frank' }, idem);
    expect(otherPath.body.code).toBe(10409);
    // Another account's key with the same Idempotency-Key is its own.
    expect((await call('POST', USERS, { username: 'frank-theirs' }, idem, otherKey.key)).body.code).toBe(200);
    for (const bad of ['', 'x'.repeat(256), 'tab\there', 'é']) {
      const r = await t.app.inject({
        method: 'POST',
        url: USERS,
        headers: { ...bearer(key.key), 'content-type': 'application/json', 'idempotency-key': bad },
        payload: '{"username":"gina"}',
      });
      expect({ bad, code: r.json().code }).toEqual({ bad, code: 10400 });
      expect(r.json().message).toContain('Idempotency-Key');
    }
    // Sent twice (Node would join them into "a, b", itself a valid key): refused, nothing done.
    const twice = await t.app.inject({
      method: 'POST',
      url: USERS,
      headers: { ...bearer(key.key), 'content-type': 'application/json', 'idempotency-key': ['gina-1', 'gina-2'] },
      payload: '{"username":"gina"}',
    });
    expect(twice.json().code).toBe(10400);
    expect(twice.json().message).toBe('invalid parameters: Idempotency-Key (sent more than once)');
    expect((await call('GET', userPath('gina'))).status).toBe(404);
    // A refusal is kept too: the same request again gets it again.
    const taken = await call('POST', USERS, { username: 'alice' }, { 'idempotency-key': 'taken-1' });
    const takenAgain = await call('POST', USERS, { username: 'alice' }, { 'idempotency-key': 'taken-1' });
    expect(takenAgain.body).toEqual(taken.body);
    expect(takenAgain.headers['idempotent-replayed']).toBe('true');
    // PATCH, DELETE, the rotation and PUT take it alike.
    const rot = { 'idempotency-key': 'rotate-frank' };
    const p1 = await call('POST', `${userPath('frank')}/password`, {}, rot);
    const p2 = await call('POST', `${userPath('frank')}/password`, {}, rot);
    expect(p2.body.data.password).toBe(p1.body.data.password);
    const d1 = await call('DELETE', userPath('frank'), undefined, { 'idempotency-key': 'del-frank' });
    const d2 = await call('DELETE', userPath('frank'), undefined, { 'idempotency-key': 'del-frank' });
    expect([d1.body.code, d2.body.code, d2.headers['idempotent-replayed']]).toEqual([200, 200, 'true']);
    // 24 h later the key is forgotten: it runs again.
    t.clock.now += 24 * 3_600_000 + 1000;
    try {
      const later = await call('POST', USERS, { username: 'frank' }, idem);
      expect(later.body.code).toBe(200);
      expect(later.headers['idempotent-replayed']).toBeUndefined();
    } finally {
      t.clock.now -= 24 * 3_600_000 + 1000;
    }
  });

  it('Idempotency-Key: two requests with one key at once → one user, both get its answer', async () => {
    const before = await total();
    const idem = { 'idempotency-key': 'race-1' };
    const answers = await Promise.all(
      Array.from({ length: 6 }, () =>
        call('POST', PROXY_PATHS.usersBatch, { items: [{ username: 'racer-1' }, { username: 'racer-2' }] }, idem),
      ),
    );
    expect(new Set(answers.map((a) => JSON.stringify(a.body))).size).toBe(1);
    expect(answers[0]!.body.data.success_count).toBe(2);
    expect(answers.filter((a) => a.headers['idempotent-replayed'] === 'true')).toHaveLength(5);
    expect(await total()).toBe(before + 2);
  });

  it('every write is audited with the key as actor, never a password', async () => {
    const { rows } = await t.store.audit.list({ accountId: acc.accountId, limit: 500, offset: 0 });
    const actions = new Set(rows.map((r) => r.action));
    for (const a of [
      'proxy_user.created',
      'proxy_user.changed',
      'proxy_user.password_rotated',
      'proxy_user.deleted',
      'rules.changed',
    ])
      expect(actions).toContain(a);
    const mine = rows.filter((r) => r.action.startsWith('proxy_user.') || r.action === 'rules.changed');
    for (const r of mine) expect(r.actor).toEqual({ type: 'key', id: key.id });
    const created = rows.find((r) => r.action === 'proxy_user.created' && r.target === 'alice')!;
    expect(created.details).toMatchObject({
      password: 'chosen',
      max_connections: 5,
      allow: ['example.com', '203.0.113.0/24'],
    });
    const text = JSON.stringify(rows);
    for (const secret of ['alice-password-1', 'batch-b-password', 'carl-new-password'])
      expect(text).not.toContain(secret);
    // One record per user created by a batch; none for a refused item.
    expect(rows.filter((r) => r.action === 'proxy_user.created' && r.target === 'x-session-y')).toHaveLength(0);
    // The chain still verifies.
    expect((await verifyChains(t.store, acc.accountId)).problems).toEqual([]);
  });
});

describe('/openapi.json: the proxy users, rules and gateway endpoints', () => {
  it('each with the bearer scheme and its scope, its request schema, 404 where a user is named, Idempotency-Key on writes', async () => {
    const t = await makeTestApp();
    try {
      const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
      const ops: Array<[string, string, string]> = [
        ['/openapi/v1/proxy/users', 'get', 'users:read'],
        ['/openapi/v1/proxy/users', 'post', 'users:write'],
        ['/openapi/v1/proxy/users/batch', 'post', 'users:write'],
        ['/openapi/v1/proxy/users/{username}', 'get', 'users:read'],
        ['/openapi/v1/proxy/users/{username}', 'patch', 'users:write'],
        ['/openapi/v1/proxy/users/{username}', 'delete', 'users:write'],
        ['/openapi/v1/proxy/users/{username}/password', 'post', 'users:write'],
        ['/openapi/v1/proxy/rules', 'get', 'rules:read'],
        ['/openapi/v1/proxy/rules', 'put', 'rules:write'],
        ['/openapi/v1/proxy/gateway', 'get', 'any'],
      ];
      for (const [path, method, scope] of ops) {
        const op = doc.paths[path][method];
        expect({ path, method, security: op.security, scope: op['x-scope'] }).toEqual({
          path,
          method,
          security: [{ bearer: scope === 'any' ? [] : [scope] }],
          scope,
        });
        const params = (op.parameters ?? []).map((p: { name: string }) => p.name);
        if (method !== 'get') expect(params, `${method} ${path}`).toContain('Idempotency-Key');
        if (path.includes('{username}')) expect(op.responses['404'], `${method} ${path}`).toBeDefined();
        expect(JSON.stringify(op['x-codeSamples'])).toContain('Authorization: Bearer <API_KEY>');
      }
      expect(
        doc.paths['/openapi/v1/proxy/users'].post.requestBody.content['application/json'].schema.properties.username,
      ).toBeDefined();
      expect(doc.paths['/openapi/v1/proxy/users'].get.parameters.map((p: { name: string }) => p.name)).toEqual([
        'page',
        'page_size',
        'status',
        'q',
      ]);
    } finally {
      await t.close();
    }
  });
});

describe('hostile bodies on the proxy-user endpoints, with a good key (SQLite)', () => {
  it('any JSON or bytes to any write: an envelope, never a 5xx, and nothing made from a malformed request', async () => {
    const fc = await import('fast-check');
    const t = await makeTestApp({ limits: { keyReads: 1_000_000, keyWrites: 1_000_000 } });
    try {
      const acc = await t.account('hostile-users@example.com');
      const { key } = await t.key(acc.accountId, 'all');
      const field = fc.constantFrom(
        'username',
        'password',
        'status',
        'traffic_limit',
        'max_connections',
        'rate_limit',
        'expires_at',
        'allow',
        'deny',
        'items',
        '__proto__',
        'constructor',
      );
      const value = fc.oneof(
        fc.jsonValue({ maxDepth: 3 }),
        fc.string({ maxLength: 80 }),
        fc.constantFrom(
          'alice',
          'x-session-y',
          '50GiB',
          '10mbit',
          '2027-01-01',
          ['example.com'],
          ['10.0.0.1/8'],
          -1,
          1e308,
          null,
        ),
      );
      const userish = fc.dictionary(field, value, { maxKeys: 6 });
      const body = fc.oneof(
        userish.map((o) => JSON.stringify(o)),
        fc.array(userish, { maxLength: 5 }).map((items) => JSON.stringify({ items })),
        fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
        fc.string({ maxLength: 200 }),
        fc.constantFrom(
          '{"username":"a1b","username":"c2d"}',
          '{"items":[{"username":"zz1"}]}{}',
          '{"__proto__":{"status":"disabled"},"username":"proto1"}',
          `{"items":${'['.repeat(10_000)}${']'.repeat(10_000)}}`,
        ),
      );
      const target = fc.constantFrom<[string, string]>(
        ['POST', USERS],
        ['POST', PROXY_PATHS.usersBatch],
        ['PATCH', `${USERS}/fuzzed`],
        ['POST', `${USERS}/fuzzed/password`],
        ['PUT', PROXY_PATHS.rules],
        ['DELETE', `${USERS}/fuzzed`],
      );
      await t.app.inject({
        method: 'POST',
        url: USERS,
        headers: { ...bearer(key), 'content-type': 'application/json' },
        payload: '{"username":"fuzzed"}',
      });
      await fc.assert(
        fc.asyncProperty(
          target,
          body,
          fc.option(fc.constantFrom('application/json', 'text/plain', 'application/json; charset=latin1')),
          async ([method, url], payload, type) => {
            const r = await t.app.inject({
              method: method as 'POST',
              url,
              headers: { ...bearer(key), ...(type ? { 'content-type': type } : {}) },
              payload,
            });
            expect(r.statusCode).toBeLessThan(500);
            const env = r.json();
            expect(Object.keys(env).sort()).toEqual(['code', 'data', 'message', 'requestId']);
            expect([200, 10400, 10404, 10409, 10413, 10431]).toContain(env.code);
          },
        ),
        { numRuns: Number(process.env.FUZZ_RUNS ?? 300) },
      );
      // Nothing reached the prototype.
      expect(({} as Record<string, unknown>).status).toBeUndefined();
    } finally {
      await t.close();
    }
  }, 120_000);
});
