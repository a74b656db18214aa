// GET /openapi/v1/proxy/rules (docs/api.md, "Target rules"): the account's allow and deny lists.
import type { FastifyInstance } from 'fastify';
import { Code } from '../../../contract/codes.js';
import { PROXY_PATHS } from '../../../contract/paths.js';
import type { ApiContext } from '../../services/context.js';
import { getTargetRules } from '../../services/target-rules.js';
import { sendEnvelope } from '../envelope.js';
import { accountOf, noQuery, readRoute } from './proxy-common.js';

export default function proxyRulesGetRoute(app: FastifyInstance, ctx: ApiContext): void {
  app.get(PROXY_PATHS.rules, readRoute('rules:read'), async (request, reply) => {
    noQuery(request);
    const rules = await getTargetRules(ctx.store, accountOf(request));
    return sendEnvelope(request, reply, Code.OK, { allow: rules.allow, deny: rules.deny });
  });
}
