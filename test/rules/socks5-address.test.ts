// A SOCKS5 address, written and read by one rule (src/rules/socks5-address.ts): proxyctl check writes it, the gateway
// reads it in requests and datagrams, the hop's UDP frames carry it. Names as UTF-8 both ways (docs/decisions.md).
import { randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { describe, expect, it } from 'vitest';
import { connectRequest, formatBound } from '../../src/cli/check/socks5.js';
import { encodeFrame } from '../../src/gateway/hop/udp.js';
import {
  encodeReply,
  encodeUdpHeader,
  ipv6Text,
  parseRequest,
  parseUdpDatagram,
} from '../../src/gateway/wire/socks5.js';
import { encodeSocksAddress, ipv6Bytes, socksNameText } from '../../src/rules/socks5-address.js';

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

  it('proxyctl shows a bound name as UTF-8', () => {
    const addr = encodeSocksAddress('bücher.example', 1080)!;
    expect(formatBound(addr[0]!, addr.subarray(1))).toBe('bücher.example:1080');
  });
});
