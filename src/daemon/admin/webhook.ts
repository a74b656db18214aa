// `proxyd admin webhook set|remove` and `proxyd admin webhooks` (docs/admin.md, "webhook"): an account's webhook and
// its deliveries.
import { isoSeconds } from '../../contract/schemas.js';
import { operatorContext } from '../services/audit.js';
import { WebhookError, parseThresholds, removeWebhook, setWebhook } from '../services/webhooks.js';
import { AdminError, requireAccount, type AdminDeps } from './admin-kit.js';

export async function webhookSet(
  deps: AdminDeps,
  o: { email: string; url: string; thresholds: string; allowPrivateWebhooks?: boolean },
) {
  const a = await requireAccount(deps.store, o.email);
  try {
    return await setWebhook(
      deps.store,
      a.id,
      { url: o.url, thresholds: parseThresholds(o.thresholds) },
      { allowPrivate: o.allowPrivateWebhooks === true },
      operatorContext(),
    );
  } catch (e) {
    if (e instanceof WebhookError) throw new AdminError(`--${e.message}`);
    throw e;
  }
}

export async function webhookRemove(deps: AdminDeps, o: { email: string }) {
  const a = await requireAccount(deps.store, o.email);
  return { removed: await removeWebhook(deps.store, a.id, operatorContext()) };
}

export async function webhookDeliveries(deps: AdminDeps, o: { email: string; limit: string }) {
  const a = await requireAccount(deps.store, o.email);
  const limit = Number(o.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000)
    throw new AdminError('--limit: a whole number from 1 to 10000');
  return (await deps.store.webhooks.events(a.id, limit)).map((e) => ({
    id: e.id,
    type: e.type,
    attempts: e.attempts,
    state: e.state,
    last_status: e.lastStatus,
    created_at: isoSeconds(Math.floor(e.createdAtMs / 1000)),
  }));
}
