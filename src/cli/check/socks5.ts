// SOCKS5 wire format (RFC 1928 / RFC 1929), client side: what the auth and connect stages send and parse.
import { formatHostPort } from '../../rules/host-port.js';
import {
  ATYP_DOMAIN,
  ATYP_IPV4,
  ATYP_IPV6,
  decodeSocksAddress,
  encodeSocksAddress,
} from '../../rules/socks5-address.js';

export const SOCKS_VERSION = 0x05;
export const METHOD_NO_AUTH = 0x00;
export const METHOD_USER_PASS = 0x02;
export const METHOD_NONE_ACCEPTABLE = 0xff;

/** RFC 1928 section 6 reply codes. */
const SOCKS_REPLY_NAMES: Record<number, string> = {
  0x00: 'succeeded',
  0x01: 'general SOCKS server failure',
  0x02: 'connection not allowed by ruleset',
  0x03: 'network unreachable',
  0x04: 'host unreachable',
  0x05: 'connection refused',
  0x06: 'TTL expired (the proxy timed out reaching the target)',
  0x07: 'command not supported',
  0x08: 'address type not supported',
};

export function hex(n: number): string {
  return `0x${n.toString(16).padStart(2, '0')}`;
}

export function socksReplyName(code: number): string {
  return SOCKS_REPLY_NAMES[code] ?? 'unassigned reply code';
}

/** Method selection: offer exactly what the customer's URL implies, so the check tests that path. */
export function greeting(withCredentials: boolean): Buffer {
  return Buffer.from([SOCKS_VERSION, 1, withCredentials ? METHOD_USER_PASS : METHOD_NO_AUTH]);
}

/** RFC 1929 username/password request. */
export function userPassRequest(username: string, password: string): Buffer {
  const u = Buffer.from(username, 'utf8');
  const p = Buffer.from(password, 'utf8');
  return Buffer.concat([Buffer.from([0x01, u.length]), u, Buffer.from([p.length]), p]);
}

/** CONNECT request; a host name is sent as a domain (socks5h), an IP literal as IPv4/IPv6. */
export function connectRequest(host: string, port: number): Buffer {
  const addr = encodeSocksAddress(host, port);
  if (addr === null) throw new Error('target host name longer than 255 bytes');
  return Buffer.concat([Buffer.from([SOCKS_VERSION, 0x01, 0x00]), addr]);
}

/** Bytes after the 4-byte reply header that hold the bound address and port. */
export function boundAddressLength(atyp: number, firstAddrByte: number | undefined): number | null {
  if (atyp === ATYP_IPV4) return 4 + 2;
  if (atyp === ATYP_IPV6) return 16 + 2;
  if (atyp === ATYP_DOMAIN) return firstAddrByte === undefined ? null : 1 + firstAddrByte + 2;
  return null;
}

/** The bound address and port (`bytes`: what follows ATYP), an IPv6 address in RFC 5952 text (`[::1]:1080`). */
export function formatBound(atyp: number, bytes: Buffer): string {
  const a = decodeSocksAddress(Buffer.concat([Buffer.from([atyp]), bytes]), 0);
  if (a === null || a === 'incomplete') throw new Error('bad SOCKS5 bound address');
  return formatHostPort(a.host, a.port);
}
