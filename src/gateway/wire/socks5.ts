// Pure SOCKS5 message parsers (RFC 1928 greeting and request, RFC 1929 username/password).
// Each takes the bytes received so far and returns incomplete / a typed error / the message and
// how many bytes it used. Never throws.
import { isIP } from 'node:net';
import { credentialText, isValidHostName } from './http-head.js';
import { INCOMPLETE, fail, type ParseResult } from './parse-result.js';
import { encodeSocksAddress, socksNameText } from '../../rules/socks5-address.js';

export const SOCKS_VERSION = 0x05;
export const AUTH_VERSION = 0x01;

export const Method = { NoAuth: 0x00, UserPass: 0x02, NoAcceptable: 0xff } as const;
export const Command = { Connect: 0x01, Bind: 0x02, UdpAssociate: 0x03 } as const;
export const AddressType = { IPv4: 0x01, Domain: 0x03, IPv6: 0x04 } as const;
export const Reply = {
  Succeeded: 0x00,
  GeneralFailure: 0x01,
  NotAllowed: 0x02,
  NetworkUnreachable: 0x03,
  HostUnreachable: 0x04,
  ConnectionRefused: 0x05,
  TtlExpired: 0x06,
  CommandNotSupported: 0x07,
  AddressTypeNotSupported: 0x08,
} as const;

export type GreetingError = 'bad_version' | 'no_methods';
export type AuthError = 'bad_auth_version' | 'empty_username';
export type RequestError = 'bad_version' | 'bad_reserved' | 'bad_address_type' | 'bad_domain';

export interface Greeting {
  methods: number[];
}

export function parseGreeting(buf: Uint8Array): ParseResult<Greeting, GreetingError> {
  if (buf.length < 1) return INCOMPLETE;
  if (buf[0] !== SOCKS_VERSION) return fail('bad_version');
  if (buf.length < 2) return INCOMPLETE;
  const n = buf[1] as number;
  if (n === 0) return fail('no_methods');
  if (buf.length < 2 + n) return INCOMPLETE;
  return { kind: 'ok', value: { methods: Array.from(buf.subarray(2, 2 + n)) }, consumed: 2 + n };
}

export interface UserPass {
  username: string;
  password: string;
}

export function parseUserPass(buf: Uint8Array): ParseResult<UserPass, AuthError> {
  if (buf.length < 1) return INCOMPLETE;
  if (buf[0] !== AUTH_VERSION) return fail('bad_auth_version');
  if (buf.length < 2) return INCOMPLETE;
  const ulen = buf[1] as number;
  if (ulen === 0) return fail('empty_username');
  if (buf.length < 3 + ulen) return INCOMPLETE;
  const plen = buf[2 + ulen] as number;
  const total = 3 + ulen + plen;
  if (buf.length < total) return INCOMPLETE;
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  return {
    kind: 'ok',
    value: { username: credentialText(b, 2, 2 + ulen), password: credentialText(b, 3 + ulen, total) },
    consumed: total,
  };
}

export type SocksAddress =
  { type: 'ipv4'; host: string } | { type: 'ipv6'; host: string } | { type: 'domain'; host: string };

/**
 * A name target that is neither a host name (as a CONNECT's must be) nor an IP literal sent as a name (`::1`: it is
 * then that address, and target rules match it so). Never looked up: the resolver maps other text to ASCII (a soft
 * hyphen vanishes), so the target rules would judge one name and DNS answer for another.
 */
export function isBadNameTarget(a: SocksAddress): boolean {
  return a.type === 'domain' && !isValidHostName(a.host) && isIP(a.host) === 0;
}

export interface SocksRequest {
  command: number;
  address: SocksAddress;
  port: number;
}

/**
 * RFC 5952 text of 16 address bytes: the longest run of two or more zero groups (the first of equals) as `::`,
 * as the gateway's canonical IPv6 text elsewhere (the usage's domain rows), never eight groups of zeros.
 */
export function ipv6Text(b: Uint8Array): string {
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((b[i] as number) << 8) | (b[i + 1] as number));
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (from: number, to: number) =>
    groups
      .slice(from, to)
      .map((g) => g.toString(16))
      .join(':');
  if (best < 0) return hex(0, 8);
  // IPv4-mapped (::ffff:a.b.c.d) in its dotted form, as RFC 5952 section 5 recommends.
  if (best === 0 && bestLen === 5 && groups[5] === 0xffff) return `::ffff:${b[12]}.${b[13]}.${b[14]}.${b[15]}`;
  return `${hex(0, best)}::${hex(best + bestLen, 8)}`;
}

