import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import ipaddr from 'ipaddr.js';
import { encodeReply, parseGreeting, parseRequest, parseUserPass } from '../../../src/gateway/wire/socks5.js';
import { ipv6Text } from '../../../src/rules/socks5-address.js';
import { expectByteByByte, expectTotal, expectWithTrailer } from './parse-harness.js';

const b = (...x: number[]): Buffer => Buffer.from(x);

describe('SOCKS5 greeting', () => {
  it('parses byte by byte, all at once, and with the next message behind it', () => {
    const msg = b(5, 2, 0, 2);
    expect(expectByteByByte(parseGreeting, msg)).toEqual({ methods: [0, 2] });
    expect(expectWithTrailer(parseGreeting, msg, b(1, 5))).toEqual({ methods: [0, 2] });
  });
  it('checks the version strictly, at the first byte', () => {
    expect(parseGreeting(b(4))).toEqual({ kind: 'error', error: 'bad_version' });
    expect(parseGreeting(b(0x47, 0x45, 0x54))).toEqual({ kind: 'error', error: 'bad_version' });
    expect(parseGreeting(b(5, 0))).toEqual({ kind: 'error', error: 'no_methods' });
  });
});

describe('RFC 1929 username/password', () => {
  it('parses byte by byte and keeps UTF-8 and colons', () => {
    const u = Buffer.from('usér');
    const p = Buffer.from('p:ss wörd');
    const msg = Buffer.concat([b(1, u.length), u, b(p.length), p]);
    expect(expectByteByByte(parseUserPass, msg)).toEqual({ username: 'usér', password: 'p:ss wörd' });
    expect(expectWithTrailer(parseUserPass, msg, b(5, 1, 0, 1))).toEqual({ username: 'usér', password: 'p:ss wörd' });
  });
  it('a username or password that is not UTF-8 is ISO-8859-1 (Java sends them so)', () => {
    const u = Buffer.from('dora', 'latin1');
    const p = Buffer.from('pässwörd-lang', 'latin1');
    expect(expectByteByByte(parseUserPass, Buffer.concat([b(1, u.length), u, b(p.length), p]))).toEqual({
      username: 'dora',
      password: 'pässwörd-lang',
    });
  });
  it('subnegotiation version must be 1', () => {
    expect(parseUserPass(b(5, 1, 0x61, 0))).toEqual({ kind: 'error', error: 'bad_auth_version' });
    expect(parseUserPass(b(1, 0, 0))).toEqual({ kind: 'error', error: 'empty_username' });
  });
});

