// API key authentication on a real database (both backends): one 401 body for every cause, in the invalid-credential
// budget the whitelist's tokens share; 10403 naming a missing scope; the per-key limits; the token refused off the
// whitelist and a key refused on it; the 20-key limit; last use recorded without a write per request.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PATHS, AUDIT_PATH, USAGE_PATHS } from '../../../src/contract/paths.js';
import {
  SCOPES,
  parseAllowedIps,
  parseApiKey,
  parseScopes,
  sourceAllowed,
  type Scope,
} from '../../../src/contract/scopes.js';
import { ApiKeyService, KeyLimitError } from '../../../src/daemon/services/api-keys.js';
import { bearer, makeTestApp, q, type TestApp } from '../../helpers/app.js';
import { MemoryWindowStore } from '../../../src/daemon/ratelimit/limiter.js';
import { BACKENDS } from '../../helpers/postgres.js';

const UNIFORM_401 = JSON.stringify({ code: 10401, message: 'invalid api key', requestId: '', data: null });
const ctx = { actor: { type: 'operator' as const, id: 'test' }, sourceIp: null, requestId: null };

/** Every endpoint a key opens, with the scope it needs (this branch's; the users/rules ones have their own tests). */
const KEY_ENDPOINTS: Array<{ url: string; scope: Scope }> = [
  { url: USAGE_PATHS.summary, scope: 'usage:read' },
  { url: `${USAGE_PATHS.series}?granularity=day`, scope: 'usage:read' },
  { url: USAGE_PATHS.domains, scope: 'usage:read' },
  { url: AUDIT_PATH, scope: 'audit:read' },
];

describe('the key format and field rules (contract)', () => {
  it('parses pxk_<id>_<secret> and nothing else', () => {
    expect(parseApiKey('pxk_0123abcd_abcdefghijklmnopqrstuv')).toEqual({
      id: '0123abcd',
      secret: 'abcdefghijklmnopqrstuv',
    });
    expect(parseApiKey('pxk_0123abcd_abc_def-ghijklmnopqrstuv')).toEqual({
      id: '0123abcd',
      secret: 'abc_def-ghijklmnopqrstuv',
    });
    for (const bad of [
      '',
      'pxk_',
      'pxk_ab_short',
      'pxk__abcdefghijklmnopqrstuv',
      'PXK_ab_abcdefghijklmnopqrstuv',
      'pxk_a-b_abcdefghijklmnopqrstuv',
      'pxk_ab_abcdefghijklmnopqrstuv ',
      `pxk_ab_${'a'.repeat(500)}`,
    ]) {
      expect(parseApiKey(bad), bad).toBeNull();
    }
  });

  it('scopes: known, non-empty, canonical order; sources: addresses and CIDRs of both families', () => {
    expect(parseScopes('users:write, usage:read,usage:read')).toEqual(['usage:read', 'users:write']);
    expect(() => parseScopes('')).toThrow(/scopes/);
    expect(() => parseScopes('admin')).toThrow(/unknown scope "admin"/);
    expect(parseAllowedIps('203.0.113.7, 10.1.2.3/8,2001:DB8::1/32,::ffff:198.51.100.1')).toEqual([
      '203.0.113.7',
      '10.0.0.0/8',
      '2001:db8::/32',
      '198.51.100.1',
    ]);
    for (const bad of ['1.2.3', '01.2.3.4', '1.2.3.4/33', '1.2.3.4/', 'example.com', '::/129'])
      expect(() => parseAllowedIps(bad), bad).toThrow(/allowed_ips/);
    expect(sourceAllowed('10.9.9.9', ['10.0.0.0/8'])).toBe(true);
    expect(sourceAllowed('11.0.0.1', ['10.0.0.0/8'])).toBe(false);
    expect(sourceAllowed('2001:db8::5', ['2001:db8::/32'])).toBe(true);
    expect(sourceAllowed('127.0.0.1', [])).toBe(true);
  });
});

/**
 * Each backend, and PostgreSQL twice: with its limits in the database (the lock-out, the key, the scope and the
 * limits in one call, proxyd_key_admit) and in memory (the stepwise checks), which must answer alike.
 */
