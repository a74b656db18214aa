// The account's API token: one active token per account; making a new one disables the old one in the same
// transaction, so the old token is refused at once on every node. Used by `proxyd admin token reset` and
// the console's token card.
import { mintToken } from '../secrets.js';
import type { Store } from '../store/index.js';

/** Mints a token for the account, replacing any active one: the full token (shown once) and its access key. */
export async function resetToken(store: Store, accountId: number): Promise<{ token: string; accessKey: string }> {
  const minted = mintToken();
  await store.tokens.replace(accountId, minted.accessKey, minted.secretHash);
  return { token: minted.token, accessKey: minted.accessKey };
}
