import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { detectProxyHeader, parseProxyHeader } from '../../../src/gateway/wire/proxy-protocol.js';
import { expectByteByByte, expectTotal, expectWithTrailer } from './parse-harness.js';

const SIG = Buffer.from('0d0a0d0a000d0a515549540a', 'hex');

function v2(verCmd: number, famProto: number, addr: number[]): Buffer {
  return Buffer.concat([SIG, Buffer.from([verCmd, famProto, addr.length >> 8, addr.length & 0xff]), Buffer.from(addr)]);
}

describe('PROXY v1', () => {
  it('TCP4 byte by byte and with the proxied protocol behind it', () => {
    const h = Buffer.from('PROXY TCP4 203.0.113.7 10.0.0.1 56324 3128\r\n');
    const want = { version: 1, source: { address: '203.0.113.7', port: 56324, family: 4 } };
    expect(expectByteByByte(parseProxyHeader, h)).toEqual(want);
    expect(expectWithTrailer(parseProxyHeader, h, Buffer.from('CONNECT a:1 HTTP/1.1\r\n\r\n'))).toEqual(want);
  });
  it('TCP6 and UNKNOWN', () => {
    expect(parseProxyHeader(Buffer.from('PROXY TCP6 2001:db8::1 ::1 1 2\r\n'))).toMatchObject({
      kind: 'ok',
      value: { source: { address: '2001:db8::1', family: 6 } },
    });
    expect(parseProxyHeader(Buffer.from('PROXY UNKNOWN\r\n'))).toMatchObject({ kind: 'ok', value: { source: null } });
  });
  it('rejects malformed lines', () => {
    for (const bad of [
      'PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n',
      'PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n',
      'PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n',
      'PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n',
      'PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n',
      'PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n',
      'PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n',
      'PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n',
      `PROXY TCP4 ${'1'.repeat(120)}`,
    ]) {
      expect(parseProxyHeader(Buffer.from(bad)).kind, bad).toBe('error');
    }
  });
});

describe('PROXY v2', () => {
  it('PROXY TCP4 byte by byte, with TLVs, and followed by SOCKS bytes', () => {
    const h = v2(0x21, 0x11, [198, 51, 100, 20, 10, 0, 0, 1, 0x9c, 0x40, 0x04, 0x38, 0x04, 0x00, 0x01, 0x61]);
    const want = { version: 2, source: { address: '198.51.100.20', port: 40000, family: 4 } };
    expect(expectByteByByte(parseProxyHeader, h)).toEqual(want);
    expect(expectWithTrailer(parseProxyHeader, h, Buffer.from([5, 1, 0]))).toEqual(want);
  });
  it('TCP6, LOCAL and UNSPEC', () => {
    const a6 = [0x20, 0x01, 0x0d, 0xb8, ...new Array(11).fill(0), 5, ...new Array(16).fill(0), 0, 1, 0, 2];
    expect(parseProxyHeader(v2(0x21, 0x21, a6))).toMatchObject({
      kind: 'ok',
      value: { source: { address: '2001:db8::5', port: 1 } },
    });
    expect(parseProxyHeader(v2(0x20, 0x00, []))).toMatchObject({ kind: 'ok', value: { source: null } });
    expect(parseProxyHeader(v2(0x21, 0x00, []))).toMatchObject({ kind: 'ok', value: { source: null } });
  });
  it('rejects bad versions, commands, short address blocks and oversize lengths', () => {
    expect(parseProxyHeader(v2(0x11, 0x11, new Array(12).fill(1))).kind).toBe('error');
    expect(parseProxyHeader(v2(0x22, 0x11, new Array(12).fill(1))).kind).toBe('error');
    expect(parseProxyHeader(v2(0x21, 0x11, new Array(8).fill(1))).kind).toBe('error');
    expect(parseProxyHeader(v2(0x21, 0x41, []))).toMatchObject({ kind: 'error' });
    const huge = Buffer.concat([SIG, Buffer.from([0x21, 0x11, 0xff, 0xff])]);
    expect(parseProxyHeader(huge)).toEqual({ kind: 'error', error: 'too_large' });
  });
});

describe('detection', () => {
  it('decides from the first byte that HTTP and SOCKS carry no header', () => {
    expect(detectProxyHeader(Buffer.from([5]))).toBe('none');
    expect(detectProxyHeader(Buffer.from('G'))).toBe('none');
    expect(detectProxyHeader(Buffer.from('POST'))).toBe('none');
    expect(detectProxyHeader(Buffer.from('PRO'))).toBe('maybe');
    expect(detectProxyHeader(Buffer.from([0x0d, 0x0a]))).toBe('maybe');
    expect(parseProxyHeader(Buffer.from('CONNECT x:1 HTTP/1.1\r\n\r\n'))).toEqual({ kind: 'none' });
  });
  it('never throws on junk, including junk behind a valid signature', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.boolean(), fc.boolean(), (bytes, sig, v1) => {
        const prefix = sig ? (v1 ? Buffer.from('PROXY ') : SIG) : Buffer.alloc(0);
        expectTotal(parseProxyHeader, Buffer.concat([prefix, Buffer.from(bytes)]));
      }),
      { numRuns: 5000 },
    );
  });
});
