// POST /openapi/v1/proxy/whitelist/add (docs/api.md Add)
import type { FastifyInstance } from 'fastify';
import { API_PATHS } from '../../../contract/paths.js';
import { AddBodySchema } from '../../../contract/schemas.js';
import type { ApiContext } from '../../services/context.js';
import { callerAudit, makeAuthHook } from '../auth.js';
import { parseJsonBody } from '../body.js';
import { sendEnvelope } from '../envelope.js';
import { parseBatchBody, rejectExtraQuery } from './query.js';

export function parseAddBody(body: unknown) {
  return parseBatchBody(body, 'items', AddBodySchema);
}

export default function addRoute(app: FastifyInstance, ctx: ApiContext): void {
  app.post(
    API_PATHS.add,
    { onRequest: makeAuthHook(ctx.store, ctx.limits, 'add', ctx.nowMs) },
    async (request, reply) => {
      rejectExtraQuery(request);
      const body = parseAddBody(parseJsonBody(request));
      const out = await ctx.whitelist.add(request.caller!.accountId, body.items, callerAudit(request));
      return sendEnvelope(request, reply, out.code, out.data, out.message);
    },
  );
}
