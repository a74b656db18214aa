// The shape of an API key (`pxk_<id>_<secret>`, docs/cli.md "API keys") as proxyctl needs it: which credential goes
// where, and the part of a key that may be shown (its public id). The rule itself is the contract's (scopes.ts),
// loaded only by the commands that read a key (main's error printer loads this file: no ipaddr.js for `--help`).

import { KEY_PREFIX } from '../contract/key-prefix.js';

/** Meant as an API key (rather than an account token): it starts with `pxk_`. Decides Bearer vs api_key. */
export function isApiKeyShaped(s: string): boolean {
  return s.startsWith(KEY_PREFIX);
}

/** Anything shaped like an API key in free text: its id stays, the secret goes. */
export const API_KEY_SHAPE = /\bpxk_([A-Za-z0-9]+)_[A-Za-z0-9_-]{8,}/g;
