// Random API requests shared by the in-process and the end-to-end hostile suites.
import fc from 'fast-check';
import { q } from '../helpers/app.js';
import { bytes } from './fuzz.js';
import { ADD, DEL, LIST } from '../helpers/daemon.js';

export interface RandomRequest {
  method: string;
  path: string;
  url: string;
  headers: Record<string, string>;
  body: Buffer | undefined;
}

/** Paths whose answers are not the envelope (when they exist). */
export const OPS_PATHS = new Set(['/healthz', '/metrics', '/ip', '/openapi.json']);

export function randomRequest(getToken: () => string): fc.Arbitrary<RandomRequest> {
  const apiKey = fc.oneof(
    fc.constant(() => q(getToken())),
    fc.constant(() => `?api_key=${getToken()}&api_key=${getToken()}`),
    fc.constant(() => `?api_key=${getToken().slice(0, -1)}A`),
    fc.constant(() => `?api_key=`),
    fc.constant(() => ''),
    fc.string({ maxLength: 80 }).map((s) => () => `?api_key=${encodeURIComponent(s)}`),
    fc.string({ maxLength: 40 }).map((s) => () => `?${s}`),
  );
  const extraQuery = fc.oneof(
    fc.constant(''),
    fc.constantFrom(
      '&page=1',
      '&page=0',
      '&page_size=101',
      '&status=active',
      '&ip=8.8.8.8',
      '&ip=08.8.8.8',
      '&x=1',
      '&page=1&page=2',
      '&%ff=1',
      '&__proto__=1',
    ),
    fc.string({ maxLength: 30 }).map((s) => `&${encodeURIComponent(s)}=${encodeURIComponent(s)}`),
  );
  const path = fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom(LIST, ADD, DEL) },
    fc.constantFrom(
      '/',
      '/healthz',
      '/metrics',
      '/ip',
      '/openapi.json',
      '/openapi/v1/usage/summary',
      '/openapi/v1/usage/series',
      '/openapi/v1/audit',
      '/openapi/v1/proxy/whitelist',
      `${LIST}/`,
      LIST.toUpperCase(),
      '/openapi/v1/proxy/whitelist/list/../add',
      '/%00',
      '/..%2f..%2fetc/passwd',
    ),
    fc.webPath().map((w) => (w.startsWith('/') ? w : `/${w}`)),
  );
  const method = fc.oneof(
    { weight: 5, arbitrary: fc.constantFrom('GET', 'POST') },
    fc.constantFrom('PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD'),
  );
  const contentType = fc.oneof(
    fc.constantFrom(
      'application/json',
      'application/json; charset=utf-8',
      'APPLICATION/JSON',
      'text/plain',
      'application/x-www-form-urlencoded',
      'application/json;;;',
      'multipart/form-data; boundary=x',
    ),
    fc.constant(undefined),
    fc.string({ maxLength: 30 }),
  );
  const ipish = fc.oneof(fc.ipV4(), fc.ipV4Extended(), fc.ipV6(), fc.string({ maxLength: 20 }));
  const jsonBody = fc.oneof(
    fc
      .record({
        items: fc.array(fc.record({ ip: ipish, remark: fc.string({ maxLength: 260 }) }, { requiredKeys: ['ip'] }), {
          maxLength: 110,
        }),
      })
      .map((o) => JSON.stringify(o)),
    fc.record({ ips: fc.array(ipish, { maxLength: 110 }) }).map((o) => JSON.stringify(o)),
    fc.jsonValue().map((v) => JSON.stringify(v)),
    fc.constantFrom(
      '{"items":[{"ip":"8.8.8.8"}],"items":[]}',
      '{"ips":["8.8.8.8"],"\\u0069ps":["1.1.1.1"]}',
      '{"items":[{"ip":"8.8.8.8","ip":"1.1.1.1"}]}',
      '{"items":[{"ip":"8.8.8.8"}]}{"items":[]}',
      '{"items":[{"ip":"8.8.8.8"}],"__proto__":{"polluted":true}}',
      '{"items":[{"ip":"8.8.8.8","constructor":{"prototype":{"polluted":true}}}]}',
      '{"items":[{"ip":1e999}]}',
      '{"ips":[123456789012345678901234567890]}',
      `{"items":${'['.repeat(50_000)}${']'.repeat(50_000)}}`,
      `{"ips":["8.8.8.8"],"x":${'{"a":'.repeat(30_000)}1${'}'.repeat(30_000)}}`,
    ),
    fc.string({ maxLength: 200 }),
  );
  const body = fc.oneof(
    { weight: 4, arbitrary: jsonBody.map((s) => Buffer.from(s)) },
    bytes(200),
    // Invalid UTF-8 inside an otherwise valid document.
    fc.constantFrom(
      Buffer.from([0x7b, 0x22, 0x69, 0x70, 0x73, 0x22, 0x3a, 0x5b, 0x22, 0xc3, 0x28, 0x22, 0x5d, 0x7d]),
      Buffer.from('{"ips":["\ud800"]}', 'latin1'),
      Buffer.from([0xef, 0xbb, 0xbf, 0x7b, 0x7d]),
    ),
    fc.constant(Buffer.alloc(0)),
  );

  // An API key's header as a script might get it wrong (the endpoints that take keys read only this header).
  const authorization = fc.oneof(
    { weight: 3, arbitrary: fc.constant(undefined) },
    fc.constantFrom(
      'Bearer pxk_0000000000000000_abcdefghijklmnopqrstuvwxyz',
      'Bearer pxk_',
      'Bearer',
      'bearer  pxk_a_b',
      'Basic eDp5',
    ),
    fc.string({ maxLength: 60 }).map((s) => `Bearer ${s.replace(/[\r\n]/g, '')}`),
  );

  return fc
    .tuple(method, path, apiKey, extraQuery, contentType, body, authorization)
    .map(([m, p, key, extra, type, b, auth]) => {
      const k = key();
      const url = p + (k || (extra ? '?' : '')) + (k ? extra : extra.slice(1));
      const headers: Record<string, string> = {};
      if (type !== undefined) headers['content-type'] = type;
      if (auth !== undefined) headers.authorization = auth;
      const withBody = m !== 'GET' && m !== 'HEAD';
      return { method: m, path: p, url, headers, body: withBody ? b : undefined };
    });
}
