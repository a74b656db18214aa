// GET /openapi/v1/proxy/whitelist/list (docs/api.md List)
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { BusinessError, Code } from '../../../contract/codes.js';
import { API_KEY_PARAM, API_PATHS } from '../../../contract/paths.js';
import { firstIssueField, ListQuerySchema, type ListQuery } from '../../../contract/schemas.js';
import type { ApiContext } from '../../services/context.js';
import { makeAuthHook, rawQuery } from '../auth.js';
import { listFilter } from '../../services/whitelist.js';
import type { ListFilter } from '../../store/index.js';
import { sendEnvelope } from '../envelope.js';
import { safeName } from '../body.js';

/** The query without api_key; a repeated or unknown parameter is an error naming it. */
export function parseListQuery(raw: string) {
  const params = new URLSearchParams(raw);
  // No prototype: `__proto__=1` must become a key (an unknown parameter), not the object's prototype.
  const obj: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const key of new Set(params.keys())) {
    if (key === API_KEY_PARAM) continue;
    const values = params.getAll(key);
    if (values.length > 1) throw new BusinessError(Code.INVALID_PARAMS, `invalid parameters: ${safeName(key)} is repeated`);
    obj[key] = values[0]!;
  }
  const r = ListQuerySchema.safeParse(obj);
  if (!r.success) throw new BusinessError(Code.INVALID_PARAMS, `invalid parameters: ${safeName(firstIssueField(r.error))}`);
  return r.data;
}

export default function listRoute(app: FastifyInstance, ctx: ApiContext): void {
  // A valid query's page may come with the admission (one round trip on PostgreSQL); the query is parsed
  // once and kept for the handler. A bad one is refused after the token checks, as before.
  const prefetch = (request: FastifyRequest): ListFilter | undefined => {
    try {
      request.listQuery = parseListQuery(rawQuery(request));
      return listFilter(request.listQuery);
    } catch {
      return undefined;
    }
  };
  app.get(API_PATHS.list, { onRequest: makeAuthHook(ctx.store, ctx.limits, 'list', ctx.nowMs, prefetch) }, async (request, reply) => {
    const query = request.listQuery ?? parseListQuery(rawQuery(request));
    return sendEnvelope(request, reply, Code.OK, await ctx.whitelist.list(request.caller!.accountId, query, request.prefetchedPage));
  });
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The list query, when it was parsed (valid) before the admission. */
    listQuery?: ListQuery;
  }
}
