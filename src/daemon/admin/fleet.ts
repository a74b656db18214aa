// `proxyd admin fleet rotate-secret | rotate-cert --node NAME`: the hop's credentials, changed without a cut
// tunnel (docs/admin.md). Both go through the fleet database, where every node reads them each second.
import { randomBytes } from 'node:crypto';
import { EXIT_STALE_MS } from '../../gateway/index.js';
import type { Store } from '../store/types.js';
import { AdminError } from './admin-kit.js';

function fleetOf(store: Store): NonNullable<Store['exits']> {
  if (!store.exits) throw new AdminError('the hop needs a fleet database: give --database-url postgres://…');
  return store.exits;
}

/** A new fleet secret; exits accept the replaced one for their --hop-grace. */
export async function rotateSecret(store: Store): Promise<{ rotated: true }> {
  await fleetOf(store).rotateHopSecret(randomBytes(32).toString('hex'));
  return { rotated: true };
}

/**
 * Asks a live exit for a new certificate and waits until it serves it and its row names it alone (a few
 * seconds: entries first learn the new fingerprint beside the old one, so no new tunnel fails).
 */
export async function rotateCert(
  store: Store,
  node: string,
  timeoutMs = 30_000,
): Promise<{ node: string; fingerprint: string; previous: string }> {
  const exits = fleetOf(store);
  const before = (await exits.list(EXIT_STALE_MS)).find((r) => r.node === node);
  if (!before || !(await exits.requestCertRotation(node, EXIT_STALE_MS))) {
    throw new AdminError(`no live exit named ${node} (proxyd admin exits lists them)`);
  }
  const old = before.fingerprints[0] ?? '';
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 250));
    const row = (await exits.list(EXIT_STALE_MS)).find((r) => r.node === node);
    if (!row) throw new AdminError(`exit ${node} stopped heartbeating during the rotation`);
    if (row.fingerprints.length === 1 && row.fingerprints[0] !== old)
      return { node, fingerprint: row.fingerprints[0]!, previous: old };
  }
  throw new AdminError(
    `exit ${node} did not register a new certificate within ${timeoutMs / 1000} s (is it running this version?)`,
  );
}
