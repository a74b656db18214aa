// PATCH /openapi/v1/proxy/users/{username} (docs/api.md, "Proxy users"): any field but username and password; null
// clears a limit; `disabled` refuses the user's new connections and closes its open ones on every node.
import type { FastifyInstance } from 'fastify';
import { Code } from '../../../contract/codes.js';
import { PROXY_PATHS } from '../../../contract/paths.js';
import type { ApiContext } from '../../services/context.js';
import { parsePatch } from '../../services/proxy-user-input.js';
import { showUser, updateUser } from '../../services/proxy-users.js';
import { keyAudit } from '../key-auth.js';
import { parseJsonBody } from '../body.js';
import { sendEnvelope } from '../envelope.js';
import { accountOf, invalid, noQuery, notFound, usernameParam, writeRoute } from './proxy-common.js';

export default function proxyUserPatchRoute(app: FastifyInstance, ctx: ApiContext): void {
  app.patch(PROXY_PATHS.user, writeRoute(ctx, 'users:write'), async (request, reply) => {
    const username = usernameParam(request);
    noQuery(request);
    const patch = parsePatch(parseJsonBody(request));
    if (!patch.ok) throw invalid(patch.problem);
    const accountId = accountOf(request);
    // Nothing to change: the user as it is, and no record.
    const user =
      Object.keys(patch.value).length === 0
        ? await showUser(ctx.store, accountId, username, ctx.nowMs())
        : await updateUser(ctx.store, accountId, username, patch.value, ctx.nowMs(), keyAudit(request));
    if (!user) throw notFound();
    return sendEnvelope(request, reply, Code.OK, user);
  });
}
