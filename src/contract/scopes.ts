// API keys (docs/api.md, "Authentication"): the key's shape, its scopes, and the rules of its fields, shared by
// proxyd (the key check, the console, `proxyd admin key`) and proxyctl (`key set`).
import ipaddr from 'ipaddr.js';
import { KEY_PREFIX } from './key-prefix.js';

export const SCOPES = ['usage:read', 'users:read', 'users:write', 'rules:read', 'rules:write', 'audit:read'] as const;
export type Scope = (typeof SCOPES)[number];

export const isScope = (s: string): s is Scope => (SCOPES as readonly string[]).includes(s);

/** Every key starts with this. */
export { KEY_PREFIX };
/** The whole key: `pxk_` + public id + `_` + secret (at least 128 random bits, base62 or base64url). */
export const KEY_PATTERN = /^pxk_[A-Za-z0-9]+_[A-Za-z0-9_-]{22,}$/;
// Capped lengths: a presented value is never worth more work than a real key's (ids are 16, secrets 43 characters).
const KEY_PARTS = /^pxk_([A-Za-z0-9]{1,32})_([A-Za-z0-9_-]{22,128})$/;

/** The most keys an account holds (revoked and expired ones not counted). */
export const MAX_KEYS_PER_ACCOUNT = 20;
export const MAX_KEY_NAME = 64;
/** The most `allowed_ips` entries of one key. */
export const MAX_ALLOWED_IPS = 100;

export interface ParsedApiKey {
  /** The public id: what logs, audit records and lists name the key by. */
  id: string;
  secret: string;
}

/** A key as presented, split into its public id and secret; null when it is not a key's shape. */
export function parseApiKey(raw: string): ParsedApiKey | null {
  if (typeof raw !== 'string' || raw.length > 200) return null;
  const m = KEY_PARTS.exec(raw);
  return m ? { id: m[1]!, secret: m[2]! } : null;
}

/** The part of a key that may be shown: `pxk_<id>_****`, or a fixed placeholder. */
export function redactApiKey(raw: string): string {
  const p = parseApiKey(raw.trim());
  return p ? `${KEY_PREFIX}${p.id}_****` : '****';
}

/** A field refused, with the words that say why (the edge names the field: 10400, or an admin error). */
export class KeyFieldError extends Error {
  constructor(
    readonly field: 'name' | 'scopes' | 'expires_at' | 'allowed_ips',
    detail: string,
  ) {
    super(`${field}: ${detail}`);
    this.name = 'KeyFieldError';
  }
}

/** 1–64 printable characters (code points), no control characters, not blank. */
export function checkKeyName(name: unknown): string {
  if (typeof name !== 'string') throw new KeyFieldError('name', 'expected a string');
  const n = [...name].length;
  if (n < 1 || n > MAX_KEY_NAME) throw new KeyFieldError('name', `expected 1 to ${MAX_KEY_NAME} characters, got ${n}`);
  // Control characters, line breaks and the bidirectional controls (which reorder what a page shows around them);
  // other format characters stay (an emoji's zero-width joiner is printable text).
  if (/[\p{Cc}\p{Zl}\p{Zp}\u202a-\u202e\u2066-\u2069]/u.test(name))
    throw new KeyFieldError('name', 'control characters are not allowed');
  if (name.trim() === '') throw new KeyFieldError('name', 'must not be blank');
  return name;
}

/** A non-empty list of known scopes (`usage:read,users:write` or an array), in the canonical order, without repeats. */
export function parseScopes(input: string | readonly unknown[]): Scope[] {
  const items =
    typeof input === 'string'
      ? input
          .split(',')
          .map((s) => s.trim())
          .filter((s) => s !== '')
      : [...input];
  if (items.length === 0) throw new KeyFieldError('scopes', `expected at least one of ${SCOPES.join(', ')}`);
  const set = new Set<Scope>();
  for (const s of items) {
    if (typeof s !== 'string' || !isScope(s))
      throw new KeyFieldError(
        'scopes',
        `unknown scope ${JSON.stringify(String(s).slice(0, 40))} (known: ${SCOPES.join(', ')})`,
      );
    set.add(s);
  }
  return SCOPES.filter((s) => set.has(s));
}

/** One allowed source: an address or a CIDR (IPv4 or IPv6), canonical (`10.0.0.0/8`, `2001:db8::/32`); null when neither. */
function canonicalSource(s: string): string | null {
  try {
    if (s.includes('/')) {
      // Strict: the address part must be a whole, normal address and the prefix in range.
      const [addr, bits] = s.split('/') as [string, string];
      if (
        !/^\d{1,3}$/.test(bits) ||
        !(ipaddr.IPv4.isValidFourPartDecimal(addr) || (addr.includes(':') && ipaddr.IPv6.isValid(addr)))
      )
        return null;
      const [a, len] = ipaddr.parseCIDR(s);
      const first = a.kind() === 'ipv4' ? ipaddr.IPv4.networkAddressFromCIDR(s) : ipaddr.IPv6.networkAddressFromCIDR(s);
      return `${first.toString()}/${len}`;
    }
    if (ipaddr.IPv4.isValidFourPartDecimal(s)) return ipaddr.IPv4.parse(s).toString();
    if (s.includes(':') && ipaddr.IPv6.isValid(s)) {
      const a = ipaddr.IPv6.parse(s);
      return a.isIPv4MappedAddress()
        ? a.toIPv4Address().toString()
        : a.toNormalizedString() === '0:0:0:0:0:0:0:0'
          ? '::'
          : a.toString();
    }
  } catch {
    return null;
  }
  return null;
}

/** `allowed_ips` (`a,b/24` or an array): canonical entries, no repeats; empty means "from anywhere". */
export function parseAllowedIps(input: string | readonly unknown[]): string[] {
  const items =
    typeof input === 'string'
      ? input
          .split(',')
          .map((s) => s.trim())
          .filter((s) => s !== '')
      : [...input];
  if (items.length > MAX_ALLOWED_IPS) throw new KeyFieldError('allowed_ips', `at most ${MAX_ALLOWED_IPS} entries`);
  const out: string[] = [];
  for (const item of items) {
    const c = typeof item === 'string' ? canonicalSource(item.trim()) : null;
    if (c === null)
      throw new KeyFieldError(
        'allowed_ips',
        `${JSON.stringify(String(item).slice(0, 60))} is not an IP address or CIDR`,
      );
    if (!out.includes(c)) out.push(c);
  }
  return out;
}

/** Whether a request from `ip` may use a key limited to `allowed` (an empty list: from anywhere). */
export function sourceAllowed(ip: string, allowed: readonly string[]): boolean {
  if (allowed.length === 0) return true;
  let addr: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    addr = ipaddr.process(ip);
  } catch {
    return false;
  }
  for (const entry of allowed) {
    try {
      if (entry.includes('/')) {
        const [net, len] = ipaddr.parseCIDR(entry);
        if (net.kind() === addr.kind() && addr.match([net, len] as never)) return true;
      } else if (ipaddr.process(entry).toString() === addr.toString()) return true;
    } catch {
      /* a stored entry that no longer parses matches nothing */
    }
  }
  return false;
}
