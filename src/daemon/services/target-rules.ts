// Target rules (docs/gateway.md, "Target rules"): what the operator's `proxyd admin policy` and the console's
// Account page both call. A list given replaces that list, `none` empties it, a list not given keeps its value;
// one bad item refuses the whole change, naming every bad item.
import { parseRuleList, type RuleItemProblem } from '../../gateway/index.js';
import { SERVICE_RULES_ID, type Store } from '../store/index.js';
import { auditDraft, type AuditContext } from './audit.js';

export type RuleListName = 'deny' | 'allow';

export interface TargetRules {
  deny: string[];
  allow: string[];
}

export type TargetRulesChange = { [K in RuleListName]?: string };

export type SetRulesResult =
  | { ok: true; rules: TargetRules }
  | { ok: false; code: 'invalid_items'; lists: Array<{ list: RuleListName; problems: RuleItemProblem[] }> }
  | { ok: false; code: 'service_allow' };

/** `"exa mple.com": not a domain name; "10.0.0.1/8": host bits set (…)` */
export function describeProblems(problems: readonly RuleItemProblem[]): string {
  return problems.map((p) => `"${p.item}": ${p.problem}`).join('; ');
}

export function getTargetRules(store: Store, accountId: number | 'service'): Promise<TargetRules> {
  return store.targetRules.get(accountId === 'service' ? SERVICE_RULES_ID : accountId);
}

/** Checks every list given, then writes both lists at once (nothing changes when an item is bad). */
export async function setTargetRules(
  store: Store,
  accountId: number | 'service',
  change: TargetRulesChange,
  ctx?: AuditContext,
): Promise<SetRulesResult> {
  // The service's rules are a deny list: an allow list there would refuse every target no account named.
  if (accountId === 'service' && change.allow !== undefined) return { ok: false, code: 'service_allow' };
  const id = accountId === 'service' ? SERVICE_RULES_ID : accountId;
  const next = await store.targetRules.get(id);
  const bad: Array<{ list: RuleListName; problems: RuleItemProblem[] }> = [];
  for (const list of ['deny', 'allow'] as const) {
    const given = change[list];
    if (given === undefined) continue;
    const r = parseRuleList(given);
    if (!r.ok) bad.push({ list, problems: r.problems });
    else next[list] = r.items;
  }
  // Every bad item of both lists is named, not only the first list's.
  if (bad.length > 0) return { ok: false, code: 'invalid_items', lists: bad };
  // The service's rules belong to no account: no account's chain records them (the operator's own log does).
  await store.targetRules.set(
    id,
    next,
    ctx && accountId !== 'service'
      ? auditDraft(ctx, 'rules.changed', null, { deny: next.deny, allow: next.allow })
      : undefined,
  );
  return { ok: true, rules: next };
}
