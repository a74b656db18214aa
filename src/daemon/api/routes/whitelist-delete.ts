// POST /openapi/v1/proxy/whitelist/delete (SPEC 3.6)
import type { FastifyInstance } from 'fastify';
import { BusinessError, Code } from '../../../contract/codes.js';
import { API_PATHS, MAX_BATCH_ITEMS } from '../../../contract/paths.js';
import { DeleteBodySchema, firstIssueField } from '../../../contract/schemas.js';
import type { ApiContext } from '../context.js';
import { makeAuthHook } from '../auth.js';
import { parseJsonBody } from '../body.js';
import { sendEnvelope } from '../envelope.js';
import { rejectExtraQuery } from './query.js';

export function parseDeleteBody(body: unknown) {
  const ips = (body as { ips?: unknown } | null)?.ips;
  if (Array.isArray(ips) && ips.length > MAX_BATCH_ITEMS) throw new BusinessError(Code.TOO_MANY_ITEMS);
  const r = DeleteBodySchema.safeParse(body);
  if (!r.success) throw new BusinessError(Code.INVALID_PARAMS, `invalid parameters: ${firstIssueField(r.error)}`);
  return r.data;
}

export default function deleteRoute(app: FastifyInstance, ctx: ApiContext): void {
  app.post(API_PATHS.delete, { onRequest: makeAuthHook(ctx.store, ctx.limits, 'delete', ctx.nowMs) }, async (request, reply) => {
    rejectExtraQuery(request);
    const body = parseDeleteBody(parseJsonBody(request));
    const out = ctx.whitelist.delete(request.caller!.accountId, body.ips);
    return sendEnvelope(request, reply, out.code, out.data, out.message);
  });
}
