// The shape of an API key (`pxk_<id>_<secret>`, docs/cli.md "API keys"): which credential goes where, and the part
// of a key that may be shown (its public id).

const KEY_RE = /^pxk_([A-Za-z0-9]+)_([A-Za-z0-9_-]{22,})$/;

/** Meant as an API key (rather than an account token): it starts with `pxk_`. Decides Bearer vs api_key. */
export function isApiKeyShaped(s: string): boolean {
  return s.startsWith('pxk_');
}

/** The key's public id, or null when it is not a well-formed key. */
export function apiKeyId(raw: string): string | null {
  const m = KEY_RE.exec(raw);
  return m ? m[1]! : null;
}

/** Anything shaped like an API key in free text: its id stays, the secret goes. */
export const API_KEY_SHAPE = /\bpxk_([A-Za-z0-9]+)_[A-Za-z0-9_-]{8,}/g;
