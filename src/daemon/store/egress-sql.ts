// egress_addresses rows as both backends read them: the state as of `nowSec` (a quarantine that ended reads free).
import { ipv4ToInt } from '../../contract/address-list.js';
import type { EgressAddressRow, EgressState } from './types.js';

export interface EgressRow {
  address: string;
  node: string;
  country: string | null;
  city: string | null;
  account_id: number | null;
  email: string | null;
  assigned_at: number | null;
  quarantine_until: number | null;
  /** The node no longer offers it (held or quarantined when it stopped): never handed to anyone new. */
  withdrawn?: number | boolean;
}

export const EGRESS_COLUMNS =
  'e.address, e.node, e.country, e.city, e.account_id, a.email, e.assigned_at, e.quarantine_until';

export function egressState(r: Pick<EgressRow, 'account_id' | 'quarantine_until'>, nowSec: number): EgressState {
  if (r.account_id !== null) return 'assigned';
  return r.quarantine_until !== null && r.quarantine_until > nowSec ? 'quarantined' : 'free';
}

export function egressRow(r: EgressRow, nowSec: number): EgressAddressRow {
  const state = egressState(r, nowSec);
  return {
    address: r.address,
    node: r.node,
    country: r.country,
    city: r.city,
    accountId: r.account_id === null ? null : Number(r.account_id),
    email: r.email,
    assignedAt: r.assigned_at === null ? null : Number(r.assigned_at),
    state,
    quarantineUntil: state === 'quarantined' ? Number(r.quarantine_until) : null,
  };
}

/** Addresses in numeric order (10.0.0.9 before 10.0.0.10). */
export function byAddress(a: { address: string }, b: { address: string }): number {
  return ipv4ToInt(a.address) - ipv4ToInt(b.address);
}

/** `rows` in address order, each address read once (a fleet's table holds tens of thousands). */
export function sortByAddress<T extends { address: string }>(rows: T[]): T[] {
  const keyed = rows.map((r) => ({ k: ipv4ToInt(r.address), r }));
  keyed.sort((a, b) => a.k - b.k);
  return keyed.map((x) => x.r);
}
