// POST /openapi/v1/proxy/users (docs/api.md, "Proxy users"): one user with its settings; the password (given, or
// generated) is in the answer once. Taken → 10409.
import type { FastifyInstance } from 'fastify';
import { BusinessError, Code } from '../../../contract/codes.js';
import { PROXY_PATHS } from '../../../contract/paths.js';
import type { ApiContext } from '../../services/context.js';
import { parseNewUser } from '../../services/proxy-user-input.js';
import { createUserWithSettings } from '../../services/proxy-users.js';
import { keyAudit } from '../key-auth.js';
import { parseJsonBody } from '../body.js';
import { sendEnvelope } from '../envelope.js';
import { accountOf, invalid, noQuery, writeRoute } from './proxy-common.js';

export default function proxyUserCreateRoute(app: FastifyInstance, ctx: ApiContext): void {
  app.post(PROXY_PATHS.users, writeRoute(ctx, 'users:write'), async (request, reply) => {
    noQuery(request);
    const input = parseNewUser(parseJsonBody(request));
    if (!input.ok) throw invalid(input.problem);
    const out = await createUserWithSettings(
      ctx.store,
      accountOf(request),
      input.value,
      ctx.nowMs(),
      keyAudit(request),
    );
    if (!out.ok) throw new BusinessError(Code.CONFLICT, `conflict: username ${input.value.username} is taken`);
    return sendEnvelope(request, reply, Code.OK, { ...out.user, password: out.password });
  });
}
