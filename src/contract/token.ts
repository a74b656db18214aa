// API token format `<accessKey>.<secret>`: access key "ak" + 20 hex digits, secret 32 random bytes base64url.

/** What a minted token is made of: "ak" + ACCESS_KEY_BYTES random bytes in hex, "." + SECRET_BYTES random bytes base64url. */
export const ACCESS_KEY_PREFIX = 'ak';
export const ACCESS_KEY_BYTES = 10;
export const SECRET_BYTES = 32;

/** A token's shape as a regular expression's source: group 1 the access key, group 2 the secret. */
export const TOKEN_SOURCE = '(ak[0-9a-f]{20})\\.([A-Za-z0-9_-]{43})';
const TOKEN_RE = new RegExp(`^${TOKEN_SOURCE}$`);

export interface ParsedToken {
  accessKey: string;
  secret: string;
}

export function parseToken(raw: string): ParsedToken | null {
  if (typeof raw !== 'string' || raw.length !== 66) return null;
  const m = TOKEN_RE.exec(raw);
  if (!m) return null;
  return { accessKey: m[1]!, secret: m[2]! };
}

export function formatToken(t: ParsedToken): string {
  return `${t.accessKey}.${t.secret}`;
}

/** The part of a token that may be shown: the access key, or a fixed placeholder. */
export function redactToken(raw: string): string {
  const p = parseToken(raw.trim());
  return p ? `${p.accessKey}.****` : '****';
}
