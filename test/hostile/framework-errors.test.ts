// Failures Fastify answers before any route runs (a URL it cannot decode, a body too large, a CONNECT
// on the API): each gets the envelope and the usual headers, echoes nothing of the URL or query, and is
// logged by route pattern. Raw HTTP over a real socket: these requests are not valid for most clients.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIST, makeAccount, recordBody, startDaemon, type Daemon } from '../helpers/daemon.js';
import { sleep } from '../helpers/wait.js';
import { exchange } from './net.js';
const ADD = '/openapi/v1/proxy/whitelist/add';

let d: Daemon;
let token: string;
let secret: string;

interface Raw {
  status: number;
  headers: Record<string, string>;
  body: string;
}

function parse(data: Buffer): Raw {
  const text = data.toString('latin1');
  const end = text.indexOf('\r\n\r\n');
  const head = end < 0 ? text : text.slice(0, end);
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const l of lines) {
    const i = l.indexOf(':');
    if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  return {
    status: Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1] ?? 0),
    headers,
    body: recordBody(end < 0 ? '' : text.slice(end + 4)),
  };
}

async function raw(request: string): Promise<Raw> {
  const r = await exchange(d.api.replace('http://', ''), Buffer.from(request, 'latin1'), { waitMs: 5000 });
  return parse(r.data);
}

const get = (target: string) => raw(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);

function expectEnvelope(r: Raw, status: number, code: number): void {
  expect(r.status).toBe(status);
  expect(r.headers['content-type']).toMatch(/^application\/json/);
  expect(r.headers['cache-control']).toBe('no-store');
  expect(r.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  const body = JSON.parse(r.body) as Record<string, unknown>;
  expect(Object.keys(body).sort()).toEqual(['code', 'data', 'message', 'requestId']);
  expect(body).toMatchObject({ code, data: null, requestId: r.headers['x-request-id'] });
}

function expectNoEcho(r: Raw, target: string): void {
  const all = JSON.stringify(r.headers) + r.body;
  expect(all).not.toContain(token);
  expect(all).not.toContain(secret);
  expect(all).not.toContain('api_key');
  expect(all).not.toContain('whitelist');
  expect(all).not.toContain('console');
  expect(all).not.toContain(target);
}

/** The daemon's log line for a request id (written when the response finishes). */
async function logLineFor(requestId: string): Promise<Record<string, unknown>> {
  for (let i = 0; i < 40; i++) {
    const line = d.logs.find((l) => l.includes(requestId) && l.includes('"msg":"request"'));
    if (line) return JSON.parse(line) as Record<string, unknown>;
    await sleep(50);
  }
  throw new Error(`no log line for ${requestId}`);
}

beforeAll(async () => {
  d = await startDaemon();
  token = (await makeAccount(d.dataDir, 'framework@example.com')).token;
  secret = token.slice(token.indexOf('.') + 1);
});
afterAll(async () => {
  await d?.stop();
});

describe('URLs the framework cannot decode (FST_ERR_BAD_URL)', () => {
  const targets = () => [
    `${LIST}%?api_key=${token}`,
    `${LIST}%c0%ae?api_key=${token}`,
    `${LIST}%ZZ?api_key=${token}`,
    `${LIST}%c0%ae`,
    `${LIST}%ZZ`,
    '/console/%',
    `/console/%?api_key=${token}`,
    `/openapi/v1/proxy/whitelist/%${token}`,
    `/%ff%fe/${secret}`,
  ];

  it('answer 400/10400 with the envelope, echo nothing, and are logged by route pattern', async () => {
    for (const target of targets()) {
      const r = await get(target);
      expectEnvelope(r, 400, 10400);
      expectNoEcho(r, target);
      const line = await logLineFor(r.headers['x-request-id']!);
      expect(line).toMatchObject({ route: '(unmatched)', status: 400, code: 10400, method: 'GET' });
    }
  });

  it('a POST to a bad URL with a body is answered the same way', async () => {
    const body = JSON.stringify({ items: [{ ip: '8.8.8.8' }] });
    const target = `${ADD}%?api_key=${token}`;
    const r = await raw(
      `POST ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
    );
    expectEnvelope(r, 400, 10400);
    expectNoEcho(r, target);
  });
});

describe('other framework-level failures', () => {
  it('a body over 256 KiB: envelope 10400, no echo, logged by route', async () => {
    const target = `${ADD}?api_key=${token}`;
    const r = await raw(
      `POST ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${300 * 1024}\r\nConnection: close\r\n\r\n${'x'.repeat(300 * 1024)}`,
    );
    expectEnvelope(r, 200, 10400); // a whitelist route's own 10400 is HTTP 200 (docs/api.md)
    expectNoEcho(r, target);
    expect(await logLineFor(r.headers['x-request-id']!)).toMatchObject({ route: ADD, status: 200, code: 10400 });
  });

  it('a body that is not JSON, and an unknown content type: envelope 10400, no echo', async () => {
    for (const [type, body] of [
      ['application/json', '{"items": [ {"ip": '],
      ['application/x-www-form-urlencoded', 'items=1'],
      ['text/plain; charset=bogus', 'x'],
    ] as const) {
      const target = `${ADD}?api_key=${token}`;
      const r = await raw(
        `POST ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: ${type}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      );
      expectEnvelope(r, 200, 10400);
      expectNoEcho(r, target);
    }
  });

  it('the console answers its own parser failures with an HTML page that echoes nothing either', async () => {
    for (const [type, body] of [
      ['application/xml', '<x/>'],
      ['application/x-www-form-urlencoded', 'email=%ZZ&password=%'],
    ] as const) {
      const target = `/console/login?api_key=${token}`;
      const r = await raw(
        `POST ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: ${type}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      );
      expect(r.status).toBeGreaterThanOrEqual(400);
      expect(r.status).toBeLessThan(500);
      expect(r.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
      expect(r.body).not.toContain(secret);
      expect(r.body).not.toContain('api_key');
    }
  });

  it('a malformed request head (Node parser): envelope, no echo', async () => {
    const target = `${LIST}?api_key=${token}`;
    const r = await raw(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header\r\n\r\n`);
    expectEnvelope(r, 400, 10400);
    expectNoEcho(r, target);
  });

  it('CONNECT to the API listener is answered 405/10405 with the envelope, not dropped', async () => {
    const r = await raw(`CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n`);
    expectEnvelope(r, 405, 10405);
    expect(r.body).toContain('proxy port');
    expect(await logLineFor(r.headers['x-request-id']!)).toMatchObject({
      route: '(connect)',
      status: 405,
      code: 10405,
    });
  });

  it('CONNECT carrying a token in its target or a header echoes none of it', async () => {
    const target = `127.0.0.1:${secret.length}`;
    const r = await raw(
      `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\nProxy-Authorization: Basic ${Buffer.from(`u:${token}`).toString('base64')}\r\n\r\n`,
    );
    expectEnvelope(r, 405, 10405);
    expect(r.body).not.toContain(token);
  });

  it('the API still serves afterwards', async () => {
    const r = await get(`${LIST}?api_key=${token}`);
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body)).toMatchObject({ code: 200 });
  });

  it('no daemon log line carries the token, its secret, or a URL', async () => {
    const logs = d.logs.join('\n');
    expect(logs).not.toContain(secret);
    expect(logs).not.toContain('api_key=');
    expect(logs).not.toContain('%ZZ');
    expect(logs).not.toContain('%c0');
  });
});
