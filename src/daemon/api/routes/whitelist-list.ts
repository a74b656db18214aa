// GET /openapi/v1/proxy/whitelist/list (docs/api.md List)
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Code } from '../../../contract/codes.js';
import { API_PATHS } from '../../../contract/paths.js';
import { ListQuerySchema, type ListQuery } from '../../../contract/schemas.js';
import type { ApiContext } from '../../services/context.js';
import { makeAuthHook, rawQuery } from '../auth.js';
import { listFilter } from '../../services/whitelist.js';
import type { ListFilter } from '../../store/index.js';
import { sendEnvelope } from '../envelope.js';
import { parseStrictQuery } from './query.js';

/** The query without api_key; a repeated or unknown parameter is an error naming it. */
export function parseListQuery(raw: string) {
  return parseStrictQuery(raw, ListQuerySchema);
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
  app.get(
    API_PATHS.list,
    { onRequest: makeAuthHook(ctx.store, ctx.limits, 'list', ctx.nowMs, prefetch) },
    async (request, reply) => {
      const query = request.listQuery ?? parseListQuery(rawQuery(request));
      return sendEnvelope(
        request,
        reply,
        Code.OK,
        await ctx.whitelist.list(request.caller!.accountId, query, request.prefetchedPage),
      );
    },
  );
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The list query, when it was parsed (valid) before the admission. */
    listQuery?: ListQuery;
  }
}
