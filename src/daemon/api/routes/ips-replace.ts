// POST /openapi/v1/proxy/ips/replace (docs/api.md, "Dedicated addresses"): swaps one of the key's account's addresses
// for a free one of the same node (else the same country); at most --ip-replacements a calendar month (10429 with
// Retry-After to the month's end); none free → 10503; not the account's → 10404.
import type { FastifyInstance } from 'fastify';
import { BusinessError, Code } from '../../../contract/codes.js';
import { isStrictIPv4 } from '../../../contract/ipv4.js';
import { IPS_PATHS } from '../../../contract/paths.js';
import { IpReplaceBodySchema, firstIssueField } from '../../../contract/schemas.js';
import { replaceAddress } from '../../services/dedicated.js';
import type { ApiContext } from '../../services/context.js';
import { parseJsonBody } from '../body.js';
import { sendEnvelope } from '../envelope.js';
import { keyAudit } from '../key-auth.js';
import { writeRoute } from './proxy-common.js';
import { rejectExtraQuery } from './query.js';

export const NO_FREE_ADDRESS = 'no free address to replace with';

export default function ipsReplaceRoute(app: FastifyInstance, ctx: ApiContext): void {
  app.post(IPS_PATHS.replace, writeRoute(ctx, 'users:write'), async (request, reply) => {
    rejectExtraQuery(request);
    const parsed = IpReplaceBodySchema.safeParse(parseJsonBody(request));
    if (!parsed.success)
      throw new BusinessError(Code.INVALID_PARAMS, `invalid parameters: ${firstIssueField(parsed.error)}`);
    const address = parsed.data.address;
    if (!isStrictIPv4(address))
      throw new BusinessError(Code.INVALID_PARAMS, 'invalid parameters: address (an IPv4 address A.B.C.D)');
    const d = ctx.dedicated;
    const r = await replaceAddress(
      ctx.store,
      request.apiKey!.accountId,
      address,
      { maxPerMonth: d.replacementsPerMonth, quarantineDays: d.quarantineDays, nowSec: Math.floor(ctx.nowMs() / 1000) },
      keyAudit(request),
    );
    if (r.ok) return sendEnvelope(request, reply, Code.OK, { old: r.old, new: r.new });
    if (r.code === 'not_found')
      return sendEnvelope(
        request,
        reply,
        Code.NOT_FOUND,
        null,
        `not found: ${address} is not one of the account's dedicated addresses`,
      );
    if (r.code === 'allowance') {
      return sendEnvelope(
        request,
        reply,
        Code.RATE_LIMITED,
        null,
        `rate limited: ${d.replacementsPerMonth} replacements a calendar month, used`,
        { retryAfterSeconds: r.retryAfterSec },
      );
    }
    return sendEnvelope(request, reply, Code.LIMITER_UNAVAILABLE, null, NO_FREE_ADDRESS);
  });
}