describe('SOCKS5 request', () => {
  it('IPv4, domain and IPv6 address types, split anywhere', () => {
    expect(expectByteByByte(parseRequest, b(5, 1, 0, 1, 10, 0, 0, 1, 0x01, 0xbb))).toEqual({
      command: 1,
      address: { type: 'ipv4', host: '10.0.0.1' },
      port: 443,
    });
    const d = Buffer.concat([b(5, 1, 0, 3, 11), Buffer.from('example.com'), b(0, 80)]);
    expect(expectByteByByte(parseRequest, d)).toEqual({
      command: 1,
      address: { type: 'domain', host: 'example.com' },
      port: 80,
    });
    const v6 = b(5, 1, 0, 4, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x1f, 0x90);
    expect(expectByteByByte(parseRequest, v6)).toEqual({
      command: 1,
      address: { type: 'ipv6', host: '2001:db8::1' },
      port: 8080,
    });
    expect(expectWithTrailer(parseRequest, d, Buffer.from('GET / HTTP/1.1\r\n'))).toMatchObject({ port: 80 });
  });
  it("IPv6 addresses in RFC 5952's text: one spelling for one address (a domain row, a rule, the log)", () => {
    const v6 = (...groups: number[]) => Uint8Array.from(groups.flatMap((g) => [g >> 8, g & 255]));
    expect(ipv6Text(v6(0, 0, 0, 0, 0, 0, 0, 1))).toBe('::1');
    expect(ipv6Text(v6(0, 0, 0, 0, 0, 0, 0, 0))).toBe('::');
    expect(ipv6Text(v6(0x2001, 0xdb8, 0, 0, 1, 0, 0, 1))).toBe('2001:db8::1:0:0:1'); // the first of equal runs
    expect(ipv6Text(v6(0x2001, 0xdb8, 0, 1, 0, 0, 0, 1))).toBe('2001:db8:0:1::1'); // the longest run
    expect(ipv6Text(v6(0x2001, 0xdb8, 1, 2, 3, 4, 0, 5))).toBe('2001:db8:1:2:3:4:0:5'); // one zero group stays
    expect(ipv6Text(v6(0xfe80, 0, 0, 0, 0, 0, 0, 0))).toBe('fe80::');
    expect(ipv6Text(v6(0, 0, 0, 0, 0, 0xffff, 0x7f00, 1))).toBe('::ffff:127.0.0.1');
    // The same text as the gateway's canonical form of any spelling.
    for (const text of ['0:0:0:0:0:0:0:1', '2001:db8:0:0:1:0:0:1', '2001:db8:0:1:0:0:0:1', 'fe80:0:0:0:0:0:0:0']) {
      const bytes = Uint8Array.from(ipaddr.parse(text).toByteArray());
      expect(ipv6Text(bytes), text).toBe(ipaddr.parse(text).toString());
    }
  });
  it('returns BIND / UDP ASSOCIATE / unknown commands for the caller to refuse', () => {
    for (const cmd of [2, 3, 9]) {
      const r = parseRequest(b(5, cmd, 0, 1, 1, 2, 3, 4, 0, 1));
      expect(r).toMatchObject({ kind: 'ok', value: { command: cmd } });
    }
  });
  it('strict version, reserved byte and address type', () => {
    expect(parseRequest(b(4, 1, 0, 1))).toEqual({ kind: 'error', error: 'bad_version' });
    expect(parseRequest(b(5, 1, 1))).toEqual({ kind: 'error', error: 'bad_reserved' });
    expect(parseRequest(b(5, 1, 0, 2, 0, 0))).toEqual({ kind: 'error', error: 'bad_address_type' });
    expect(parseRequest(b(5, 1, 0, 3, 0, 0, 80))).toEqual({ kind: 'error', error: 'bad_domain' });
  });
  it('encodes replies', () => {
    expect([...encodeReply(7)]).toEqual([5, 7, 0, 1, 0, 0, 0, 0, 0, 0]);
    expect([...encodeReply(0, { address: '127.0.0.2', port: 258 })]).toEqual([5, 0, 0, 1, 127, 0, 0, 2, 1, 2]);
    const v6 = encodeReply(0, { address: '::1', port: 1 });
    expect(v6.length).toBe(22);
    expect(v6[3]).toBe(4);
    expect(v6[19]).toBe(1);
  });
});

describe('SOCKS5 parsers on junk', () => {
  it('never throw, on random bytes and random splits', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        const buf = Buffer.from(bytes);
        for (const p of [parseGreeting, parseUserPass, parseRequest]) expectTotal(p, buf);
      }),
      { numRuns: 3000 },
    );
  });
  it('a valid request parses identically however it is split into packets', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.tuple(fc.constant(1), fc.uint8Array({ minLength: 4, maxLength: 4 })),
          fc.tuple(fc.constant(4), fc.uint8Array({ minLength: 16, maxLength: 16 })),
          fc.tuple(
            fc.constant(3),
            fc.stringMatching(/^[a-z0-9.-]{1,60}$/).map((s) => Buffer.from(s)),
          ),
        ),
        fc.integer({ min: 0, max: 65535 }),
        fc.array(fc.nat(), { maxLength: 5 }),
        (addr, port, cuts) => {
          const [atyp, bytes] = addr;
          const body = atyp === 3 ? Buffer.concat([b(bytes.length), Buffer.from(bytes)]) : Buffer.from(bytes);
          const msg = Buffer.concat([b(5, 1, 0, atyp), body, b(port >> 8, port & 0xff)]);
          const whole = parseRequest(msg);
          expect(whole.kind).toBe('ok');
          // Cumulative feeding at arbitrary cut points: incomplete until the last byte.
          for (const c of cuts.map((x) => x % msg.length))
            expect(parseRequest(msg.subarray(0, c)).kind).toBe('incomplete');
        },
      ),
    );
  });
});
