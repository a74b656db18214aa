// Security headers on the API and the console, and the size limits, checked in process.
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/daemon/api/app.js';
import { makeTestApp, q, type TestApp } from '../helpers/app.js';
import { ADD, LIST } from '../helpers/daemon.js';

let t: TestApp;
let token: string;
let withConsole: FastifyInstance | null = null;
let consoleMissing = '';

beforeAll(async () => {
  t = await makeTestApp({
    limits: { perRoute: { list: 1e6, add: 1e6, delete: 1e6, usage: 1e6 }, invalidTokenPerIp: 1e6 },
  });
  token = (await t.account('headers@example.com')).token;
  try {
    const { consolePlugin } = await import('../../src/daemon/console/index.js');
    withConsole = await buildApp(t.ctx, {
      trustProxy: [],
      logger: false,
      plugins: [(a) => consolePlugin(a, t.ctx, { sessionSecret: 'a'.repeat(64) })],
    });
  } catch (e) {
    consoleMissing = `console plugin not usable yet: ${(e as Error).message}`;
  }
});
afterAll(async () => {
  await withConsole?.close();
  await t?.close();
});

describe('API security headers', () => {
  it('every answer: nosniff and a request id; every API answer and error: no-store', async () => {
    const cases: Array<[string, string]> = [
      ['GET', LIST + q(token)],
      ['GET', `${LIST}?api_key=bad`],
      ['POST', ADD + q(token)],
      ['PUT', LIST + q(token)],
      ['GET', '/nope'],
      ['GET', '/healthz'],
      ['GET', '/metrics'],
      ['GET', '/ip'],
      ['GET', '/openapi.json'],
    ];
    for (const [method, url] of cases) {
      const r = await t.app.inject({ method: method as 'GET', url });
      expect(r.headers['x-content-type-options'], url).toBe('nosniff');
      expect(r.headers['x-request-id'], url).toBeTruthy();
      // The public OpenAPI document carries no secret and may be cached; everything else may not.
      if (url !== '/openapi.json') expect(r.headers['cache-control'], url).toBe('no-store');
      expect(r.statusCode, url).toBeLessThan(500);
    }
  });

  it('bodies over 256 KiB are 10400 before anything is processed; unauthenticated bodies are not read', async () => {
    const big = Buffer.alloc(256 * 1024 + 1, 0x20);
    const r = await t.app.inject({
      method: 'POST',
      url: ADD + q(token),
      headers: { 'content-type': 'application/json' },
      payload: big,
    });
    expect(r.json()).toMatchObject({ code: 10400 });
    const unauth = await t.app.inject({
      method: 'POST',
      url: `${ADD}?api_key=bad`,
      headers: { 'content-type': 'application/json' },
      payload: big,
    });
    expect(unauth.statusCode).toBe(401);
  });
});

const STRICT_CSP_DIRECTIVES = ["default-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'"];

describe('console security headers', () => {
  it('a strict Content-Security-Policy, nosniff, no-referrer and no-store on every page', async (ctx) => {
    if (!withConsole) ctx.skip(consoleMissing);
    const login = await withConsole!.inject({ method: 'GET', url: '/console/login' });
    if (login.statusCode !== 200) ctx.skip(`/console/login answers ${login.statusCode}`);
    for (const url of [
      '/console/login',
      '/console/',
      '/console/account',
      '/console/whitelist',
      '/console/no-such-page',
      '/console/assets/console.css',
    ]) {
      const r = await withConsole!.inject({ method: 'GET', url });
      expect(r.statusCode, url).toBeLessThan(500);
      expect(r.headers['x-content-type-options'], url).toBe('nosniff');
      const csp = String(r.headers['content-security-policy'] ?? '');
      for (const d of STRICT_CSP_DIRECTIVES) expect(csp, url).toContain(d);
      expect(csp, url).not.toMatch(/unsafe-inline|unsafe-eval|\*|http:|data: *;? *(script|default)/);
      expect(csp, url).not.toMatch(/script-src[^;]*data:/);
      expect(r.headers['referrer-policy'], url).toBe('no-referrer');
      // Pages carry CSRF tokens (and, once, the API token): never cached. Static assets may be.
      if (!url.includes('/assets/')) expect(r.headers['cache-control'], url).toBe('no-store');
    }
  });

  it('the session cookie is HttpOnly and SameSite=Strict; oversized forms are refused without a 5xx', async (ctx) => {
    if (!withConsole) ctx.skip(consoleMissing);
    const login = await withConsole!.inject({ method: 'GET', url: '/console/login' });
    if (login.statusCode !== 200) ctx.skip(`/console/login answers ${login.statusCode}`);
    const csrf = /name="_csrf" value="([^"]+)"/.exec(login.body)?.[1] ?? '';
    const cookie = [login.headers['set-cookie'] ?? []]
      .flat()
      .map((c) => c.split(';')[0])
      .join('; ');
    const post = await withConsole!.inject({
      method: 'POST',
      url: '/console/login',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
      payload: new URLSearchParams({
        _csrf: csrf,
        email: 'headers@example.com',
        password: 'correct horse battery',
      }).toString(),
    });
    expect(post.statusCode).toBe(303);
    const set = [post.headers['set-cookie'] ?? []].flat().join('\n');
    expect(set).toMatch(/HttpOnly/i);
    expect(set).toMatch(/SameSite=Strict/i);
    const huge = await withConsole!.inject({
      method: 'POST',
      url: '/console/login',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
      payload: `_csrf=${csrf}&email=a&password=${'x'.repeat(200 * 1024)}`,
    });
    expect(huge.statusCode).toBeGreaterThanOrEqual(400);
    expect(huge.statusCode).toBeLessThan(500);
    expect(huge.headers['x-content-type-options']).toBe('nosniff');
  });
});
