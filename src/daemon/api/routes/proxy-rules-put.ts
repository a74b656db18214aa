// PUT /openapi/v1/proxy/rules (docs/api.md, "Target rules"): each list given replaces that list ([] empties it), a
// list not given keeps its value; one bad item refuses the change (10400 naming it), nothing changes.
import type { FastifyInstance } from 'fastify';
import { BusinessError, Code } from '../../../contract/codes.js';
import { PROXY_PATHS } from '../../../contract/paths.js';
import type { ApiContext } from '../../services/context.js';
import { plainField } from '../../services/proxy-user-input.js';
import { describeProblems, setTargetRules, type TargetRulesChange } from '../../services/target-rules.js';
import { keyAudit } from '../key-auth.js';
import { parseJsonBody } from '../body.js';
import { sendEnvelope } from '../envelope.js';
import { accountOf, noQuery, writeRoute } from './proxy-common.js';

const bad = (field: string, problem: string) =>
  new BusinessError(Code.INVALID_PARAMS, `invalid parameters: ${field} (${problem})`);

export function parseRulesBody(body: unknown): TargetRulesChange {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw bad('body', 'a JSON object with allow and deny');
  const change: TargetRulesChange = {};
  for (const [k, v] of Object.entries(body)) {
    if (k !== 'allow' && k !== 'deny') throw bad(plainField(k), 'unknown field');
    if (!Array.isArray(v) || v.some((i) => typeof i !== 'string')) throw bad(k, 'an array of strings');
    const items = v as string[];
    const withComma = items.find((i) => i.includes(','));
    if (withComma !== undefined) throw bad(k, `"${withComma.slice(0, 80)}": one domain pattern or CIDR per item`);
    // `none` is the text forms' word for an empty list: as the only item it would empty this one (an allow list
    // emptied lets every target through). An array says "none" with [].
    if (items.length === 1 && items[0]!.trim().toLowerCase() === 'none')
      throw bad(k, '"none": write [] to empty the list');
    change[k] = items.length === 0 ? 'none' : items.join(',');
  }
  return change;
}

export default function proxyRulesPutRoute(app: FastifyInstance, ctx: ApiContext): void {
  app.put(PROXY_PATHS.rules, writeRoute(ctx, 'rules:write'), async (request, reply) => {
    noQuery(request);
    const change = parseRulesBody(parseJsonBody(request));
    const r = await setTargetRules(ctx.store, accountOf(request), change, keyAudit(request));
    if (!r.ok) {
      if (r.code === 'invalid_items') {
        const first = r.lists[0]!;
        throw bad(
          first.list,
          describeProblems(first.problems.slice(0, 5).map((p) => ({ ...p, item: p.item.slice(0, 80) }))),
        );
      }
      throw bad('allow', 'not accepted here');
    }
    return sendEnvelope(request, reply, Code.OK, { allow: r.rules.allow, deny: r.rules.deny });
  });
}
