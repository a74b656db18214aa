// The daemon's HTTP app: whitelist API, operational endpoints, and (when given) the console.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import { BusinessError, Code } from '../../contract/codes.js';
import { API_PATHS, AUDIT_PATH, MAX_BODY_BYTES, USAGE_PATHS } from '../../contract/paths.js';
import type { DaemonLog } from '../log.js';
import { LimiterUnavailableError } from '../ratelimit/limiter.js';
import { StoreUnavailableError } from '../store/index.js';
import type { ApiContext } from '../services/context.js';
import { sendEnvelope } from './envelope.js';
import { KeyAuthenticator } from './key-auth.js';
import daemonEndpoints from './routes/daemon-endpoints.js';
import { refuseOtherMethods } from './routes/method-not-allowed.js';
import addRoute from './routes/whitelist-add.js';
import deleteRoute from './routes/whitelist-delete.js';
import listRoute from './routes/whitelist-list.js';
import usageDomainsRoute from './routes/usage-domains.js';
import usageSeriesRoute from './routes/usage-series.js';
import usageSummaryRoute from './routes/usage-summary.js';
import proxyRoutes from './routes/proxy-routes.js';
import { IDEMPOTENCY_TTL_MS } from './idempotency.js';
import auditRoute from './routes/audit.js';
import ipsListRoute from './routes/ips-list.js';
import ipsReplaceRoute from './routes/ips-replace.js';

interface AppOptions {
  trustProxy: string[];
  /** The daemon's logger (src/daemon/log.ts), or `false` (tests). */
  logger: DaemonLog | false;
  /** Mounts extra plugins (the console) on the app. */
  plugins?: Array<(app: FastifyInstance) => Promise<void>>;
}

