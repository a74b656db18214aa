// A real HTTP server on 127.0.0.1 that answers scripted whitelist-API envelopes, for the CLI's tests.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach } from 'vitest';
import { ApiClient } from '../../../src/cli/api.js';
import { TOKEN } from './fakes.js';

export interface ScriptedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  apiKey: string | null;
  body: any;
  headers: IncomingMessage['headers'];
}

export interface Reply {
  status?: number;
  code?: number;
  message?: string;
  data?: unknown;
  headers?: Record<string, string>;
  /** Sent as the body instead of an envelope. */
  raw?: string;
  /** Drop the connection without an answer (a network error). */
  destroy?: boolean;
  /** Never answer (a timeout). */
  hang?: boolean;
}

export type Handler = (req: ScriptedRequest, index: number) => Reply | Promise<Reply>;

export interface ScriptedServer {
  url: string;
  requests: ScriptedRequest[];
  /** Replies actually sent, in order (status and code). */
  replies: Array<{ status: number; code: number | undefined }>;
  setHandler(h: Handler): void;
  close(): Promise<void>;
}

let rid = 0;

export async function startScriptedServer(handler: Handler): Promise<ScriptedServer> {
  let current = handler;
  const requests: ScriptedRequest[] = [];
  const replies: ScriptedServer['replies'] = [];
  const hanging: ServerResponse[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    let body: any = undefined;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = text;
    }
    const sreq: ScriptedRequest = {
      method: req.method ?? 'GET',
      path: url.pathname,
      query: url.searchParams,
      apiKey: url.searchParams.get('api_key'),
      body,
      headers: req.headers,
    };
    requests.push(sreq);
    const reply = await current(sreq, requests.length - 1);
    if (reply.destroy) {
      req.socket.destroy();
      replies.push({ status: 0, code: undefined });
      return;
    }
    if (reply.hang) {
      hanging.push(res);
      return;
    }
    const requestId = `req-${++rid}`;
    const status = reply.status ?? 200;
    const code = reply.code ?? 200;
    replies.push({ status, code: reply.raw !== undefined ? undefined : code });
    res.writeHead(status, {
      'content-type': reply.raw !== undefined ? 'text/html' : 'application/json',
      'x-request-id': requestId,
      'cache-control': 'no-store',
      ...reply.headers,
    });
    res.end(
      reply.raw ??
        JSON.stringify({
          code,
          message: reply.message ?? (code === 200 ? 'success' : 'error'),
          requestId,
          data: reply.data ?? null,
        }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    replies,
    setHandler: (h) => {
      current = h;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const r of hanging) r.socket?.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Items of an add or delete request body as IP strings. */
export function ipsOf(req: ScriptedRequest): string[] {
  if (Array.isArray(req.body?.items)) return req.body.items.map((i: { ip: string }) => i.ip);
  if (Array.isArray(req.body?.ips)) return req.body.ips;
  return [];
}

/** A batch answer: every IP succeeds except those in `failures` (ip → code). */
export function batchReply(req: ScriptedRequest, failures: Record<string, number> = {}): Reply {
  const ips = ipsOf(req);
  const failed_items = ips
    .filter((ip) => failures[ip] !== undefined)
    .map((ip) => ({ ip, code: failures[ip]!, reason: `reason ${failures[ip]}` }));
  const success_count = ips.length - failed_items.length;
  return {
    code: failed_items.length ? 10431 : 200,
    message: failed_items.length ? `${success_count} succeeded, ${failed_items.length} failed` : 'success',
    data: { success_count, failed_count: failed_items.length, failed_items },
  };
}

export const unauthorized: Reply = { status: 401, code: 10401, message: 'invalid api key', data: null };
export const rateLimited = (seconds: number): Reply => ({
  status: 429,
  code: 10429,
  message: 'rate limited',
  headers: { 'retry-after': String(seconds) },
});
export const unavailable: Reply = { status: 503, code: 10503, message: 'rate limit service unavailable' };
export const systemError: Reply = { status: 500, code: 10500, message: 'system error' };

/**
 * A test file's way to a scripted server and an API client of it: call once at the file's top level (it
 * registers an afterEach that closes both), then `await setup(handler)` in each test.
 */
export function scriptedClient(): (
  handler: Handler,
  opts?: { timeoutMs?: number; path?: string },
) => Promise<{ server: ScriptedServer; api: ApiClient }> {
  const open: Array<{ close(): Promise<unknown> }> = [];
  afterEach(async () => {
    for (const x of open.splice(0).reverse()) await x.close();
  });
  return async (handler, opts = {}) => {
    const server = await startScriptedServer(handler);
    open.push(server);
    const api = new ApiClient({
      baseUrl: `${server.url}${opts.path ?? ''}`,
      token: TOKEN,
      timeoutMs: opts.timeoutMs ?? 2000,
    });
    open.push(api);
    return { server, api };
  };
}
