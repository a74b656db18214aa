// `proxyd admin ip assign|release|list` (docs/admin.md, "ip"): dedicated egress addresses.
import type { Store } from '../store/index.js';
import { operatorContext } from '../services/audit.js';
import {
  adminIpJson,
  assignAddresses,
  checkNodeName,
  DedicatedError,
  releaseAddresses,
} from '../services/dedicated.js';
import { AdminError, AdminUsageError, requireAccount } from './admin-kit.js';

async function orAdminError<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (e) {
    if (e instanceof DedicatedError) throw new AdminError(e.message);
    throw e;
  }
}

export async function ipAssign(store: Store, o: { email: string; node: string; addresses: string }) {
  const id = (await requireAccount(store, o.email)).id;
  const rows = await orAdminError(() => assignAddresses(store, id, o.node, o.addresses, operatorContext()));
  return { account: o.email, node: o.node, addresses: rows.map((r) => r.address) };
}

export async function ipRelease(store: Store, o: { addresses: string; quarantine?: string }) {
  const text = o.quarantine ?? '0';
  if (!/^\d{1,4}$/.test(text)) throw new AdminUsageError(`--quarantine: days, 0 to 9999 (got "${text}")`);
  const out = await orAdminError(() =>
    releaseAddresses(store, o.addresses, Number(text), operatorContext(), Math.floor(Date.now() / 1000)),
  );
  return { released: out.released, addresses: out.addresses, quarantine_days: Number(text) };
}

/** JSON lines, one per address. */
export async function ipList(
  store: Store,
  o: { email?: string; node?: string },
  write: (line: string) => void,
): Promise<void> {
  if (o.node !== undefined) {
    await orAdminError(async () => checkNodeName(o.node!));
    // A mistyped node is named, as for assign, not answered with an empty list that reads "this node has none".
    if (!(await store.egress.nodeKnown(o.node)))
      throw new AdminError(
        `--node: no node "${o.node}" has registered egress addresses (a node registers its --egress-pool, else its local addresses, when it starts)`,
      );
  }
  const id = o.email === undefined ? undefined : (await requireAccount(store, o.email)).id;
  for (const r of await store.egress.list({ accountId: id, node: o.node })) write(JSON.stringify(adminIpJson(r)));
}
