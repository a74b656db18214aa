// A SOCKS5 address (RFC 1928 section 5: ATYP, the address, the port) as every side writes and reads it: proxyctl
// check's CONNECT, the gateway's requests and UDP datagrams, the hop's UDP frames (same layout). A name travels as
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
