// /openapi.json from the request schemas, and the Redis window store's sliding log against a real Redis.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AddBodySchema, DeleteBodySchema, UsageSeriesQuerySchema } from '../../src/contract/schemas.js';
import { buildOpenApiDocument } from '../../src/daemon/api/routes/openapi.js';
import { RedisWindowStore } from '../../src/daemon/ratelimit/redis-store.js';
import { makeTestApp, type TestApp } from '../helpers/app.js';
import { startRedis, type RedisServer } from './helpers.js';

describe('GET /openapi.json', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await makeTestApp();
  });
  afterAll(async () => t.close());

  it('is an OpenAPI 3.1 document of the whitelist and usage endpoints, built from the validating schemas', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths).sort()).toEqual([
      '/openapi/v1/audit',
      '/openapi/v1/proxy/gateway',
      '/openapi/v1/proxy/ips',
      '/openapi/v1/proxy/ips/replace',
      '/openapi/v1/proxy/rules',
      '/openapi/v1/proxy/users',
      '/openapi/v1/proxy/users/batch',
      '/openapi/v1/proxy/users/{username}',
      '/openapi/v1/proxy/users/{username}/password',
      '/openapi/v1/proxy/whitelist/add',
      '/openapi/v1/proxy/whitelist/delete',
      '/openapi/v1/proxy/whitelist/list',
      '/openapi/v1/usage/domains',
      '/openapi/v1/usage/series',
      '/openapi/v1/usage/summary',
    ]);
    const strip = (s: object) => {
      const { $schema: _, ...rest } = s as Record<string, unknown>;
      return rest;
    };
    expect(doc.paths['/openapi/v1/proxy/whitelist/add'].post.requestBody.content['application/json'].schema).toEqual(
      strip(z.toJSONSchema(AddBodySchema, { io: 'input' })),
    );
    expect(doc.paths['/openapi/v1/proxy/whitelist/delete'].post.requestBody.content['application/json'].schema).toEqual(
      strip(z.toJSONSchema(DeleteBodySchema, { io: 'input' })),
    );
    const params = doc.paths['/openapi/v1/proxy/whitelist/list'].get.parameters.map((p: { name: string }) => p.name);
    expect(params).toEqual(['api_key', 'page', 'page_size', 'status', 'ip']);
    expect(doc.components.securitySchemes.api_key).toMatchObject({ type: 'apiKey', in: 'query', name: 'api_key' });
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
    // The whitelist takes the token; every other endpoint a key with its scope.
    expect(doc.paths['/openapi/v1/proxy/whitelist/list'].get.security).toEqual([{ api_key: [] }]);
    for (const [p, scope] of [
      ['/openapi/v1/usage/summary', 'usage:read'],
      ['/openapi/v1/usage/series', 'usage:read'],
      ['/openapi/v1/usage/domains', 'usage:read'],
      ['/openapi/v1/audit', 'audit:read'],
    ] as const) {
      expect(doc.paths[p].get.security).toEqual([{ bearer: [scope] }]);
      expect(doc.paths[p].get['x-scope']).toBe(scope);
      expect(doc.paths[p].get.responses['403']).toBeDefined();
      expect(doc.paths[p].get.parameters.map((x: { name: string }) => x.name)).not.toContain('api_key');
    }
    expect(doc.paths['/openapi/v1/proxy/ips'].get.security).toEqual([{ bearer: ['users:read'] }]);
    expect(doc.paths['/openapi/v1/proxy/ips/replace'].post.security).toEqual([{ bearer: ['users:write'] }]);
    expect(doc.paths['/openapi/v1/proxy/whitelist/add'].post.responses['429'].headers['Retry-After']).toBeDefined();
    expect(doc.paths['/openapi/v1/proxy/whitelist/add'].post.responses['503']).toBeDefined();
    expect(
      doc.paths['/openapi/v1/usage/series'].get.parameters.find((p: { name: string }) => p.name === 'granularity')
        .schema,
    ).toEqual(
      (
        strip(z.toJSONSchema(UsageSeriesQuerySchema, { io: 'input', target: 'draft-2020-12' })) as {
          properties: Record<string, unknown>;
        }
      ).properties.granularity,
    );
    expect(
      doc.paths['/openapi/v1/usage/summary'].get.responses['200'].content['application/json'].schema.properties.data,
    ).toBeDefined();
  });

  it('names the daemon it was fetched from as its server (a relative URL), not the default --api-listen', async () => {
    // A client that takes its base URL from the document (Swagger UI's "Try it out", generated clients) sent
    // every call to 127.0.0.1:8080 whatever address the daemon listened on.
    const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    expect(doc.servers).toEqual([{ url: '/', description: expect.any(String) }]);
  });

  it('uses <API_KEY> in examples and never a real-looking token', () => {
    const text = JSON.stringify(buildOpenApiDocument('test'));
    expect(text).toContain('api_key=<API_KEY>');
    expect(text).not.toMatch(/ak[0-9A-Za-z]{20}\./);
  });
});

describe('RedisWindowStore (real redis-server)', () => {
  let redis: RedisServer;
  let store: RedisWindowStore;
  beforeAll(async () => {
    redis = await startRedis();
    store = new RedisWindowStore(redis.url);
    if (store.client.status !== 'ready') await new Promise((r) => store.client.once('ready', r));
  });
  afterAll(async () => {
    await store?.close();
    await redis?.kill();
  });

  it('is a sliding log: no double burst at a window edge', async () => {
    const t0 = 1_000_000;
    for (let i = 0; i < 10; i++) expect((await store.consume('edge', 10, 60_000, t0 + 59_000 + i)).allowed).toBe(true);
    // A fixed window would reset at t0 + 60 000; the rolling window still holds all ten.
    expect((await store.consume('edge', 10, 60_000, t0 + 60_500)).allowed).toBe(false);
    const denied = await store.consume('edge', 10, 60_000, t0 + 118_999);
    expect(denied).toMatchObject({ allowed: false, count: 10, oldestAtMs: t0 + 59_000 });
    expect((await store.consume('edge', 10, 60_000, t0 + 119_000)).allowed).toBe(true);
  });

  it('admits exactly the limit under concurrency, with unique members for equal timestamps', async () => {
    const now = 5_000_000;
    const r = await Promise.all(Array.from({ length: 50 }, () => store.consume('race', 10, 60_000, now)));
    expect(r.filter((x) => x.allowed)).toHaveLength(10);
    expect((await store.peek('race', 60_000, now)).count).toBe(10);
  });

  it('records and peeks invalid-token attempts', async () => {
    for (let i = 0; i < 3; i++) await store.record('bad:203.0.113.9', 7_000_000 + i, 60_000);
    expect(await store.peek('bad:203.0.113.9', 60_000, 7_000_010)).toMatchObject({ count: 3, oldestAtMs: 7_000_000 });
    expect((await store.peek('bad:203.0.113.9', 60_000, 7_060_001)).count).toBe(1); // (now - 60 s, now]: 7_000_001 is out
    expect(await store.healthy()).toBe(true);
  });
});