type Mode = { name: string; backend: (typeof BACKENDS)[number]; stepwise: boolean };
const MODES: Mode[] = BACKENDS.flatMap((backend): Mode[] =>
  backend === 'postgres'
    ? [
        { name: 'postgres, one call', backend, stepwise: false },
        { name: 'postgres, stepwise', backend, stepwise: true },
      ]
    : [{ name: backend, backend, stepwise: true }],
);
const appFor = (m: Mode, o: Parameters<typeof makeTestApp>[0] = {}) =>
  makeTestApp({
    ...o,
    backend: m.backend,
    ...(m.stepwise && m.backend === 'postgres' ? { windowStore: new MemoryWindowStore() } : {}),
  });

describe.each(MODES)('API keys ($name)', (mode) => {
  let t: TestApp;
  let acc: { accountId: number; token: string };
  let full: { key: string; id: string };
  let nextSource = 1;
  /** A fresh source address per test: the invalid-credential budget is per source. */
  const source = () => `198.51.100.${nextSource++}`;

  async function call(url: string, headers: Record<string, string | string[]>, remoteAddress = '127.0.0.1') {
    const r = await t.app.inject({ method: 'GET', url, headers, remoteAddress });
    return {
      status: r.statusCode,
      headers: r.headers,
      body: r.json() as { code: number; message: string; requestId: string; data: any },
    };
  }

  beforeAll(async () => {
    t = await appFor(mode);
    acc = await t.account('keys@example.com');
    full = await t.key(acc.accountId, 'all');
  });
  afterAll(async () => t?.close());

  it('a key with the scope opens its endpoints; the scheme is case-insensitive', async () => {
    for (const e of KEY_ENDPOINTS) {
      const r = await call(e.url, bearer(full.key));
      expect({ url: e.url, code: r.body.code }).toEqual({ url: e.url, code: 200 });
    }
    expect((await call(USAGE_PATHS.summary, { authorization: `bearer ${full.key}` })).body.code).toBe(200);
  });

  it('401 with one body for every cause: unknown, malformed, Authorization repeated, wrong secret, revoked, expired, wrong source, account suspended, key in the query or X-API-Key, the token', async () => {
    const keys = new ApiKeyService(t.store, () => t.clock.now);
    const revoked = await t.key(acc.accountId, ['usage:read']);
    expect(await keys.revoke(acc.accountId, revoked.id, ctx)).not.toBeNull();
    const expiring = await t.key(acc.accountId, ['usage:read'], { expiresAtMs: t.clock.now + 60_000 });
    const elsewhere = await t.key(acc.accountId, ['usage:read'], { allowedIps: ['192.0.2.0/24', '2001:db8::/32'] });
    const other = await t.account('keys-suspended@example.com');
    const suspended = await t.key(other.accountId, ['usage:read']);
    await t.store.accounts.setStatus(other.accountId, 'suspended');
    const [, id] = /^pxk_([^_]+)_/.exec(full.key)!;
    const causes: Array<[string, Record<string, string | string[]>, string?]> = [
      ['no header', {}],
      ['empty bearer', { authorization: 'Bearer ' }],
      ['not a key', { authorization: 'Bearer nonsense' }],
      ['unknown id', bearer('pxk_ffffffffffffffff_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG')],
      ['wrong secret', bearer(`pxk_${id}_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG`)],
      ['truncated', bearer(full.key.slice(0, 30))],
      ['Authorization twice (both the good key)', { authorization: [`Bearer ${full.key}`, `Bearer ${full.key}`] }],
      ['Authorization twice (a good key first)', { authorization: [`Bearer ${full.key}`, 'Bearer nonsense'] }],
      ['basic scheme', { authorization: `Basic ${Buffer.from(`x:${full.key}`).toString('base64')}` }],
      ['revoked', bearer(revoked.key)],
      ['wrong source', bearer(elsewhere.key)],
      ['account suspended', bearer(suspended.key)],
      ['X-API-Key', { 'x-api-key': full.key }],
      ['token as bearer', bearer(acc.token)],
      ['key in the query', {}, `?api_key=${encodeURIComponent(full.key)}`],
      ['token in the query', {}, q(acc.token)],
    ];
    const bodies = new Set<string>();
    const from = source();
    for (const [cause, headers, query] of causes) {
      const r = await call(`${USAGE_PATHS.summary}${query ?? ''}`, headers, from);
      expect({ cause, status: r.status, challenge: r.headers['www-authenticate'] }).toEqual({
        cause,
        status: 401,
        challenge: 'Bearer realm="proxyd"',
      });
      bodies.add(JSON.stringify({ ...r.body, requestId: '' }));
    }
    // Expiry: it works until then, not a second after.
    expect((await call(USAGE_PATHS.summary, bearer(expiring.key), source())).status).toBe(200);
    t.clock.now += 60_000;
    try {
      const r = await call(USAGE_PATHS.summary, bearer(expiring.key), from);
      expect(r.status).toBe(401);
      bodies.add(JSON.stringify({ ...r.body, requestId: '' }));
    } finally {
      t.clock.now -= 60_000;
    }
    expect([...bodies]).toEqual([UNIFORM_401]);
    // The allowed sources are the key's: from inside them it works.
    expect((await call(USAGE_PATHS.summary, bearer(elsewhere.key), '192.0.2.77')).body.code).toBe(200);
    expect((await call(USAGE_PATHS.summary, bearer(elsewhere.key), '2001:db8::9')).body.code).toBe(200);
  });

  it('refusals count in the per-source budget the tokens use: past 20, even a good key or token gets 429 from that source', async () => {
    const from = source();
    for (let i = 0; i < 12; i++)
      expect((await call(USAGE_PATHS.summary, bearer('pxk_00_abcdefghijklmnopqrstuvwxyz'), from)).status).toBe(401);
    // Invalid tokens on the whitelist fill the same budget.
    for (let i = 0; i < 8; i++) expect((await call(`${API_PATHS.list}?api_key=nope`, {}, from)).status).toBe(401);
    const locked = await call(USAGE_PATHS.summary, bearer(full.key), from);
    expect(locked.status).toBe(429);
    expect(locked.body.code).toBe(10429);
    expect(locked.body.message).toMatch(/invalid-token lock-out for source IP/);
    expect(Number(locked.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect((await call(`${API_PATHS.list}${q(acc.token)}`, {}, from)).status).toBe(429);
    // Another source is not affected.
    expect((await call(USAGE_PATHS.summary, bearer(full.key), source())).status).toBe(200);
  });

  it('403 10403 naming the scope a key lacks, for every key endpoint', async () => {
    for (const e of KEY_ENDPOINTS) {
      const key = await t.key(
        acc.accountId,
        SCOPES.filter((s) => s !== e.scope),
      );
      const r = await call(e.url, bearer(key.key), source());
      expect({ url: e.url, status: r.status, body: { ...r.body, requestId: '' } }).toEqual({
        url: e.url,
        status: 403,
        body: { code: 10403, message: `the key lacks scope ${e.scope}`, requestId: '', data: null },
      });
      await new ApiKeyService(t.store).revoke(acc.accountId, key.id, ctx);
    }
  });

  it('a key never opens the whitelist: as a Bearer or in api_key, list, add and delete are 401', async () => {
    const bodies = new Set<string>();
    for (const [method, url] of [
      ['GET', API_PATHS.list],
      ['POST', API_PATHS.add],
      ['POST', API_PATHS.delete],
    ] as const) {
      for (const r of [
        await t.app.inject({
          method,
          url,
          headers: { ...bearer(full.key), 'content-type': 'application/json' },
          payload: '{"ips":["203.0.113.9"]}',
          remoteAddress: source(),
        }),
        await t.app.inject({
          method,
          url: `${url}?api_key=${encodeURIComponent(full.key)}`,
          headers: { 'content-type': 'application/json' },
          payload: '{"ips":["203.0.113.9"]}',
          remoteAddress: source(),
        }),
      ]) {
        expect(r.statusCode).toBe(401);
        bodies.add(JSON.stringify({ ...r.json(), requestId: '' }));
      }
    }
    expect([...bodies]).toEqual([UNIFORM_401]);
  });

  it('api_key beside a good Bearer key is 10400 naming it (never read, and a secret in a URL is refused)', async () => {
    const r = await call(`${USAGE_PATHS.summary}?api_key=${encodeURIComponent(acc.token)}`, bearer(full.key), source());
    expect(r.body.code).toBe(10400);
    expect(r.body.message).toMatch(/^invalid parameters: api_key /);
    expect(r.body.message).not.toContain(acc.token);
  });

  it('records the last use (time and source) without a write per request', async () => {
    const k = await t.key(acc.accountId, ['usage:read']);
    expect((await t.store.apiKeys.list(acc.accountId)).find((x) => x.id === k.id)!.last_used_at).toBeNull();
    await call(USAGE_PATHS.summary, bearer(k.key), '203.0.113.50');
    const used = async () => {
      for (let i = 0; i < 50; i++) {
        const row = (await t.store.apiKeys.list(acc.accountId)).find((x) => x.id === k.id)!;
        if (row.last_used_at !== null) return row;
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error('last use never recorded');
    };
    const row = await used();
    expect(row.last_used_ip).toBe('203.0.113.50');
    expect(row.last_used_at).toBe(Math.floor(t.clock.now / 1000));
    // Within the minute, the same source writes nothing.
    t.clock.now += 10_000;
    try {
      await call(USAGE_PATHS.summary, bearer(k.key), '203.0.113.50');
      await new Promise((r) => setTimeout(r, 100));
      expect((await t.store.apiKeys.list(acc.accountId)).find((x) => x.id === k.id)!.last_used_at).toBe(
        row.last_used_at,
      );
    } finally {
      t.clock.now -= 10_000;
    }
  });

  it('at most 20 live keys per account: the 21st is refused, nothing made; a revoked or expired one frees its place', async () => {
    const owner = await t.account('keys-twenty@example.com');
    const keys = new ApiKeyService(t.store, () => t.clock.now);
    const made: string[] = [];
    for (let i = 0; i < 19; i++) made.push((await t.key(owner.accountId, ['usage:read'], { name: `k${i}` })).id);
    const soon = await t.key(owner.accountId, ['usage:read'], { expiresAtMs: t.clock.now + 5_000 });
    await expect(
      keys.create(owner.accountId, { name: 'one too many', scopes: 'usage:read' }, ctx),
    ).rejects.toBeInstanceOf(KeyLimitError);
    expect(await t.store.apiKeys.list(owner.accountId)).toHaveLength(20);
    await keys.revoke(owner.accountId, made[0]!, ctx);
    // A name is printable text: an emoji with its zero-width joiners is one.
    await keys.create(owner.accountId, { name: 'in the freed place 👩‍💻', scopes: 'usage:read' }, ctx);
    t.clock.now += 5_000;
    try {
      await keys.create(owner.accountId, { name: 'after the expiry', scopes: 'usage:read' }, ctx);
    } finally {
      t.clock.now -= 5_000;
    }
    expect(soon.id).toBeTruthy();
    // Every refusal and every field error leaves nothing behind.
    const before = (await t.store.apiKeys.list(owner.accountId)).length;
    for (const bad of [
      { name: '', scopes: 'usage:read' },
      { name: 'x'.repeat(65), scopes: 'usage:read' },
      { name: 'tab\there', scopes: 'usage:read' },
      { name: 'right\u202eto left', scopes: 'usage:read' },
      { name: '   ', scopes: 'usage:read' },
      { name: 'ok', scopes: '' },
      { name: 'ok', scopes: 'usage:read,root' },
      { name: 'ok', scopes: 'usage:read', expiresAtMs: t.clock.now - 1 },
      { name: 'ok', scopes: 'usage:read', allowedIps: '10.0.0.0/33' },
    ]) {
      await expect(keys.create(owner.accountId, bad, ctx)).rejects.toThrow(/^(name|scopes|expires_at|allowed_ips): /);
    }
    expect(await t.store.apiKeys.list(owner.accountId)).toHaveLength(before);
  });

  it('made and revoked keys are audited, never with the key', async () => {
    const owner = await t.account('keys-audit@example.com');
    const keys = new ApiKeyService(t.store, () => t.clock.now);
    const made = await keys.create(
      owner.accountId,
      { name: 'ci', scopes: ['usage:read', 'audit:read'], allowedIps: '203.0.113.0/24' },
      ctx,
    );
    expect(await keys.revoke(owner.accountId, made.info.id, ctx)).toMatchObject({ id: made.info.id, state: 'revoked' });
    expect(await keys.revoke(owner.accountId, made.info.id, ctx)).toBeNull();
    const { rows } = await t.store.audit.list({ accountId: owner.accountId, limit: 10, offset: 0 });
    const actions = rows.map((r) => [r.action, r.target]);
    expect(actions).toEqual(
      [
        ['api_key.revoked', made.info.id],
        ['api_key.created', made.info.id],
        ['account.created', null],
      ].filter(([a]) => rows.some((r) => r.action === a)),
    );
    expect(rows.find((r) => r.action === 'api_key.created')!.details).toEqual({
      name: 'ci',
      scopes: ['usage:read', 'audit:read'],
      expires_at: null,
      allowed_ips: ['203.0.113.0/24'],
    });
    const secret = made.key.split('_').slice(2).join('_');
    expect(JSON.stringify(rows)).not.toContain(secret);
  });
});

describe.each(MODES)('per-key limits ($name)', (mode) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await appFor(mode, { limits: { keyReads: 5, keyWrites: 2 } });
  });
  afterAll(async () => t?.close());

  it("reads past the key's limit are 10429 with Retry-After; another key of the account keeps its own", async () => {
    const acc = await t.account('keys-limit@example.com');
    const k1 = await t.key(acc.accountId, ['usage:read']);
    const k2 = await t.key(acc.accountId, ['usage:read']);
    // A refused scope spends none of the key's requests.
    const other = await t.key(acc.accountId, ['audit:read']);
    expect(
      (await t.app.inject({ method: 'GET', url: USAGE_PATHS.summary, headers: bearer(other.key) })).statusCode,
    ).toBe(403);
    for (let i = 0; i < 5; i++)
      expect((await t.app.inject({ method: 'GET', url: AUDIT_PATH, headers: bearer(other.key) })).statusCode).toBe(200);
    for (let i = 0; i < 5; i++)
      expect(
        (await t.app.inject({ method: 'GET', url: USAGE_PATHS.summary, headers: bearer(k1.key) })).statusCode,
      ).toBe(200);
    const r = await t.app.inject({ method: 'GET', url: USAGE_PATHS.summary, headers: bearer(k1.key) });
    expect(r.statusCode).toBe(429);
    expect(r.json()).toMatchObject({ code: 10429, data: null });
    expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(r.headers['retry-after'])).toBeLessThanOrEqual(60);
    expect((await t.app.inject({ method: 'GET', url: USAGE_PATHS.summary, headers: bearer(k2.key) })).statusCode).toBe(
      200,
    );
    // The refusal is counted under its own reason.
    expect((await t.app.inject({ method: 'GET', url: '/metrics' })).body).toMatch(
      /proxyd_rate_limit_rejections_total\{route="\/openapi\/v1\/usage\/summary",reason="key"\} 1/,
    );
    // The window rolls: a minute on, the key works again.
    t.clock.now += 60_001;
    expect((await t.app.inject({ method: 'GET', url: USAGE_PATHS.summary, headers: bearer(k1.key) })).statusCode).toBe(
      200,
    );
  });

  it('writes have their own window per key: 2 here, then refused, while reads go on', async () => {
    const limits = t.ctx.limits;
    expect((await limits.consumeKey('writer', 'write')).allowed).toBe(true);
    expect((await limits.consumeKey('writer', 'write')).allowed).toBe(true);
    const refused = await limits.consumeKey('writer', 'write');
    expect(refused.allowed).toBe(false);
    expect(refused.allowed ? 0 : refused.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect((await limits.consumeKey('writer', 'read')).allowed).toBe(true);
    expect((await limits.consumeKey('another writer', 'write')).allowed).toBe(true);
  });
});

