// GET /openapi/v1/audit (docs/api.md, "Audit log"): the key's own account's records, newest first, a page at a time.
import type { FastifyInstance } from 'fastify';
import { BusinessError, Code } from '../../../contract/codes.js';
import { AUDIT_PATH } from '../../../contract/paths.js';
import { AuditQuerySchema } from '../../../contract/schemas.js';
import { actionsKnown } from '../../services/audit.js';
import type { ApiContext } from '../../services/context.js';
import { rawQuery } from '../auth.js';
import { sendEnvelope } from '../envelope.js';
import { keyRoute } from '../key-auth.js';
import { parseStrictQuery } from './query.js';

export default function auditRoute(app: FastifyInstance, ctx: ApiContext): void {
  app.get(AUDIT_PATH, keyRoute('audit:read', 'read'), async (request, reply) => {
    const q = parseStrictQuery(rawQuery(request), AuditQuerySchema);
    if (q.from !== undefined && q.to !== undefined && q.from >= q.to)
      throw new BusinessError(Code.INVALID_PARAMS, 'invalid parameters: from (not before to)');
    if (q.action !== undefined && !actionsKnown(q.action))
      throw new BusinessError(Code.INVALID_PARAMS, `invalid parameters: action (no action or family ${q.action})`);
    // The account is the key's, never the caller's input.
    const page = await ctx.audit.list(request.apiKey!.accountId, {
      fromMs: q.from,
      toMs: q.to,
      action: q.action,
      page: q.page,
      page_size: q.page_size,
    });
    return sendEnvelope(request, reply, Code.OK, page);
  });
}
