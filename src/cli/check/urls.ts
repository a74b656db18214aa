// Proxy and target URLs for the check: parsing, validation and password redaction.
import { looksLikeToken } from '../errors.js';
import { formatHostPort } from '../../rules/host-port.js';

type ProxyProtocol = 'http' | 'socks5' | 'socks5h';

export interface ProxySpec {
  protocol: ProxyProtocol;
  host: string; // without IPv6 brackets
  port: number;
  username: string | null;
  password: string | null;
  /** The URL with the password replaced by ****: the only form ever printed. */
  redacted: string;
}

export interface TargetSpec {
  protocol: 'http' | 'https';
  host: string; // without IPv6 brackets
  port: number;
  /** Path and query for the request line. */
  path: string;
  /** Value of the Host header. */
  hostHeader: string;
  href: string;
}

export class CheckUsageError extends Error {}

const DEFAULT_PORTS: Record<ProxyProtocol, number> = { http: 8080, socks5: 1080, socks5h: 1080 };

/** `scheme://user:****@host:port/…` — also for strings that fail to parse as URLs. */
export function redactUrl(text: string): string {
  return text.replace(
    /([a-z][a-z0-9+.-]*:\/\/)([^:@/\s]*):([^@/\s]*)@/gi,
    (_m, scheme: string, user: string) => `${scheme}${user}:****@`,
  );
}

/**
 * One URL as given on the command line, with everything between `scheme://` and its last `@` but the username
 * masked: for a string that does not parse, where a password may hold `/`, `@` or `#` (redactUrl stops at them).
 */
export function redactRawUrl(raw: string): string {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(raw)?.[0] ?? '';
  const rest = raw.slice(scheme.length);
  const at = rest.lastIndexOf('@');
  if (at < 0) return raw;
  const user = rest.slice(0, at).split(':')[0] ?? '';
  return `${scheme}${user}:****@${rest.slice(at + 1)}`;
}

/** Removes a known secret from any text (error messages may echo it decoded). */
export function scrub(text: string, secret: string | null): string {
  let out = redactUrl(text);
  if (secret) {
    out = maskToken(out, secret);
    const enc = encodeURIComponent(secret);
    if (enc !== secret) out = maskToken(out, enc);
  }
  return out;
}

/** Masks `secret` where it stands on its own: inside a word it is a coincidence, and masking it there would
 *  reveal it (a password "ok" turned "no lookup" into "no lo****up"). */
function maskToken(text: string, secret: string): string {
  const escaped = secret.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return text.replace(new RegExp(`(?<![A-Za-z0-9])${escaped}(?![A-Za-z0-9])`, 'g'), '****');
}

function unbracket(hostname: string): string {
  return hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
}

export function parseProxyUrl(raw: string): ProxySpec {
  // As a host it would be printed and sent to DNS (lower-cased, but most of the secret all the same).
  if (looksLikeToken(raw))
    throw new CheckUsageError(
      "an API token was given in --proxy; it was not used (the check needs no API token: give the proxy URL, with a proxy user's name and password)",
    );
  let u: URL;
  try {
    u = new URL(raw.includes('://') ? raw : `http://${raw}`);
  } catch {
    throw new CheckUsageError(`invalid proxy URL: ${redactRawUrl(raw)}`);
  }
  const scheme = u.protocol.replace(/:$/, '').toLowerCase();
  if (scheme !== 'http' && scheme !== 'socks5' && scheme !== 'socks5h') {
    throw new CheckUsageError(`unsupported proxy scheme "${scheme}:": use http://, socks5:// or socks5h://`);
  }
  const protocol = scheme as ProxyProtocol;
  if (!u.hostname) throw new CheckUsageError(`proxy URL has no host: ${redactRawUrl(raw)}`);
  let username: string | null;
  let password: string | null;
  try {
    username = u.username ? decodeURIComponent(u.username) : null;
    password = u.password ? decodeURIComponent(u.password) : null;
  } catch {
    throw new CheckUsageError(
      'proxy URL: the username or password holds a malformed %-escape (write a literal % as %25)',
    );
  }
  if (password !== null && username === null) throw new CheckUsageError('proxy URL has a password but no username');
  if (
    protocol !== 'http' &&
    ((username && Buffer.byteLength(username) > 255) || (password && Buffer.byteLength(password) > 255))
  ) {
    throw new CheckUsageError('SOCKS5 username and password are limited to 255 bytes each (RFC 1929)');
  }
  const host = unbracket(u.hostname);
  const port = u.port ? Number(u.port) : DEFAULT_PORTS[protocol];
  const auth = username !== null ? `${encodeURIComponent(username)}${password !== null ? ':****' : ''}@` : '';
  return { protocol, host, port, username, password, redacted: `${protocol}://${auth}${formatHostPort(host, port)}` };
}

export function parseTargetUrl(raw: string): TargetSpec {
  // As the host it would be printed and sent to DNS. In the path or query it is a request the target may
  // expect (an API behind the proxy): it goes there, and the output and the report show it redacted.
  if (looksLikeToken(raw.replace(/^[a-z][a-z0-9+.-]*:\/\//i, '').replace(/[/?#].*$/s, ''))) {
    throw new CheckUsageError(
      'an API token was given as the target host; it was not used (the check needs no API token)',
    );
  }
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new CheckUsageError(`invalid target URL: ${redactRawUrl(raw)}`);
  }
  const scheme = u.protocol.replace(/:$/, '');
  if (scheme !== 'http' && scheme !== 'https')
    throw new CheckUsageError(`target must be an http:// or https:// URL, not "${scheme}:"`);
  if (u.username || u.password) throw new CheckUsageError('target URL must not carry credentials');
  const host = unbracket(u.hostname);
  const port = u.port ? Number(u.port) : scheme === 'https' ? 443 : 80;
  return { protocol: scheme, host, port, path: `${u.pathname || '/'}${u.search}`, hostHeader: u.host, href: u.href };
}
