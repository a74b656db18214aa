// GET /openapi/v1/proxy/gateway (docs/api.md, "Gateway"): what a customer needs to build proxy URLs; any key's scope.
import type { FastifyInstance } from 'fastify';
import { Code } from '../../../contract/codes.js';
import { PROXY_PATHS } from '../../../contract/paths.js';
import type { ApiContext } from '../../services/context.js';
import { gatewayInfo } from '../../services/gateway-info.js';
import { sendEnvelope } from '../envelope.js';
import { noQuery, readRoute } from './proxy-common.js';

export default function proxyGatewayRoute(app: FastifyInstance, ctx: ApiContext): void {
  app.get(PROXY_PATHS.gateway, readRoute('any'), async (request, reply) => {
    noQuery(request);
    return sendEnvelope(request, reply, Code.OK, await gatewayInfo(ctx.store, ctx.gateway));
  });
}
