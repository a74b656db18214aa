// The account's API token: one active token per account; making a new one disables the old one in the same
// transaction, so the old token is refused at once on every node. Used by `proxyd admin token reset` and
// the console's token card.
import { mintToken } from '../secrets.js';
import type { Store } from '../store/index.js';
import { auditDraft, type AuditContext } from './audit.js';

/** Mints a token for the account, replacing any active one: the full token (shown once) and its access key. */
export async function resetToken(
  store: Store,
  accountId: number,
  ctx?: AuditContext,
): Promise<{ token: string; accessKey: string }> {
  const minted = mintToken();
  const old = ctx ? await store.tokens.activeToken(accountId) : null;
  await store.tokens.replace(
    accountId,
    minted.accessKey,
    minted.secretHash,
    null,
    ctx && auditDraft(ctx, 'token.reset', minted.accessKey, old ? { replaced: old.access_key } : {}),
  );
  return { token: minted.token, accessKey: minted.accessKey };
}

/** Disables the account's active token; its access key, or null when it had none (nothing recorded). */
export function disableToken(store: Store, accountId: number, ctx?: AuditContext): Promise<string | null> {
  return store.tokens.disable(accountId, ctx && auditDraft(ctx, 'token.disabled'));
}
