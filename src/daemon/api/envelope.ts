// The response envelope (docs/api.md Envelope), sent the same way by every whitelist route and error path.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { HTTP_STATUS, TOP_MESSAGE } from '../../contract/codes.js';

declare module 'fastify' {
  interface FastifyReply {
    /** The business code sent, for the request log and metrics. */
    businessCode?: number;
  }
}

export function sendEnvelope(
  request: FastifyRequest,
  reply: FastifyReply,
  code: number,
  data: unknown = null,
  message?: string,
  opts: { httpStatus?: number; retryAfterSeconds?: number | undefined } = {},
): FastifyReply {
  reply.businessCode = code;
  if (opts.retryAfterSeconds !== undefined) reply.header('retry-after', String(opts.retryAfterSeconds));
  return reply
    .code(opts.httpStatus ?? HTTP_STATUS[code] ?? 500)
    .type('application/json; charset=utf-8')
    .send({ code, message: message ?? TOP_MESSAGE[code] ?? 'error', requestId: request.id, data });
}
