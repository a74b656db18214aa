// `proxyd admin policy set|show` (docs/admin.md, "policy"): an account's target rules, or the service's (--global).
import type { Store } from '../store/index.js';
import { operatorContext } from '../services/audit.js';
import { describeProblems, getTargetRules, setTargetRules, type TargetRules } from '../services/target-rules.js';
import { AdminError, AdminUsageError, requireAccount } from './admin-kit.js';

export interface PolicyOptions {
  email?: string;
  global?: boolean;
  deny?: string;
  allow?: string;
}

async function scopeOf(store: Store, o: PolicyOptions): Promise<{ id: number | 'service'; email: string | null }> {
  if (o.global && o.email) throw new AdminUsageError('give --email or --global, not both');
  if (o.global) return { id: 'service', email: null };
  if (!o.email) throw new AdminUsageError("give --email E (an account's rules) or --global (the service's)");
  const a = await requireAccount(store, o.email);
  return { id: a.id, email: a.email };
}

function rulesJson(scope: { id: number | 'service'; email: string | null }, r: TargetRules) {
  return scope.id === 'service'
    ? { scope: 'service', deny: r.deny }
    : { scope: 'account', email: scope.email, deny: r.deny, allow: r.allow };
}

export async function policySet(store: Store, o: PolicyOptions) {
  const scope = await scopeOf(store, o);
  if (o.deny === undefined && o.allow === undefined)
    throw new AdminUsageError('nothing to set: give --deny LIST and/or --allow LIST (none empties a list)');
  const r = await setTargetRules(store, scope.id, { deny: o.deny, allow: o.allow }, operatorContext());
  if (!r.ok) {
    if (r.code === 'service_allow')
      throw new AdminError("--allow: the service's rules are a deny list only (an allow list is per account)");
    throw new AdminError(
      `${r.lists.map((l) => `--${l.list}: ${describeProblems(l.problems)}`).join('; ')}; nothing changed`,
    );
  }
  return rulesJson(scope, r.rules);
}

export async function policyShow(store: Store, o: PolicyOptions) {
  const scope = await scopeOf(store, o);
  return rulesJson(scope, await getTargetRules(store, scope.id));
}
