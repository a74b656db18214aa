// GET /openapi/v1/proxy/users (docs/api.md, "Proxy users"): a page of the account's users by username.
import type { FastifyInstance } from 'fastify';
import { Code } from '../../../contract/codes.js';
import { PROXY_PATHS } from '../../../contract/paths.js';
import { ProxyUsersQuerySchema } from '../../../contract/proxy-schemas.js';
import type { ApiContext } from '../../services/context.js';
import { listUsers } from '../../services/proxy-users.js';
import { rawQuery } from '../auth.js';
import { sendEnvelope } from '../envelope.js';
import { accountOf, readRoute } from './proxy-common.js';
import { parseStrictQuery } from './query.js';

export default function proxyUsersListRoute(app: FastifyInstance, ctx: ApiContext): void {
  app.get(PROXY_PATHS.users, readRoute('users:read'), async (request, reply) => {
    const q = parseStrictQuery(rawQuery(request), ProxyUsersQuerySchema);
    const data = await listUsers(
      ctx.store,
      accountOf(request),
      { page: q.page, pageSize: q.page_size, status: q.status === 'all' ? undefined : q.status, prefix: q.q },
      ctx.nowMs(),
    );
    return sendEnvelope(request, reply, Code.OK, data);
  });
}
