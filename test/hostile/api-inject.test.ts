// Random requests against the in-process API (app.inject): never a 5xx, always the envelope with
// its request id and security headers, never a secret in the answer; strict JSON bodies.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTestApp, q, type TestApp } from '../helpers/app.js';
import { FUZZ_TIMEOUT, params } from './fuzz.js';
import { OPS_PATHS, randomRequest } from './requests.js';
import { ADD, DEL, LIST } from '../helpers/daemon.js';

let t: TestApp;
let token: string;
let secret: string;

beforeAll(async () => {
  t = await makeTestApp({
    limits: { perRoute: { list: 1e9, add: 1e9, delete: 1e9, usage: 1e9 }, invalidTokenPerIp: 1e9 },
  });
  token = (await t.account('fuzz@example.com')).token;
  secret = token.split('.')[1]!;
});
afterAll(async () => {
  await t?.close();
});

const ENVELOPE_KEYS = ['code', 'data', 'message', 'requestId'];

type Res = Awaited<ReturnType<TestApp['app']['inject']>>;

/** Every answer of the API listener (but the operational endpoints) is the envelope. */
function expectEnvelope(res: Res, path: string, method = 'GET'): { code: number; message: string } | null {
  expect(res.statusCode, `${path} -> ${res.statusCode} ${res.body.slice(0, 200)}`).toBeLessThan(500);
  expect(res.headers['x-content-type-options']).toBe('nosniff');
  expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  expect(res.body).not.toContain(secret);
  if (OPS_PATHS.has(path) && res.statusCode !== 404 && res.statusCode !== 405) return null;
  expect(res.headers['cache-control']).toBe('no-store');
  if (method === 'HEAD') return (expect(res.body).toBe(''), null);
  const body = JSON.parse(res.body) as Record<string, unknown>;
  expect(Object.keys(body).sort()).toEqual(ENVELOPE_KEYS);
  expect(body.requestId).toBe(res.headers['x-request-id']);
  expect(typeof body.code).toBe('number');
  expect(typeof body.message).toBe('string');
  // Messages are short and plain: attacker bytes are never reflected.
  expect(body.message).toMatch(/^[\x20-\x7e]{1,200}$/);
  return body as { code: number; message: string };
}

describe('random API requests (in process)', () => {
  it(
    'never a 5xx, always an envelope with its request id, never a secret',
    async () => {
      await fc.assert(
        fc.asyncProperty(
          randomRequest(() => token),
          async (r) => {
            let res: Res;
            try {
              res = await t.app.inject({
                method: r.method as 'GET',
                url: r.url,
                headers: r.headers,
                ...(r.body ? { payload: r.body } : {}),
              });
            } catch (e) {
              // light-my-request refuses some URLs itself (no request reached the app).
              if (e instanceof Error && /Invalid URL|ERR_INVALID|URL/.test(`${e.name} ${e.message}`)) return;
              throw e;
            }
            const env = expectEnvelope(res, r.path, r.method);
            if (env && res.statusCode === 200) expect([200, 10400, 10413, 10431]).toContain(env.code);
            expect(({} as Record<string, unknown>).polluted).toBeUndefined();
          },
        ),
        params({ numRuns: Math.min(params().numRuns! * 3, 100_000) }),
      );
    },
    FUZZ_TIMEOUT * 3,
  );

  it('duplicate keys, invalid UTF-8, trailing documents, deep nesting and huge numbers are 10400', async () => {
    const cases: Array<[string, Buffer, RegExp]> = [
      [ADD, Buffer.from('{"items":[{"ip":"8.8.8.8"}],"items":[{"ip":"1.1.1.1"}]}'), /duplicate key items/],
      [ADD, Buffer.from('{"items":[{"ip":"8.8.8.8","\\u0069p":"1.1.1.1"}]}'), /duplicate key ip/],
      [DEL, Buffer.from('{"ips":["8.8.8.8"],"ips":["1.1.1.1"]}'), /duplicate key ips/],
      [ADD, Buffer.from('{"items":[{"ip":"8.8.8.8","\\u0000":1,"\\u0000":2}]}'), /duplicate key \(unprintable\)/],
      [DEL, Buffer.from([...Buffer.from('{"ips":["'), 0xff, 0xfe, ...Buffer.from('"]}')]), /UTF-8/],
      [DEL, Buffer.from('{"ips":["8.8.8.8"]} {}'), /single JSON document/],
      [DEL, Buffer.from(`{"ips":${'['.repeat(100_000)}${']'.repeat(100_000)}}`), /ips/],
      [ADD, Buffer.from('{"items":[{"ip":1e999}]}'), /items\.0\.ip/],
      [ADD, Buffer.from('{"__proto__":{"items":[{"ip":"8.8.8.8"}]}}'), /items|__proto__/],
    ];
    for (const [p, payload, msg] of cases) {
      const res = await t.app.inject({
        method: 'POST',
        url: p + q(token),
        headers: { 'content-type': 'application/json' },
        payload,
      });
      const env = expectEnvelope(res, p)!;
      expect(env.code, payload.toString('latin1').slice(0, 80)).toBe(10400);
      expect(env.message).toMatch(msg);
    }
    // Nothing of them was processed.
    const list = await t.app.inject({ method: 'GET', url: LIST + q(token) + '&ip=8.8.8.8' });
    expect(JSON.parse(list.body).data.total).toBe(0);
  });

  it('a body over 256 KiB is 10400 and nothing is processed; headers are set on every answer', async () => {
    const big = Buffer.from(JSON.stringify({ ips: ['8.8.8.8'], pad: 'x'.repeat(256 * 1024) }));
    const res = await t.app.inject({
      method: 'POST',
      url: DEL + q(token),
      headers: { 'content-type': 'application/json' },
      payload: big,
    });
    expect(expectEnvelope(res, DEL)).toMatchObject({ code: 10400, message: expect.stringMatching(/256 KiB/) });
    for (const p of ['/healthz', '/metrics', '/ip', '/openapi.json', '/nope']) {
      const r = await t.app.inject({ method: 'GET', url: p });
      expect(r.headers['x-content-type-options']).toBe('nosniff');
      expect(r.headers['x-request-id']).toBeTruthy();
      expect(r.headers['cache-control']).toBeTruthy();
    }
  });
});

