// Dedicated egress addresses (docs/admin.md "ip", docs/api.md "Dedicated addresses"): the rules the admin
// commands, the console and the API share. An address belongs to at most one account; replacing one takes a free
// address of the same node (else the same country), at most N per calendar month, the old one quarantined.
import { isNodeName, parseAddressList } from '../../contract/address-list.js';
import { formatIsoTime, isoSeconds } from '../../contract/schemas.js';
import { usageRange } from './usage.js';
import type { EgressAddressRow, Store } from '../store/index.js';
import { auditDraft, type AuditContext } from './audit.js';
import { DAY_S } from '../../rules/time.js';

export class DedicatedError extends Error {
  override name = 'DedicatedError';
}

/** One line of `proxyd admin ip list`. */
export function adminIpJson(r: EgressAddressRow) {
  return {
    address: r.address,
    node: r.node,
    country: r.country,
    city: r.city,
    account: r.email,
    assigned_at: r.assignedAt === null ? null : isoSeconds(r.assignedAt),
    state: r.state,
    ...(r.state === 'quarantined' && r.quarantineUntil !== null
      ? { quarantine_until: isoSeconds(r.quarantineUntil) }
      : {}),
  };
}

function addressesOf(list: string): string[] {
  const parsed = parseAddressList(list);
  if ('error' in parsed) throw new DedicatedError(`--addresses: ${parsed.error}; nothing changed`);
  return parsed;
}

export function checkNodeName(node: string): void {
  if (!isNodeName(node))
    throw new DedicatedError(
      `--node: "${node}" is not a node name (letters, digits, . _ : -, up to 63); nothing changed`,
    );
}

export async function assignAddresses(
  store: Store,
  accountId: number,
  node: string,
  list: string,
  ctx: AuditContext,
): Promise<EgressAddressRow[]> {
  checkNodeName(node);
  const addresses = addressesOf(list);
  if (!(await store.egress.nodeKnown(node)))
    throw new DedicatedError(
      `--node: no node "${node}" has registered egress addresses (a node registers its --egress-pool, else its local addresses, when it starts); nothing changed`,
    );
  const refused = await store.egress.assign(accountId, node, addresses, auditDraft(ctx, 'ip.assigned', node, {}));
  if (refused) {
    const a = refused.address;
    if (refused.why === 'not_on_node')
      throw new DedicatedError(`--addresses: ${a} is not an egress address of node ${node}; nothing changed`);
    if (refused.why === 'held')
      throw new DedicatedError(`--addresses: ${a} is held by another account; nothing changed`);
    throw new DedicatedError(`--addresses: ${a} is quarantined until ${isoSeconds(refused.until)}; nothing changed`);
  }
  return (await store.egress.list({ accountId })).filter((r) => addresses.includes(r.address));
}

export async function releaseAddresses(
  store: Store,
  list: string,
  quarantineDays: number,
  ctx: AuditContext,
  nowSec: number,
): Promise<{ released: number; addresses: string[] }> {
  const addresses = addressesOf(list);
  const until = quarantineDays > 0 ? nowSec + quarantineDays * DAY_S : null;
  const out = await store.egress.release(addresses, until, (_accountId, held) =>
    auditDraft(ctx, 'ip.released', null, { addresses: held }),
  );
  if (out.unknown.length > 0)
    throw new DedicatedError(`--addresses: ${out.unknown[0]} is not an egress address of any node; nothing changed`);
  return { released: out.released, addresses };
}

/** The calendar month (UTC) of `nowSec` as YYYY-MM, and the seconds left until the next one starts. */
export function monthOf(nowSec: number): { month: string; secondsLeft: number } {
  const d = new Date(nowSec * 1000);
  const next = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) / 1000;
  return { month: d.toISOString().slice(0, 7), secondsLeft: Math.max(1, next - nowSec) };
}

export type CustomerReplace =
  | { ok: true; old: string; new: string }
  | { ok: false; code: 'not_found' }
  | { ok: false; code: 'allowance'; retryAfterSec: number }
  | { ok: false; code: 'no_free' };

export async function replaceAddress(
  store: Store,
  accountId: number,
  address: string,
  o: { maxPerMonth: number; quarantineDays: number; nowSec: number },
  ctx: AuditContext,
): Promise<CustomerReplace> {
  const { month, secondsLeft } = monthOf(o.nowSec);
  const r = await store.egress.replace(
    accountId,
    address,
    { month, max: o.maxPerMonth, quarantineUntil: o.nowSec + o.quarantineDays * DAY_S },
    (swap) => auditDraft(ctx, 'ip.replaced', swap.old, { old: swap.old, new: swap.new }),
  );
  if (r.ok) return r;
  if (r.why === 'not_yours') return { ok: false, code: 'not_found' };
  if (r.why === 'allowance') return { ok: false, code: 'allowance', retryAfterSec: secondsLeft };
  return { ok: false, code: 'no_free' };
}

/** A customer's addresses as the console and `GET /openapi/v1/proxy/ips` show them. */
export interface CustomerIp {
  address: string;
  country: string | null;
  city: string | null;
  since: string;
  bytes_up: number;
  bytes_down: number;
}

/** The account's addresses with their bytes in the usage summary's default period (the plan's, else this calendar month). */
export async function customerIps(
  store: Store,
  accountId: number,
  nowMs: number,
): Promise<{ period_start: string; items: CustomerIp[] }> {
  const { from, to } = await usageRange(store, accountId, {}, nowMs);
  const [rows, used] = await Promise.all([
    store.egress.list({ accountId }),
    store.egress.usageByAddress(accountId, from, to),
  ]);
  const items = rows
    .filter((r) => r.state === 'assigned')
    .map((r) => {
      const u = used.find((x) => x.address === r.address);
      return {
        address: r.address,
        country: r.country,
        city: r.city,
        since: isoSeconds(r.assignedAt ?? 0),
        bytes_up: u?.bytesUp ?? 0,
        bytes_down: u?.bytesDown ?? 0,
      };
    });
  return { period_start: formatIsoTime(from), items };
}
