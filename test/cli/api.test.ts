// The API client: api_key in the query only, envelopes decoded, request ids kept, no token in errors.
import { describe, expect, it } from 'vitest';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from '../helpers/daemon.js';
import { ApiClient, ApiError, isAuthError, isRateLimited, isTransient, parseRetryAfter } from '../../src/cli/api.js';
import { TOKEN } from './helpers/fakes.js';
import { batchReply, rateLimited, scriptedClient, unauthorized, type Handler } from './helpers/scripted-server.js';

const setup = (handler: Handler, timeoutMs = 2000) => scripted(handler, { timeoutMs });
const scripted = scriptedClient();

const SECRET = TOKEN.split('.')[1]!;

async function failure(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    const e = err as ApiError;
    expect(`${e.message} ${e.stack} ${JSON.stringify(e)}`).not.toContain(SECRET);
    return e;
  }
  throw new Error('expected a failure');
}

describe('ApiClient', () => {
  it('lists with the query parameters and the token only in api_key', async () => {
    const { server, api } = await setup(() => ({
      code: 200,
      data: {
        items: [{ whitelist_id: 1, ip: '8.8.8.8', remark: '', status: 1, created_at: '2026-11-21T10:00:00Z' }],
        page: 2,
        page_size: 5,
        total: 6,
      },
    }));
    const r = await api.list({ page: 2, page_size: 5, status: 'active', ip: '8.8.8.8' });
    expect(r.data.total).toBe(6);
    const q = server.requests[0]!;
    expect(q.method).toBe('GET');
    expect(q.path).toBe('/openapi/v1/proxy/whitelist/list');
    expect(Object.fromEntries(q.query)).toEqual({
      page: '2',
      page_size: '5',
      status: 'active',
      ip: '8.8.8.8',
      api_key: TOKEN,
    });
    expect(q.query.getAll('api_key')).toHaveLength(1);
    expect(q.headers.authorization).toBeUndefined();
    expect(q.headers['x-api-key']).toBeUndefined();
  });

  it('posts add and delete bodies as JSON', async () => {
    const { server, api } = await setup((req) => batchReply(req, { '9.9.9.9': 10427 }));
    const a = await api.add([{ ip: '8.8.8.8', remark: 'x' }, { ip: '9.9.9.9' }]);
    expect(a.code).toBe(10431);
    expect(a.data.failed_items).toEqual([{ ip: '9.9.9.9', code: 10427, reason: 'reason 10427' }]);
    await api.delete(['8.8.8.8']);
    expect(server.requests[0]!.headers['content-type']).toBe('application/json');
    expect(server.requests[0]!.body).toEqual({ items: [{ ip: '8.8.8.8', remark: 'x' }, { ip: '9.9.9.9' }] });
    expect(server.requests[1]!.path).toBe('/openapi/v1/proxy/whitelist/delete');
    expect(server.requests[1]!.body).toEqual({ ips: ['8.8.8.8'] });
  });

  it('keeps the base URL path prefix', async () => {
    const { server, api } = await scripted((req) => batchReply(req), { path: '/prefix/' });
    await api.delete(['8.8.8.8']);
    expect(server.requests[0]!.path).toBe('/prefix/openapi/v1/proxy/whitelist/delete');
  });

  it('401 carries code and request id, never the token', async () => {
    const { api } = await setup(() => unauthorized);
    const e = await failure(api.list({}));
    expect(isAuthError(e)).toBe(true);
    expect(e.requestId).toMatch(/^req-/);
    expect(e.describe()).toContain(e.requestId!);
  });

  it('a server message that echoes the token is scrubbed', async () => {
    const { api } = await setup(() => ({ status: 200, code: 10400, message: `bad api_key=${TOKEN} (${SECRET})` }));
    const e = await failure(api.delete(['8.8.8.8']));
    expect(e.code).toBe(10400);
  });

  it('429 exposes Retry-After in ms', async () => {
    const { api } = await setup(() => rateLimited(12));
    const e = await failure(api.add([{ ip: '8.8.8.8' }]));
    expect(isRateLimited(e)).toBe(true);
    expect(e.retryAfterMs).toBe(12_000);
  });

  it('a non-envelope 502 from a load balancer is transient; a 200 with HTML is a bad response', async () => {
    const { api, server } = await setup(() => ({ status: 502, raw: '<html>bad gateway</html>' }));
    const e = await failure(api.add([{ ip: '8.8.8.8' }]));
    expect(isTransient(e)).toBe(true);
    server.setHandler(() => ({ status: 200, raw: '<html>hello</html>' }));
    const e2 = await failure(api.add([{ ip: '8.8.8.8' }]));
    expect(e2.kind).toBe('bad_response');
    expect(isTransient(e2)).toBe(false);
  });

  it('an envelope with a wrong data shape is a bad response', async () => {
    const { api } = await setup(() => ({ code: 200, data: { items: 'nope' } }));
    const e = await failure(api.list({}));
    expect(e.kind).toBe('bad_response');
    expect(e.requestId).toBeDefined();
  });

  it('times out a server that never answers', async () => {
    const { api } = await setup(() => ({ hang: true }), 300);
    const e = await failure(api.list({}));
    expect(e.kind).toBe('timeout');
    expect(isTransient(e)).toBe(true);
  });

  it('a refused connection is a network error naming the host, not the URL with its query', async () => {
    const client = new ApiClient({ baseUrl: 'http://127.0.0.1:1', token: TOKEN, timeoutMs: 1000 });
    const e = await failure(client.list({}).finally(() => client.close()));
    expect(e.kind).toBe('network');
    expect(e.message).toContain('127.0.0.1:1');
    expect(e.message).not.toContain('api_key');
  });

  it("no source file imports a package's private paths (undici/lib/…)", () => {
    const files = readdirSync(path.join(ROOT, 'src'), { recursive: true, encoding: 'utf8' }).filter((f) =>
      f.endsWith('.ts'),
    );
    expect(files.length).toBeGreaterThan(20);
    for (const f of files) expect(readFileSync(path.join(ROOT, 'src', f), 'utf8'), f).not.toMatch(/['"]undici\/lib\//);
  });

  it('parses Retry-After seconds and dates', () => {
    expect(parseRetryAfter('30')).toBe(30_000);
    expect(parseRetryAfter(undefined)).toBeUndefined();
    expect(parseRetryAfter(new Date(10_000).toUTCString(), 0)).toBe(10_000);
  });
});