describe('token guessing and enumeration (property-based)', () => {
  it(
    'every guessed or mangled token gets the byte-identical 401 (but the request id)',
    async () => {
      const [ak, sec] = token.split('.') as [string, string];
      const guess = fc.oneof(
        fc.stringMatching(/^[A-Za-z0-9_-]{43}$/).map((s) => `${ak}.${s}`), // right key, guessed secret
        fc.stringMatching(/^[0-9a-f]{20}$/).map((h) => `ak${h}.${sec}`), // guessed key, right secret
        fc
          .tuple(fc.nat(65), fc.constantFrom('A', '_', '-', '0', '.', ' ', '%00'))
          .map(([i, c]) => token.slice(0, i) + c + token.slice(i + 1)),
        fc.string({ maxLength: 80 }),
      );
      const bodies = new Set<string>();
      await fc.assert(
        fc.asyncProperty(guess, async (g) => {
          fc.pre(g !== token);
          const res = await t.app.inject({ method: 'GET', url: `${LIST}?api_key=${encodeURIComponent(g)}` });
          expect(res.statusCode).toBe(401);
          bodies.add(res.body.replace(/,"requestId":"[^"]+"/, ''));
        }),
        params({ numRuns: Math.min(params().numRuns!, 2000) }),
      );
      expect([...bodies]).toEqual(['{"code":10401,"message":"invalid api key","data":null}']);
    },
    FUZZ_TIMEOUT,
  );

  it(
    "another account's IPs cannot be told apart from free ones: list, delete and add answers are the same",
    async () => {
      const other = await t.account(`other-${Date.now()}@example.com`);
      const octet = fc.integer({ min: 1, max: 254 });
      const publicIp = fc.tuple(octet, octet).map(([c, dd]) => `8.8.${c}.${dd}`); // DB-IP: US
      await fc.assert(
        fc.asyncProperty(fc.uniqueArray(publicIp, { minLength: 2, maxLength: 6 }), async (ips) => {
          const [held, ...free] = ips as [string, ...string[]];
          const post = (url: string, tok: string, body: unknown) =>
            t.app.inject({
              method: 'POST',
              url: url + q(tok),
              headers: { 'content-type': 'application/json' },
              payload: JSON.stringify(body),
            });
          const strip = (b: string) => b.replace(/"requestId":"[^"]+"/, '');
          // (An IP the random-request test happened to add elsewhere is not a case here.)
          fc.pre(JSON.parse((await post(ADD, other.token, { items: [{ ip: held }] })).body).code === 200);
          // delete: someone else's IP and an absent IP answer alike (10426)
          const delHeld = await post(DEL, token, { ips: [held] });
          const delFree = await post(DEL, token, { ips: [free[0]] });
          expect(strip(delHeld.body).replace(held, 'X')).toBe(strip(delFree.body).replace(free[0]!, 'X'));
          // list: an exact-IP filter on someone else's IP finds nothing
          const list = await t.app.inject({ method: 'GET', url: `${LIST}${q(token)}&ip=${held}` });
          expect(JSON.parse(list.body).data.total).toBe(0);
          // add: held by another account -> 10427, never which account or since when
          const addHeld = JSON.parse((await post(ADD, token, { items: [{ ip: held }] })).body);
          expect(addHeld.data.failed_items).toEqual([{ ip: held, code: 10427, reason: 'IP unavailable' }]);
          // the other account still holds it
          expect(JSON.parse((await post(DEL, other.token, { ips: [held] })).body).code).toBe(200);
        }),
        params({ numRuns: Math.min(params().numRuns!, 200) }),
      );
    },
    FUZZ_TIMEOUT,
  );
});
