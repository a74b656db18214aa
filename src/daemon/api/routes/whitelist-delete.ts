// POST /openapi/v1/proxy/whitelist/delete (docs/api.md Delete)
import type { FastifyInstance } from 'fastify';
import { API_PATHS } from '../../../contract/paths.js';
import { DeleteBodySchema } from '../../../contract/schemas.js';
import type { ApiContext } from '../../services/context.js';
import { callerAudit, makeAuthHook } from '../auth.js';
import { parseJsonBody } from '../body.js';
import { sendEnvelope } from '../envelope.js';
import { parseBatchBody, rejectExtraQuery } from './query.js';

export function parseDeleteBody(body: unknown) {
  return parseBatchBody(body, 'ips', DeleteBodySchema);
}

export default function deleteRoute(app: FastifyInstance, ctx: ApiContext): void {
  app.post(
    API_PATHS.delete,
    { onRequest: makeAuthHook(ctx.store, ctx.limits, 'delete', ctx.nowMs) },
    async (request, reply) => {
      rejectExtraQuery(request);
      const body = parseDeleteBody(parseJsonBody(request));
      const out = await ctx.whitelist.delete(request.caller!.accountId, body.ips, callerAudit(request));
      return sendEnvelope(request, reply, out.code, out.data, out.message);
    },
  );
}