/** A whole HTTP/1.1 response carrying the envelope, for answers written on the socket outside Fastify. */
function rawEnvelopeResponse(status: string, code: number, message: string, requestId = randomUUID()): string {
  const body = JSON.stringify({ code, message, requestId, data: null });
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

/**
 * Requests Node's HTTP parser refuses (bad framing, a head over 16 KiB, a timeout) never reach Fastify;
 * they still get the envelope and the usual headers, and the connection is closed.
 */
export function clientErrorResponse(err: NodeJS.ErrnoException): string | null {
  if (err.code === 'ECONNRESET' || err.code === 'EPIPE') return null;
  const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
  const timeout = err.code === 'ERR_HTTP_REQUEST_TIMEOUT';
  const status = tooLarge ? '431 Request Header Fields Too Large' : timeout ? '408 Request Timeout' : '400 Bad Request';
  const message = tooLarge
    ? 'invalid parameters: request head too large'
    : timeout
      ? 'invalid parameters: request timed out'
      : 'invalid parameters: malformed HTTP request';
  return rawEnvelopeResponse(status, Code.INVALID_PARAMS, message);
}

export async function buildApp(ctx: ApiContext, opts: AppOptions): Promise<FastifyInstance> {
  /** The one log line and the metrics of a request, by route pattern (never the URL). */
  const logRequest = (request: FastifyRequest, reply: FastifyReply): void => {
    const route = request.routeOptions?.url ?? '(unmatched)';
    const status = reply.statusCode;
    const code = reply.businessCode;
    ctx.metrics.httpRequests.inc({ route, method: request.method, status: String(status), code: String(code ?? '') });
    ctx.metrics.httpDuration.observe({ route }, reply.elapsedTime / 1000);
    if (code === Code.RATE_LIMITED) ctx.metrics.rateLimited.inc({ route, reason: request.limitedBy ?? 'token' });
    if (code === Code.LIMITER_UNAVAILABLE) ctx.metrics.rateLimited.inc({ route, reason: 'store_unavailable' });
    // An API key by its id only (never the key); the URL never (its query string may hold a secret).
    const key = request.apiKey ? { key: request.apiKey.id } : {};
    // An Idempotency-Key replay answers with the first request's id (header and body): named here to find it.
    const replayOf =
      reply.getHeader('idempotent-replayed') === 'true' ? { replayOf: String(reply.getHeader('x-request-id')) } : {};
    request.log.info(
      {
        method: request.method,
        route,
        status,
        code,
        ...key,
        ...replayOf,
        ms: Math.round(reply.elapsedTime * 100) / 100,
      },
      'request',
    );
  };
  const app = Fastify({
    ...(opts.logger ? { loggerInstance: opts.logger as FastifyBaseLogger } : { logger: false }),
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
    // Failures Fastify answers itself, before routing (a URL it cannot decode): its own body would echo the
    // URL, query string and api_key included. HTTP 400 like the parser's refusals (it cannot be a whitelist
    // request). No hook runs for these, so the headers and the log line are set here.
    frameworkErrors(_err, request, reply) {
      reply.raw.once('finish', () => logRequest(request, reply));
      reply
        .header('x-request-id', request.id)
        .header('x-content-type-options', 'nosniff')
        .header('cache-control', 'no-store');
      return sendEnvelope(request, reply, Code.INVALID_PARAMS, null, 'invalid parameters: malformed URL', {
        httpStatus: 400,
      });
    },
    clientErrorHandler(err, socket) {
      const response = clientErrorResponse(err as NodeJS.ErrnoException);
      if (response && socket.writable) socket.end(response);
      else socket.destroy();
    },
  });

  app.decorate('keyAuth', new KeyAuthenticator(ctx.store, ctx.limits, ctx.nowMs));

  app.addHook('onSend', async (request, reply, payload) => {
    // An Idempotency-Key replay has set the first answer's id already: header and body name one request.
    if (!reply.hasHeader('x-request-id')) reply.header('x-request-id', request.id);
    reply.header('x-content-type-options', 'nosniff');
    if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
    return payload;
  });

  app.addHook('onResponse', async (request, reply) => logRequest(request, reply));

  app.setErrorHandler(
    async (err: Error & { code?: string; statusCode?: number; validation?: unknown }, request, reply) => {
      if (err instanceof BusinessError) {
        return sendEnvelope(request, reply, err.code, null, err.message, { retryAfterSeconds: err.retryAfterSeconds });
      }
      if (err instanceof LimiterUnavailableError) return sendEnvelope(request, reply, Code.LIMITER_UNAVAILABLE);
      if (err instanceof StoreUnavailableError)
        return sendEnvelope(
          request,
          reply,
          Code.LIMITER_UNAVAILABLE,
          null,
          'service unavailable: database unreachable',
        );
      if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
        return sendEnvelope(
          request,
          reply,
          Code.INVALID_PARAMS,
          null,
          `invalid parameters: body larger than ${MAX_BODY_BYTES / 1024} KiB`,
        );
      }
      if (
        err.code?.startsWith('FST_ERR_CTP_') ||
        err.validation ||
        (err.statusCode && err.statusCode >= 400 && err.statusCode < 500)
      ) {
        return sendEnvelope(request, reply, Code.INVALID_PARAMS, null, 'invalid parameters: malformed request');
      }
      // The message only: a stack or a request dump could carry a query string.
      request.log.error({ err: { type: err.name, message: err.message } }, 'unhandled error');
      return sendEnvelope(request, reply, Code.SYSTEM);
    },
  );

  app.setNotFoundHandler(async (request, reply) => sendEnvelope(request, reply, Code.NOT_FOUND));

  // CONNECT never reaches Fastify (Node hands it to 'connect' listeners and drops the socket without one):
  // this is the API, not the proxy, so say so and close.
  app.server.on('connect', (req: IncomingMessage, socket: Duplex) => {
    const requestId = randomUUID();
    socket.on('error', () => socket.destroy());
    socket.end(
      rawEnvelopeResponse(
        '405 Method Not Allowed',
        Code.METHOD_NOT_ALLOWED,
        'method not allowed: CONNECT goes to the proxy port, not the API',
        requestId,
      ),
    );
    app.log.info(
      { requestId, method: req.method, route: '(connect)', status: 405, code: Code.METHOD_NOT_ALLOWED },
      'request',
    );
  });

  // Whitelist API in its own scope: its body parser keeps raw bytes so the handler decides (after auth).
  await app.register(async (api) => {
    api.removeAllContentTypeParsers();
    api.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: MAX_BODY_BYTES }, (_req, body, done) =>
      done(null, body),
    );
    listRoute(api, ctx);
    addRoute(api, ctx);
    deleteRoute(api, ctx);
    usageSummaryRoute(api, ctx);
    usageSeriesRoute(api, ctx);
    usageDomainsRoute(api, ctx);
    proxyRoutes(api, ctx);
    auditRoute(api, ctx);
    ipsListRoute(api, ctx);
    ipsReplaceRoute(api, ctx);
    const allowed: Record<string, string> = {
      [API_PATHS.list]: 'GET',
      [API_PATHS.add]: 'POST',
      [API_PATHS.delete]: 'POST',
      [USAGE_PATHS.summary]: 'GET',
      [USAGE_PATHS.series]: 'GET',
      [USAGE_PATHS.domains]: 'GET',
      [AUDIT_PATH]: 'GET',
    };
    for (const [url, method] of Object.entries(allowed)) refuseOtherMethods(api, url, [method]);
  });

  // Idempotency-Key answers are kept 24 h (docs/api.md, "Idempotency"); any node may forget the old ones.
  const pruneIdempotency = setInterval(
    () => void ctx.store.idempotency.prune(ctx.nowMs() - IDEMPOTENCY_TTL_MS).catch(() => {}),
    10 * 60_000,
  );
  pruneIdempotency.unref();
  app.addHook('onClose', async () => clearInterval(pruneIdempotency));

  daemonEndpoints(app, ctx);
  for (const plugin of opts.plugins ?? []) await app.register(plugin);
  return app;
}
