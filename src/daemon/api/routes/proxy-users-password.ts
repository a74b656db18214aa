// POST /openapi/v1/proxy/users/{username}/password (docs/api.md, "Proxy users"): a new password (given, or generated),
// in the answer once; the old one fails on every node within a second.
import type { FastifyInstance } from 'fastify';
import { Code } from '../../../contract/codes.js';
import { PROXY_PATHS } from '../../../contract/paths.js';
import type { ApiContext } from '../../services/context.js';
import { parsePasswordBody } from '../../services/proxy-user-input.js';
import { rotateUserPassword } from '../../services/proxy-users.js';
import { keyAudit } from '../key-auth.js';
import { sendEnvelope } from '../envelope.js';
import { accountOf, invalid, noQuery, notFound, optionalJsonBody, usernameParam, writeRoute } from './proxy-common.js';

export default function proxyUserPasswordRoute(app: FastifyInstance, ctx: ApiContext): void {
  app.post(PROXY_PATHS.userPassword, writeRoute(ctx, 'users:write'), async (request, reply) => {
    const username = usernameParam(request);
    noQuery(request);
    const given = parsePasswordBody(optionalJsonBody(request));
    if (!given.ok) throw invalid(given.problem);
    const password = await rotateUserPassword(ctx.store, accountOf(request), username, given.value, keyAudit(request));
    if (password === null) throw notFound();
    return sendEnvelope(request, reply, Code.OK, { username, password });
  });
}
