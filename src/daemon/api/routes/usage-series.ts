// GET /openapi/v1/usage/series (docs/api.md Usage): hour or day points over a range, optionally of one user.
import type { FastifyInstance } from 'fastify';
import { Code } from '../../../contract/codes.js';
import { USAGE_PATHS } from '../../../contract/paths.js';
import { UsageSeriesQuerySchema } from '../../../contract/schemas.js';
import type { ApiContext } from '../../services/context.js';
import { usageSeries } from '../../services/usage.js';
import { rawQuery } from '../auth.js';
import { keyRoute } from '../key-auth.js';
import { sendEnvelope } from '../envelope.js';
import { asInvalidParams, parseStrictQuery } from './query.js';

export default function usageSeriesRoute(app: FastifyInstance, ctx: ApiContext): void {
  app.get(USAGE_PATHS.series, keyRoute('usage:read', 'read', { route: 'usage' }), async (request, reply) => {
    const query = parseStrictQuery(rawQuery(request), UsageSeriesQuerySchema);
    const data = await asInvalidParams(usageSeries(ctx.store, request.apiKey!.accountId, query, ctx.nowMs()));
    return sendEnvelope(request, reply, Code.OK, data);
  });
}