describe.each(BACKENDS)('GET /openapi/v1/audit (%s)', (backend) => {
  let t: TestApp;
  let a: { accountId: number; token: string };
  let key: string;

  async function audit(query = '', k = key) {
    const r = await t.app.inject({
      method: 'GET',
      url: `${AUDIT_PATH}${query ? `?${query}` : ''}`,
      headers: bearer(k),
    });
    return { status: r.statusCode, body: r.json() as { code: number; message: string; data: any } };
  }

  beforeAll(async () => {
    t = await makeTestApp({ backend });
    a = await t.account('audit-api@example.com');
    const b = await t.account('audit-api-other@example.com');
    key = (await t.key(a.accountId, ['audit:read'])).key;
    // Records: the key's creation (setup), a whitelist add by the token; another account's add must never show.
    const add = (token: string, ip: string) =>
      t.app.inject({
        method: 'POST',
        url: `${API_PATHS.add}${q(token)}`,
        headers: { 'content-type': 'application/json' },
        payload: { items: [{ ip }] },
      });
    expect((await add(a.token, '8.8.8.10')).json().code).toBe(200);
    t.clock.now += 3_600_000;
    expect((await add(a.token, '8.8.8.11')).json().code).toBe(200);
    expect((await add(b.token, '8.8.8.12')).json().code).toBe(200);
  });
  afterAll(async () => t?.close());

  it("lists the key's account's records only, newest first, with who did it", async () => {
    const r = await audit();
    expect(r.body.code).toBe(200);
    const items = r.body.data.items as Array<{
      action: string;
      actor: { type: string; id: string };
      details: { ips?: string[] };
      account: string;
      source_ip: string;
    }>;
    expect(items.map((i) => i.action)).toEqual(['whitelist.added', 'whitelist.added', 'api_key.created']);
    expect(items[0]!.details.ips).toEqual(['8.8.8.11']);
    expect(items[0]!.actor.type).toBe('token');
    expect(items.every((i) => i.account === 'audit-api@example.com')).toBe(true);
    expect(JSON.stringify(r.body)).not.toContain('8.8.8.12');
    expect(r.body.data).toMatchObject({ page: 1, page_size: 20, total: 3 });
  });

  it('filters by action or family and by time; pages', async () => {
    expect((await audit('action=whitelist')).body.data.total).toBe(2);
    expect((await audit('action=api_key.created')).body.data.total).toBe(1);
    expect((await audit('action=plan.changed')).body.data.total).toBe(0);
    const from = new Date(t.clock.now - 1_800_000).toISOString();
    const recent = (await audit(`from=${from}`)).body.data;
    expect(recent.items.map((i: { details: { ips?: string[] } }) => i.details.ips)).toEqual([['8.8.8.11']]);
    expect((await audit(`to=${from}`)).body.data.total).toBe(2);
    const p2 = (await audit('page=2&page_size=2')).body.data;
    expect({ n: p2.items.length, page: p2.page, page_size: p2.page_size, total: p2.total }).toEqual({
      n: 1,
      page: 2,
      page_size: 2,
      total: 3,
    });
  });

  it('bad parameters are 10400 naming them', async () => {
    const cases: Array<[string, string]> = [
      ['from=yesterday', 'from'],
      ['to=2026-02-30', 'to'],
      ['from=2026-11-02&to=2026-11-01', 'from'],
      ['action=nope.nothing', 'action'],
      ['action=Whitelist!', 'action'],
      ['page=0', 'page'],
      ['page_size=101', 'page_size'],
      ['page=1&page=2', 'page'],
      ['user=alice', 'user'],
    ];
    for (const [query, field] of cases) {
      const r = await audit(query);
      expect({ query, status: r.status, code: r.body.code }).toEqual({ query, status: 200, code: 10400 });
      expect(r.body.message, query).toMatch(new RegExp(`^invalid parameters: ${field}\\b`));
    }
  });

  it('the account token is refused; a key of another scope is 10403', async () => {
    const r = await t.app.inject({ method: 'GET', url: `${AUDIT_PATH}${q(a.token)}` });
    expect(r.statusCode).toBe(401);
    const usage = (await t.key(a.accountId, ['usage:read'])).key;
    expect((await audit('', usage)).body).toMatchObject({ code: 10403, message: 'the key lacks scope audit:read' });
  });
});
