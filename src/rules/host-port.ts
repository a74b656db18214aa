// HOST:PORT as flags, the exit registry and the daemon's ready line write it: a DNS name or an IPv4 address, or
// an IPv6 address in brackets (`[::1]:8080`). Port 0 is allowed (a listener's "pick a free one").
// `formatHostPort` is the one writer of a host and port as text everywhere: the daemon's flags and ready line, the
// gateway's log targets, proxyctl check's lines. An HTTP request's authority (a default port, RFC 3986 names) is
// read by the gateway's own grammar, src/gateway/wire/http-head.ts `parseAuthority`.
import { isIP } from 'node:net';

export interface HostPort {
  host: string;
  port: number;
}

/** Its host and port, or null: not HOST:PORT, a port past 65535, or a host that is neither an IP nor a name. */
export function splitHostPort(s: string): HostPort | null {
  const m = /^\[([^\]]+)\]:(\d{1,5})$/.exec(s) ?? /^([^:]+):(\d{1,5})$/.exec(s);
  if (!m) return null;
  const port = Number(m[2]);
  if (port > 65535 || !(isIP(m[1]!) || /^[A-Za-z0-9.-]+$/.test(m[1]!))) return null;
  return { host: m[1]!, port };
}

/** A host as it stands before `:port` (and in a URL): an IPv6 address in brackets. */
export function bracketHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/** The text `splitHostPort` reads back: an IPv6 host in brackets. */
export function formatHostPort(host: string, port: number): string {
  return `${bracketHost(host)}:${port}`;
}