/**
 * The CONNECT/BIND/UDP ASSOCIATE request. An unknown command is still parsed (so the caller can
 * answer 0x07); an unknown address type cannot be framed and is an error (answer 0x08).
 * The command is not checked here: any value is returned for the caller to answer 0x07.
 */
export function parseRequest(buf: Uint8Array): ParseResult<SocksRequest, RequestError> {
  if (buf.length < 1) return INCOMPLETE;
  if (buf[0] !== SOCKS_VERSION) return fail('bad_version');
  if (buf.length < 4) {
    if (buf.length >= 3 && buf[2] !== 0x00) return fail('bad_reserved');
    return INCOMPLETE;
  }
  if (buf[2] !== 0x00) return fail('bad_reserved');
  const command = buf[1] as number;
  const at = addressAt(buf, 3);
  if (at.kind !== 'ok') return at;
  return { kind: 'ok', value: { command, address: at.value.address, port: at.value.port }, consumed: at.consumed };
}

/** ATYP, the address and the port, from `i` on: what a request and a UDP datagram's header share. */
function addressAt(
  buf: Uint8Array,
  i: number,
): ParseResult<{ address: SocksAddress; port: number }, 'bad_address_type' | 'bad_domain'> {
  if (buf.length < i + 1) return INCOMPLETE;
  const atyp = buf[i] as number;
  let address: SocksAddress;
  let end: number;
  if (atyp === AddressType.IPv4) {
    end = i + 1 + 4;
    if (buf.length < end + 2) return INCOMPLETE;
    // Dotted quad without an array per request.
    address = { type: 'ipv4', host: `${buf[i + 1]}.${buf[i + 2]}.${buf[i + 3]}.${buf[i + 4]}` };
  } else if (atyp === AddressType.IPv6) {
    end = i + 1 + 16;
    if (buf.length < end + 2) return INCOMPLETE;
    address = { type: 'ipv6', host: ipv6Text(buf.subarray(i + 1, end)) };
  } else if (atyp === AddressType.Domain) {
    if (buf.length < i + 2) return INCOMPLETE;
    const len = buf[i + 1] as number;
    if (len === 0) return fail('bad_domain');
    end = i + 2 + len;
    if (buf.length < end + 2) return INCOMPLETE;
    address = { type: 'domain', host: socksNameText(buf.subarray(i + 2, end)) };
  } else {
    return fail('bad_address_type');
  }
  const port = ((buf[end] as number) << 8) | (buf[end + 1] as number);
  return { kind: 'ok', value: { address, port }, consumed: end + 2 };
}

/** A reply: `05 REP 00 ATYP BND.ADDR BND.PORT` (`bound`: an IP literal, its family by its text). */
export function encodeReply(rep: number, bound?: { address: string; port: number }): Buffer {
  if (!bound) return Buffer.from([SOCKS_VERSION, rep, 0, AddressType.IPv4, 0, 0, 0, 0, 0, 0]);
  return Buffer.concat([Buffer.from([SOCKS_VERSION, rep, 0]), encodeSocksAddress(bound.address, bound.port)!]);
}

/** An RFC 1928 UDP datagram: the header's fragment number and target, and where its DATA starts. */
export interface UdpDatagram {
  frag: number;
  address: SocksAddress;
  port: number;
  /** Offset of DATA in the datagram. */
  dataAt: number;
}

export type UdpError = 'bad_reserved' | 'bad_address_type' | 'bad_domain' | 'truncated';

/** Parses the header of one datagram (it is whole: UDP keeps message boundaries). */
export function parseUdpDatagram(buf: Uint8Array): ParseResult<UdpDatagram, UdpError> {
  if (buf.length < 4) return fail('truncated');
  if (buf[0] !== 0 || buf[1] !== 0) return fail('bad_reserved');
  const at = addressAt(buf, 3);
  if (at.kind === 'incomplete') return fail('truncated');
  if (at.kind === 'error') return fail(at.error);
  return {
    kind: 'ok',
    value: { frag: buf[2]!, address: at.value.address, port: at.value.port, dataAt: at.consumed },
    consumed: buf.length,
  };
}

/** The header an answer from `address:port` (an IP literal) goes back to the client with (FRAG 0). */
export function encodeUdpHeader(address: string, port: number): Buffer {
  return Buffer.concat([Buffer.from([0, 0, 0]), encodeSocksAddress(address, port)!]);
}
