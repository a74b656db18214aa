// POST /openapi/v1/proxy/whitelist/add (SPEC 3.5)
import type { FastifyInstance } from 'fastify';
import { BusinessError, Code } from '../../../contract/codes.js';
import { API_PATHS, MAX_BATCH_ITEMS } from '../../../contract/paths.js';
import { AddBodySchema, firstIssueField } from '../../../contract/schemas.js';
import type { ApiContext } from '../context.js';
import { makeAuthHook } from '../auth.js';
import { parseJsonBody } from '../body.js';
import { sendEnvelope } from '../envelope.js';
import { rejectExtraQuery } from './query.js';

export function parseAddBody(body: unknown) {
  const items = (body as { items?: unknown } | null)?.items;
  if (Array.isArray(items) && items.length > MAX_BATCH_ITEMS) throw new BusinessError(Code.TOO_MANY_ITEMS);
  const r = AddBodySchema.safeParse(body);
  if (!r.success) throw new BusinessError(Code.INVALID_PARAMS, `invalid parameters: ${firstIssueField(r.error)}`);
  return r.data;
}

export default function addRoute(app: FastifyInstance, ctx: ApiContext): void {
  app.post(API_PATHS.add, { onRequest: makeAuthHook(ctx.store, ctx.limits, 'add', ctx.nowMs) }, async (request, reply) => {
    rejectExtraQuery(request);
    const body = parseAddBody(parseJsonBody(request));
    const out = ctx.whitelist.add(request.caller!.accountId, body.items);
    return sendEnvelope(request, reply, out.code, out.data, out.message);
  });
}
