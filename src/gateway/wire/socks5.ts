// Pure SOCKS5 message parsers (RFC 1928 greeting and request, RFC 1929 username/password).
// Each takes the bytes received so far and returns incomplete / a typed error / the message and
// how many bytes it used. Never throws.
import { isIP } from 'node:net';
import { credentialText, isValidHostName } from './http-head.js';
import { INCOMPLETE, fail, type ParseResult } from './parse-result.js';
import { ATYP_DOMAIN, ATYP_IPV4, decodeSocksAddress, encodeSocksAddress } from '../../rules/socks5-address.js';

export const SOCKS_VERSION = 0x05;
export const AUTH_VERSION = 0x01;

export const Method = { NoAuth: 0x00, UserPass: 0x02, NoAcceptable: 0xff } as const;
export const Command = { Connect: 0x01, Bind: 0x02, UdpAssociate: 0x03 } as const;
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
  // A name of no octets is refused as soon as its length is in (before its port).
  if (buf[i] === ATYP_DOMAIN && buf[i + 1] === 0) return fail('bad_domain');
  const a = decodeSocksAddress(buf, i);
  if (a === 'incomplete') return INCOMPLETE;
  if (a === null) return fail('bad_address_type');
  const type = a.family === 4 ? 'ipv4' : a.family === 6 ? 'ipv6' : 'domain';
  return { kind: 'ok', value: { address: { type, host: a.host }, port: a.port }, consumed: a.end };
}

/** A reply: `05 REP 00 ATYP BND.ADDR BND.PORT` (`bound`: an IP literal, its family by its text). */
export function encodeReply(rep: number, bound?: { address: string; port: number }): Buffer {
  if (!bound) return Buffer.from([SOCKS_VERSION, rep, 0, ATYP_IPV4, 0, 0, 0, 0, 0, 0]);
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
