// GET /openapi/v1/proxy/users/{username} (docs/api.md, "Proxy users"): absent and another account's are the same 10404.
import type { FastifyInstance } from 'fastify';
import { Code } from '../../../contract/codes.js';
import { PROXY_PATHS } from '../../../contract/paths.js';
import type { ApiContext } from '../../services/context.js';
import { showUser } from '../../services/proxy-users.js';
import { sendEnvelope } from '../envelope.js';
import { accountOf, noQuery, notFound, readRoute, usernameParam } from './proxy-common.js';

export default function proxyUserShowRoute(app: FastifyInstance, ctx: ApiContext): void {
  app.get(PROXY_PATHS.user, readRoute('users:read'), async (request, reply) => {
    const username = usernameParam(request);
    noQuery(request);
    const user = await showUser(ctx.store, accountOf(request), username, ctx.nowMs());
    if (!user) throw notFound();
    return sendEnvelope(request, reply, Code.OK, user);
  });
}
