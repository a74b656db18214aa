// GET /openapi/v1/proxy/ips (docs/api.md, "Dedicated addresses"): the key's account's dedicated egress addresses.
import type { FastifyInstance } from 'fastify';
import { Code } from '../../../contract/codes.js';
import { IPS_PATHS } from '../../../contract/paths.js';
import { customerIps, monthOf } from '../../services/dedicated.js';
import type { ApiContext } from '../../services/context.js';
import { sendEnvelope } from '../envelope.js';
import { keyRoute } from '../key-auth.js';
import { rejectExtraQuery } from './query.js';

export default function ipsListRoute(app: FastifyInstance, ctx: ApiContext): void {
  app.get(IPS_PATHS.list, keyRoute('users:read', 'read'), async (request, reply) => {
    rejectExtraQuery(request);
    const accountId = request.apiKey!.accountId; // the key's account, never the caller's input
    const now = ctx.nowMs();
    const [{ period_start, items }, used] = await Promise.all([
      customerIps(ctx.store, accountId, now),
      ctx.store.egress.replacementsUsed(accountId, monthOf(Math.floor(now / 1000)).month),
    ]);
    return sendEnvelope(request, reply, Code.OK, {
      items,
      total: items.length,
      period_start,
      replacements: { used, limit: ctx.dedicated.replacementsPerMonth },
    });
  });
}
