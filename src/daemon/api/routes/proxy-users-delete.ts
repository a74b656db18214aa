// DELETE /openapi/v1/proxy/users/{username} (docs/api.md, "Proxy users"): its open connections are closed on every
// node within 2 s; its usage stays in the account's history.
import type { FastifyInstance } from 'fastify';
import { BusinessError, Code } from '../../../contract/codes.js';
import { PROXY_PATHS } from '../../../contract/paths.js';
import type { ApiContext } from '../../services/context.js';
import { deleteUserByName } from '../../services/proxy-users.js';
import { keyAudit } from '../key-auth.js';
import { sendEnvelope } from '../envelope.js';
import { accountOf, noQuery, notFound, usernameParam, writeRoute } from './proxy-common.js';

export default function proxyUserDeleteRoute(app: FastifyInstance, ctx: ApiContext): void {
  app.delete(PROXY_PATHS.user, writeRoute(ctx, 'users:write'), async (request, reply) => {
    const username = usernameParam(request);
    noQuery(request);
    const body = request.body;
    if (Buffer.isBuffer(body) && body.length > 0)
      throw new BusinessError(Code.INVALID_PARAMS, 'invalid parameters: body (a delete takes none)');
    if (!(await deleteUserByName(ctx.store, accountOf(request), username, keyAudit(request)))) throw notFound();
    return sendEnvelope(request, reply, Code.OK, { username });
  });
}
