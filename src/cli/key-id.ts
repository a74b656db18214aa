// An API key's public id, by the contract's rule (contract/scopes.ts): what proxyctl shows of a key.
import { parseApiKey } from '../contract/scopes.js';

/** The key's public id, or null when it is not a well-formed key. */
export function apiKeyId(raw: string): string | null {
  return parseApiKey(raw)?.id ?? null;
}
