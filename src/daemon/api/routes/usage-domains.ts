// GET /openapi/v1/usage/domains (docs/api.md Usage): usage per registrable domain over whole days, largest first.
import type { FastifyInstance } from 'fastify';
import { Code } from '../../../contract/codes.js';
import { USAGE_PATHS } from '../../../contract/paths.js';
import { UsageDomainsQuerySchema } from '../../../contract/schemas.js';
import type { ApiContext } from '../../services/context.js';
import { usageDomains } from '../../services/usage.js';
import { rawQuery } from '../auth.js';
import { keyRoute } from '../key-auth.js';
import { sendEnvelope } from '../envelope.js';
import { asInvalidParams, parseStrictQuery } from './query.js';

export default function usageDomainsRoute(app: FastifyInstance, ctx: ApiContext): void {
  app.get(USAGE_PATHS.domains, keyRoute('usage:read', 'read', { route: 'usage' }), async (request, reply) => {
    const query = parseStrictQuery(rawQuery(request), UsageDomainsQuerySchema);
    const data = await asInvalidParams(usageDomains(ctx.store, request.apiKey!.accountId, query, ctx.nowMs()));
    return sendEnvelope(request, reply, Code.OK, data);
  });
}
