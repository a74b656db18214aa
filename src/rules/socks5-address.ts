// A SOCKS5 address (RFC 1928 section 5: ATYP, the address, the port) as every side writes and reads it: proxyctl
// check's CONNECT and its reply's bound address, the gateway's requests and UDP datagrams, the hop's UDP frames (same
// layout). An IPv6 address is read as RFC 5952 text (`::1`, `::ffff:192.0.2.7`) by every reader. A name travels as
// octets (RFC 1928: "the number of octets of name that follow"): written as UTF-8, read as UTF-8, or byte for byte
// (latin1) when the octets are not UTF-8, so no octet is lost and a name is shown as the client typed it. The gateway
// goes on only with host names (ASCII; an IDN as its `xn--` A-label) or IP literals, on which every reading agrees.
import { isUtf8 } from 'node:buffer';
import { isIP } from 'node:net';

export const ATYP_IPV4 = 0x01;
export const ATYP_DOMAIN = 0x03;
export const ATYP_IPV6 = 0x04;

/** The 16 bytes of an IPv6 literal (`::`, an embedded dotted quad and a `%zone`, which is dropped, allowed). */
export function ipv6Bytes(ip: string): Buffer {
  let text = ip.replace(/%.*$/s, '');
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4) {
    const p = v4[1]!.split('.').map(Number);
    text =
      text.slice(0, -v4[1]!.length) + `${((p[0]! << 8) | p[1]!).toString(16)}:${((p[2]! << 8) | p[3]!).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g || '0', 16), i * 2));
  return out;
}

/** ATYP, the address and the port of `host:port`; null for a name of no octets or more than 255. */
export function encodeSocksAddress(host: string, port: number): Buffer | null {
  const family = isIP(host);
  let addr: Buffer;
  if (family === 4) addr = Buffer.from([ATYP_IPV4, ...host.split('.').map(Number)]);
  else if (family === 6) addr = Buffer.concat([Buffer.from([ATYP_IPV6]), ipv6Bytes(host)]);
  else {
    const name = Buffer.from(host, 'utf8');
    if (name.length === 0 || name.length > 255) return null;
    addr = Buffer.concat([Buffer.from([ATYP_DOMAIN, name.length]), name]);
  }
  return Buffer.concat([addr, Buffer.from([(port >> 8) & 0xff, port & 0xff])]);
}

/** The text of a name's octets: UTF-8, or byte for byte (latin1) when they are not UTF-8. */
export function socksNameText(b: Uint8Array): string {
  const buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  return isUtf8(buf) ? buf.toString('utf8') : buf.toString('latin1');
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

/** A SOCKS5 address as read: its text, its family (null: a name), its port, and the offset just past the port. */
export interface DecodedSocksAddress {
  host: string;
  family: 4 | 6 | null;
  port: number;
  end: number;
}

/**
 * The address starting at `buf[at]` (its ATYP): 'incomplete' when the bytes stop before its port's end, null for
 * an ATYP that is none of the three. A name of no octets is read (as ''): a reader that refuses it checks that.
 */
export function decodeSocksAddress(buf: Uint8Array, at: number): DecodedSocksAddress | 'incomplete' | null {
  if (buf.length < at + 1) return 'incomplete';
  const atyp = buf[at] as number;
  let host: string;
  let family: 4 | 6 | null;
  let end: number;
  if (atyp === ATYP_IPV4) {
    end = at + 1 + 4;
    if (buf.length < end + 2) return 'incomplete';
    // Dotted quad without an array per address.
    host = `${buf[at + 1]}.${buf[at + 2]}.${buf[at + 3]}.${buf[at + 4]}`;
    family = 4;
  } else if (atyp === ATYP_IPV6) {
    end = at + 1 + 16;
    if (buf.length < end + 2) return 'incomplete';
    host = ipv6Text(buf.subarray(at + 1, end));
    family = 6;
  } else if (atyp === ATYP_DOMAIN) {
    if (buf.length < at + 2) return 'incomplete';
    end = at + 2 + (buf[at + 1] as number);
    if (buf.length < end + 2) return 'incomplete';
    host = socksNameText(buf.subarray(at + 2, end));
    family = null;
  } else {
    return null;
  }
  return { host, family, port: ((buf[end] as number) << 8) | (buf[end + 1] as number), end: end + 2 };
}
