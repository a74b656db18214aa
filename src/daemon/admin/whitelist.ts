// `proxyd admin whitelist set-status` (docs/admin.md, "whitelist"): an entry enabled or disabled.
import { isStrictIPv4 } from '../../contract/ipv4.js';
import { auditDraft, operatorContext } from '../services/audit.js';
import { toApiItem } from '../services/whitelist.js';
import { AdminError, requireAccount, type AdminDeps } from './admin-kit.js';

export async function whitelistSetStatus(deps: AdminDeps, o: { email: string; ip: string; status: string }) {
  const a = await requireAccount(deps.store, o.email);
  if (!isStrictIPv4(o.ip)) throw new AdminError(`--ip: not a valid IPv4 address: ${o.ip}`);
  if (o.status !== 'active' && o.status !== 'disabled')
    throw new AdminError(`--status: expected active or disabled, got "${o.status}"`);
  const status = o.status === 'active' ? 1 : 2;
  const e = await deps.store.whitelist.setStatus(
    a.id,
    o.ip,
    status,
    auditDraft(operatorContext(), 'whitelist.status_changed', o.ip, { status: o.status }),
  );
  if (!e) throw new AdminError(`account ${o.email} has no whitelist entry for ${o.ip}`);
  return toApiItem(e);
}
