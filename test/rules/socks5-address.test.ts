// A SOCKS5 address, written and read by one rule (src/rules/socks5-address.ts): proxyctl check writes it, the gateway
// reads it in requests and datagrams, the hop's UDP frames carry it. Names as UTF-8 both ways (docs/decisions.md).
import { randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { describe, expect, it } from 'vitest';
import { connectRequest, formatBound } from '../../src/cli/check/socks5.js';
import { encodeFrame } from '../../src/gateway/hop/udp.js';
import { encodeReply, encodeUdpHeader, parseRequest, parseUdpDatagram } from '../../src/gateway/wire/socks5.js';
import {
  ATYP_DOMAIN,
  ATYP_IPV4,
  ATYP_IPV6,
  decodeSocksAddress,
  encodeSocksAddress,
  ipv6Bytes,
  ipv6Text,
  socksNameText,
} from '../../src/rules/socks5-address.js';

/** The gateway's text of a target: an IPv6 address in RFC 5952 form, anything else as sent. */
const read = (host: string) => (isIP(host) === 6 ? ipv6Text(ipv6Bytes(host)) : host);
const TARGETS = [
  '203.0.113.9',
  '::1',
  '2001:db8::7',
  '::ffff:203.0.113.9',
  'example.com',
  'xn--bcher-kva.example',
  'bücher.example',
  '東京.example',
];

describe('SOCKS5 addresses', () => {
  it.each(TARGETS)("proxyctl's CONNECT for %s reads back the same at the gateway", (host) => {
    const r = parseRequest(connectRequest(host, 443));
    expect(r.kind).toBe('ok');
    if (r.kind !== 'ok') return;
    expect(r.value.port).toBe(443);
    expect(r.value.address.host).toBe(read(host));
  });

  it.each(TARGETS)("a datagram's header and a hop frame for %s carry the same bytes", (host) => {
    const addr = encodeSocksAddress(host, 53)!;
    const data = Buffer.from('q');
    const d = parseUdpDatagram(Buffer.concat([Buffer.from([0, 0, 0]), addr, data]));
    expect(d.kind === 'ok' && d.value.address.host).toBe(read(host));
    expect(encodeFrame({ host, port: 53 }, data)).toEqual(
      Buffer.concat([Buffer.from([0, addr.length + 1]), addr, data]),
    );
  });

  it('octets that are not UTF-8 are read byte for byte, none lost', () => {
    const octets = Buffer.from([0x61, 0xff, 0xfe, 0x62]);
    const text = socksNameText(octets);
    expect(Buffer.from(text, 'latin1')).toEqual(octets);
    expect(socksNameText(Buffer.from('bücher', 'utf8'))).toBe('bücher');
  });

  it('a name of no octets or more than 255 has no encoding', () => {
    expect(encodeSocksAddress('', 80)).toBeNull();
    expect(encodeSocksAddress('a'.repeat(256), 80)).toBeNull();
    expect(encodeSocksAddress('é'.repeat(128), 80)).toBeNull(); // 256 octets in UTF-8
    expect(() => connectRequest('a'.repeat(256), 80)).toThrow(/longer than 255 bytes/);
  });

  it("IPv6 bytes agree with ipaddr.js's, for written forms and random addresses", () => {
    const forms = ['::', '::1', '1::', '2001:db8::1:0:0:1', 'fe80::1%eth0', '::ffff:1.2.3.4', '64:ff9b::198.51.100.1'];
    for (let i = 0; i < 200; i++) forms.push(ipaddr.fromByteArray([...randomBytes(16)]).toString());
    for (const f of forms)
      expect(ipv6Bytes(f)).toEqual(Buffer.from(ipaddr.IPv6.parse(f.replace(/%.*$/, '')).toByteArray()));
  });

  it.each(['203.0.113.9', '::1', '2001:db8::7', '::ffff:203.0.113.9'])(
    "the gateway's reply and answer header for %s carry the same address",
    (ip) => {
      const addr = encodeSocksAddress(ip, 5353)!;
      expect(encodeReply(0, { address: ip, port: 5353 })).toEqual(Buffer.concat([Buffer.from([5, 0, 0]), addr]));
      const h = encodeUdpHeader(ip, 5353);
      expect(h).toEqual(Buffer.concat([Buffer.from([0, 0, 0]), addr]));
      const d = parseUdpDatagram(Buffer.concat([h, Buffer.from('a')]));
      expect(d.kind === 'ok' && [d.value.address.host, d.value.port]).toEqual([read(ip), 5353]);
    },
  );

  it('proxyctl shows a bound name as UTF-8, a bound IPv6 address as RFC 5952 text', () => {
    const shown = (host: string) => {
      const addr = encodeSocksAddress(host, 1080)!;
      return formatBound(addr[0]!, addr.subarray(1));
    };
    expect(shown('bücher.example')).toBe('bücher.example:1080');
    expect(shown('203.0.113.9')).toBe('203.0.113.9:1080');
    expect(shown('0:0:0:0:0:0:0:1')).toBe('[::1]:1080');
    expect(shown('::ffff:203.0.113.9')).toBe('[::ffff:203.0.113.9]:1080');
  });
});

describe('decodeSocksAddress', () => {
  const at = (prefix: number[], host: string, port: number, tail: number[] = []) =>
    Buffer.concat([Buffer.from(prefix), encodeSocksAddress(host, port)!, Buffer.from(tail)]);

  it('reads IPv4, IPv6 (RFC 5952 text, IPv4-mapped dotted) and names (UTF-8 or byte for byte) from any offset', () => {
    expect(decodeSocksAddress(at([9, 9], '203.0.113.9', 443, [7]), 2)).toEqual({
      host: '203.0.113.9',
      family: 4,
      port: 443,
      end: 2 + 1 + 4 + 2,
    });
    expect(decodeSocksAddress(at([], '2001:db8:0:0:0:0:0:7', 53), 0)).toEqual({
      host: '2001:db8::7',
      family: 6,
      port: 53,
      end: 19,
    });
    expect(decodeSocksAddress(at([], '::ffff:c000:207', 53), 0)).toMatchObject({ host: '::ffff:192.0.2.7', family: 6 });
    expect(decodeSocksAddress(at([0], '東京.example', 65535), 1)).toEqual({
      host: '東京.example',
      family: null,
      port: 65535,
      end: 1 + 2 + Buffer.byteLength('東京.example') + 2,
    });
    const latin = Buffer.from([ATYP_DOMAIN, 2, 0xff, 0x61, 0, 80]);
    expect(decodeSocksAddress(latin, 0)).toEqual({ host: 'ÿa', family: null, port: 80, end: 6 });
    // A name of no octets is read; the gateway's request parser refuses it itself.
    expect(decodeSocksAddress(Buffer.from([ATYP_DOMAIN, 0, 0, 80]), 0)).toEqual({
      host: '',
      family: null,
      port: 80,
      end: 4,
    });
  });

  it('is incomplete until the port has ended, at every cut', () => {
    for (const host of ['203.0.113.9', '::1', 'example.com']) {
      const whole = at([5, 1, 0], host, 8080);
      for (let n = 0; n < whole.length; n++)
        expect(decodeSocksAddress(whole.subarray(0, n), 3), `${host} ${n}`).toBe('incomplete');
      expect(decodeSocksAddress(whole, 3)).toMatchObject({ port: 8080, end: whole.length });
    }
  });

  it('an ATYP that is none of the three is null', () => {
    for (const atyp of [0, 2, 5, 0xff])
      expect(decodeSocksAddress(Buffer.from([atyp, 1, 2, 3, 4, 0, 80]), 0)).toBeNull();
    expect([ATYP_IPV4, ATYP_DOMAIN, ATYP_IPV6]).toEqual([1, 3, 4]);
  });
});
