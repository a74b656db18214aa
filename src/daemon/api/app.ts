// The daemon's HTTP app: whitelist API, operational endpoints, and (when given) the console.
import { randomUUID } from 'node:crypto';
import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { BusinessError, Code } from '../../contract/codes.js';
import { API_PATHS, MAX_BODY_BYTES } from '../../contract/paths.js';
import { LimiterUnavailableError } from '../ratelimit/limiter.js';
import { StoreUnavailableError } from '../store/index.js';
import type { ApiContext } from './context.js';
import { sendEnvelope } from './envelope.js';
import daemonEndpoints from './routes/daemon-endpoints.js';
import addRoute from './routes/whitelist-add.js';
import deleteRoute from './routes/whitelist-delete.js';
import listRoute from './routes/whitelist-list.js';

export interface AppOptions {
  trustProxy: string[];
  /** Pino options or `false` (tests). Logs go to stderr as JSON lines. */
  logger: FastifyServerOptions['logger'];
  /** Mounts extra plugins (the console) on the app. */
  plugins?: Array<(app: FastifyInstance) => Promise<void>>;
}

export const LOG_SERIALIZERS = {
  // Never the URL: the query string can carry api_key.
  req: (req: { method?: string; routeOptions?: { url?: string } }) => ({ method: req.method, route: req.routeOptions?.url }),
  res: (res: { statusCode?: number }) => ({ status: res.statusCode }),
};

const ALL_METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'] as const;

/**
 * Requests Node's HTTP parser refuses (bad framing, a head over 16 KiB, a timeout) never reach Fastify;
 * they still get the envelope and the usual headers, and the connection is closed.
 */
export function clientErrorResponse(err: NodeJS.ErrnoException): string | null {
  if (err.code === 'ECONNRESET' || err.code === 'EPIPE') return null;
  const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
  const timeout = err.code === 'ERR_HTTP_REQUEST_TIMEOUT';
  const status = tooLarge ? '431 Request Header Fields Too Large' : timeout ? '408 Request Timeout' : '400 Bad Request';
  const requestId = randomUUID();
  const body = JSON.stringify({
    code: Code.INVALID_PARAMS,
    message: tooLarge ? 'invalid parameters: request head too large' : timeout ? 'invalid parameters: request timed out' : 'invalid parameters: malformed HTTP request',
    requestId,
    data: null,
  });
  return [
    `HTTP/1.1 ${status}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Cache-Control: no-store',
    'X-Content-Type-Options: nosniff',
    `X-Request-Id: ${requestId}`,
    'Connection: close',
    '',
    body,
  ].join('\r\n');
}

export async function buildApp(ctx: ApiContext, opts: AppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    logger: opts.logger,
    genReqId: () => randomUUID(),
    // Our onResponse hook writes the one line per request; Fastify's own lines would carry the URL.
    logController: new LogController({ requestIdLogLabel: 'requestId', disableRequestLogging: true }),
    trustProxy: opts.trustProxy.length ? opts.trustProxy : false,
    bodyLimit: MAX_BODY_BYTES,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    connectionTimeout: 30_000,
    requestTimeout: 30_000,
    keepAliveTimeout: 5_000,
    clientErrorHandler(err, socket) {
      const response = clientErrorResponse(err as NodeJS.ErrnoException);
      if (response && socket.writable) socket.end(response);
      else socket.destroy();
    },
  });

  app.addHook('onSend', async (request, reply, payload) => {
    reply.header('x-request-id', request.id);
    reply.header('x-content-type-options', 'nosniff');
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
    return payload;
  });

  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? '(unmatched)';
    const status = reply.statusCode;
    const code = reply.businessCode;
    ctx.metrics.httpRequests.inc({ route, method: request.method, status: String(status), code: String(code ?? '') });
    ctx.metrics.httpDuration.observe({ route }, reply.elapsedTime / 1000);
    if (code === Code.RATE_LIMITED) ctx.metrics.rateLimited.inc({ route, reason: request.limitedBy ?? 'token' });
    if (code === Code.LIMITER_UNAVAILABLE) ctx.metrics.rateLimited.inc({ route, reason: 'store_unavailable' });
    request.log.info({ method: request.method, route, status, code, ms: Math.round(reply.elapsedTime * 100) / 100 }, 'request');
  });

  app.setErrorHandler(async (err: Error & { code?: string; statusCode?: number; validation?: unknown }, request, reply) => {
    if (err instanceof BusinessError) {
      return sendEnvelope(request, reply, err.code, null, err.message, { retryAfterSeconds: err.retryAfterSeconds });
    }
    if (err instanceof LimiterUnavailableError) return sendEnvelope(request, reply, Code.LIMITER_UNAVAILABLE);
    if (err instanceof StoreUnavailableError) return sendEnvelope(request, reply, Code.LIMITER_UNAVAILABLE, null, 'service unavailable: database unreachable');
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      return sendEnvelope(request, reply, Code.INVALID_PARAMS, null, 'invalid parameters: body larger than 256 KiB');
    }
    if (err.code?.startsWith('FST_ERR_CTP_') || err.validation || (err.statusCode && err.statusCode >= 400 && err.statusCode < 500)) {
      return sendEnvelope(request, reply, Code.INVALID_PARAMS, null, 'invalid parameters: malformed request');
    }
    // The message only: a stack or a request dump could carry a query string.
    request.log.error({ err: { type: err.name, message: err.message } }, 'unhandled error');
    return sendEnvelope(request, reply, Code.SYSTEM);
  });

  app.setNotFoundHandler(async (request, reply) => sendEnvelope(request, reply, Code.NOT_FOUND));

  // Whitelist API in its own scope: its body parser keeps raw bytes so the handler decides (after auth).
  await app.register(async (api) => {
    api.removeAllContentTypeParsers();
    api.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: MAX_BODY_BYTES }, (_req, body, done) => done(null, body));
    listRoute(api, ctx);
    addRoute(api, ctx);
    deleteRoute(api, ctx);
    const allowed: Record<string, string> = { [API_PATHS.list]: 'GET', [API_PATHS.add]: 'POST', [API_PATHS.delete]: 'POST' };
    for (const [url, method] of Object.entries(allowed)) {
      api.route({
        method: ALL_METHODS.filter((m) => m !== method && !(method === 'GET' && m === 'GET')),
        url,
        handler: async (request, reply) => {
          reply.header('allow', method === 'GET' ? 'GET, HEAD' : method);
          return sendEnvelope(request, reply, Code.METHOD_NOT_ALLOWED);
        },
      });
    }
  });

  daemonEndpoints(app, ctx);
  for (const plugin of opts.plugins ?? []) await app.register(plugin);
  return app;
}
