// Pure PROXY protocol v1/v2 parser (haproxy proxy-protocol.txt). `none` means the bytes cannot
// start a PROXY header, so the connection's own protocol begins at byte 0. Never throws.
import { isStrictIPv4 } from '../../rules/ipv4-syntax.js';
import ipaddr from 'ipaddr.js';
import { INCOMPLETE, fail, type ParseResult } from './parse-result.js';

export type ProxyHeaderError = 'bad_v1' | 'bad_v2' | 'too_large';

export interface ProxyHeader {
  version: 1 | 2;
  /** The original client's address; null for v1 UNKNOWN, v2 LOCAL, or a non-IP family. */
  source: { address: string; port: number; family: 4 | 6 } | null;
}

export type ProxyHeaderResult = { kind: 'none' } | ParseResult<ProxyHeader, ProxyHeaderError>;

const V1_PREFIX = Buffer.from('PROXY ', 'latin1');
const V2_SIG = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
const V1_MAX = 107; // including CRLF
export const V2_MAX_LENGTH = 4096; // address block + TLVs we are willing to read

function prefixMatches(buf: Uint8Array, sig: Buffer): boolean {
  const n = Math.min(buf.length, sig.length);
  for (let i = 0; i < n; i++) if (buf[i] !== sig[i]) return false;
  return true;
}

/** Could these bytes be (the start of) a PROXY header? */
export function detectProxyHeader(buf: Uint8Array): 'none' | 'maybe' | 'v1' | 'v2' {
  if (buf.length === 0) return 'maybe';
  if (prefixMatches(buf, V1_PREFIX)) return buf.length >= V1_PREFIX.length ? 'v1' : 'maybe';
  if (prefixMatches(buf, V2_SIG)) return buf.length >= V2_SIG.length ? 'v2' : 'maybe';
  return 'none';
}

const V1_PORT = /^(?:0|[1-9][0-9]{0,4})$/;

function v1Port(s: string): number | null {
  if (!V1_PORT.test(s)) return null;
  const n = Number(s);
  return n <= 65535 ? n : null;
}

function parseV1(buf: Uint8Array): ParseResult<ProxyHeader, ProxyHeaderError> {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const cr = b.indexOf('\r\n', 0, 'latin1');
  if (cr < 0) {
    if (b.length >= V1_MAX) return fail('bad_v1');
    if (b.indexOf(0x0a) >= 0) return fail('bad_v1');
    return INCOMPLETE;
  }
  if (cr + 2 > V1_MAX) return fail('bad_v1');
  // A bare LF before the CRLF is refused, as it is while the CRLF is still to come (same verdict however the bytes are split).
  if (b.indexOf(0x0a) < cr) return fail('bad_v1');
  const line = b.toString('latin1', 0, cr);
  const parts = line.split(' ');
  const consumed = cr + 2;
  if (parts[1] === 'UNKNOWN') {
    // "PROXY UNKNOWN" optionally followed by anything up to CRLF: the receiver ignores it.
    return { kind: 'ok', value: { version: 1, source: null }, consumed };
  }
  if (parts.length !== 6) return fail('bad_v1');
  const [, proto, src, dst, sport, dport] = parts as [string, string, string, string, string, string];
  const srcPort = v1Port(sport);
  if (srcPort === null || v1Port(dport) === null) return fail('bad_v1');
  if (proto === 'TCP4') {
    // Strict dotted decimal, as everywhere in proxyd.
    if (!isStrictIPv4(src) || !isStrictIPv4(dst)) return fail('bad_v1');
    return { kind: 'ok', value: { version: 1, source: { address: src, port: srcPort, family: 4 } }, consumed };
  }
  if (proto === 'TCP6') {
    if (!isIPv6Text(src) || !isIPv6Text(dst)) return fail('bad_v1');
    return {
      kind: 'ok',
      value: { version: 1, source: { address: ipaddr.IPv6.parse(src).toString(), port: srcPort, family: 6 } },
      consumed,
    };
  }
  return fail('bad_v1');
}

function isIPv6Text(s: string): boolean {
  return /^[0-9A-Fa-f:.]+$/.test(s) && s.includes(':') && ipaddr.IPv6.isValid(s);
}

function parseV2(buf: Uint8Array): ParseResult<ProxyHeader, ProxyHeaderError> {
  if (buf.length < 16) return INCOMPLETE;
  const verCmd = buf[12] as number;
  if (verCmd >> 4 !== 2) return fail('bad_v2');
  const cmd = verCmd & 0x0f;
  if (cmd > 1) return fail('bad_v2');
  const famProto = buf[13] as number;
  const len = ((buf[14] as number) << 8) | (buf[15] as number);
  if (len > V2_MAX_LENGTH) return fail('too_large');
  const total = 16 + len;
  if (buf.length < total) return INCOMPLETE;
  const consumed = total;
  if (cmd === 0) return { kind: 'ok', value: { version: 2, source: null }, consumed }; // LOCAL
  const family = famProto >> 4;
  const proto = famProto & 0x0f;
  if (family > 3 || proto > 2) return fail('bad_v2');
  const a = buf.subarray(16, total);
  if (family === 1) {
    if (len < 12) return fail('bad_v2');
    const address = `${a[0]}.${a[1]}.${a[2]}.${a[3]}`;
    const port = ((a[8] as number) << 8) | (a[9] as number);
    return { kind: 'ok', value: { version: 2, source: { address, port, family: 4 } }, consumed };
  }
  if (family === 2) {
    if (len < 36) return fail('bad_v2');
    const address = ipaddr.fromByteArray(Array.from(a.subarray(0, 16))).toString();
    const port = ((a[32] as number) << 8) | (a[33] as number);
    return { kind: 'ok', value: { version: 2, source: { address, port, family: 6 } }, consumed };
  }
  if (family === 3 && len < 216) return fail('bad_v2');
  return { kind: 'ok', value: { version: 2, source: null }, consumed }; // UNSPEC or UNIX
}

export function parseProxyHeader(buf: Uint8Array): ProxyHeaderResult {
  const d = detectProxyHeader(buf);
  if (d === 'none') return { kind: 'none' };
  if (d === 'maybe') return INCOMPLETE;
  return d === 'v1' ? parseV1(buf) : parseV2(buf);
}
