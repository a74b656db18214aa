// GET /openapi/v1/usage/series (docs/api.md Usage): hour or day points over a range, optionally of one user.
import type { FastifyInstance } from 'fastify';
import { Code } from '../../../contract/codes.js';
import { USAGE_PATHS } from '../../../contract/paths.js';
import { UsageSeriesQuerySchema } from '../../../contract/schemas.js';
import type { ApiContext } from '../../services/context.js';
import { usageSeries } from '../../services/usage.js';
import { makeAuthHook, rawQuery } from '../auth.js';
import { sendEnvelope } from '../envelope.js';
import { asInvalidParams, parseStrictQuery } from './query.js';

export default function usageSeriesRoute(app: FastifyInstance, ctx: ApiContext): void {
  app.get(USAGE_PATHS.series, { onRequest: makeAuthHook(ctx.store, ctx.limits, 'usage', ctx.nowMs) }, async (request, reply) => {
    const query = parseStrictQuery(rawQuery(request), UsageSeriesQuerySchema);
    const data = await asInvalidParams(usageSeries(ctx.store, request.caller!.accountId, query, ctx.nowMs()));
    return sendEnvelope(request, reply, Code.OK, data);
  });
}
