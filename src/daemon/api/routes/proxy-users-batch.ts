// POST /openapi/v1/proxy/users/batch (docs/api.md, "Create many"): 1–100 users, each on its own as the whitelist's add
// (a refused item undoes nothing before it); the batch result plus each created user's password, shown once.
import type { FastifyInstance } from 'fastify';
import { BusinessError, Code, partialMessage } from '../../../contract/codes.js';
import { MAX_BATCH_ITEMS, PROXY_PATHS } from '../../../contract/paths.js';
import type { ApiContext } from '../../services/context.js';
import { parseNewUser, plainField } from '../../services/proxy-user-input.js';
import { createUsersBatch } from '../../services/proxy-users.js';
import { keyAudit } from '../key-auth.js';
import { parseJsonBody } from '../body.js';
import { sendEnvelope } from '../envelope.js';
import { accountOf, invalid, noQuery, writeRoute } from './proxy-common.js';

/** The items, each parsed: a malformed request (its shape) is refused whole; a bad value fails its item only. */
export function parseUsersBatch(body: unknown) {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new BusinessError(Code.INVALID_PARAMS, 'invalid parameters: body (a JSON object with items)');
  for (const k of Object.keys(body))
    if (k !== 'items')
      throw new BusinessError(Code.INVALID_PARAMS, `invalid parameters: ${plainField(k)} (unknown field)`);
  const items = (body as { items?: unknown }).items;
  if (!Array.isArray(items))
    throw new BusinessError(Code.INVALID_PARAMS, 'invalid parameters: items (an array of 1 to 100 users)');
  if (items.length > MAX_BATCH_ITEMS) throw new BusinessError(Code.TOO_MANY_ITEMS);
  if (items.length === 0)
    throw new BusinessError(Code.INVALID_PARAMS, 'invalid parameters: items (an array of 1 to 100 users)');
  return items.map((item, i) => {
    const r = parseNewUser(item, `items.${i}.`);
    if (r.ok) return r;
    if (r.problem.kind === 'shape') throw invalid(r.problem);
    const username =
      typeof (item as { username?: unknown }).username === 'string'
        ? (item as { username: string }).username.slice(0, 64)
        : null;
    return { ok: false as const, username, field: r.problem.field, problem: r.problem.problem };
  });
}

export default function proxyUsersBatchRoute(app: FastifyInstance, ctx: ApiContext): void {
  app.post(PROXY_PATHS.usersBatch, writeRoute(ctx, 'users:write'), async (request, reply) => {
    noQuery(request);
    const items = parseUsersBatch(parseJsonBody(request));
    const out = await createUsersBatch(ctx.store, accountOf(request), items, ctx.nowMs(), keyAudit(request));
    if (out.failed_count === 0) return sendEnvelope(request, reply, Code.OK, out);
    return sendEnvelope(request, reply, Code.PARTIAL, out, partialMessage(out.success_count, out.failed_count));
  });
}
