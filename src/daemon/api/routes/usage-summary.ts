// GET /openapi/v1/usage/summary (docs/api.md Usage): the account's totals and per-user usage over a range.
import type { FastifyInstance } from 'fastify';
import { Code } from '../../../contract/codes.js';
import { USAGE_PATHS } from '../../../contract/paths.js';
import { UsageSummaryQuerySchema } from '../../../contract/schemas.js';
import type { ApiContext } from '../../services/context.js';
import { usageSummary } from '../../services/usage.js';
import { rawQuery } from '../auth.js';
import { keyRoute } from '../key-auth.js';
import { sendEnvelope } from '../envelope.js';
import { asInvalidParams, parseStrictQuery } from './query.js';

export default function usageSummaryRoute(app: FastifyInstance, ctx: ApiContext): void {
  app.get(USAGE_PATHS.summary, keyRoute('usage:read', 'read', { route: 'usage' }), async (request, reply) => {
    const query = parseStrictQuery(rawQuery(request), UsageSummaryQuerySchema);
    const data = await asInvalidParams(
      usageSummary(ctx.store, request.apiKey!.accountId, query, ctx.nowMs(), ctx.usageRetentionMs),
    );
    return sendEnvelope(request, reply, Code.OK, data);
  });
}
