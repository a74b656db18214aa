import { describe, expect, it } from 'vitest';
import { checkWhitelistIpv4, codePointLength, isStrictIPv4 } from '../../src/contract/ipv4.js';

describe('strict IPv4', () => {
  it.each(['1.2.3.4', '8.8.8.8', '255.255.255.254', '0.0.0.0'])('accepts %s', (s) => {
    expect(isStrictIPv4(s)).toBe(true);
  });
  it.each([
    '01.2.3.4',
    '1.2.3.04',
    '0x1.2.3.4',
    '1.2.3',
    '1.2.3.4.5',
    ' 1.2.3.4',
    '1.2.3.4 ',
    '1.2.3.256',
    '::ffff:1.2.3.4',
    '::1',
    '1.2.3.4/32',
    '+1.2.3.4',
    '1..2.3',
    '',
    '1.2.3.4\n',
    '０.1.2.3',
    '017.1.2.3',
    '4294967295',
  ])('rejects %j', (s) => {
    expect(isStrictIPv4(s)).toBe(false);
    expect(checkWhitelistIpv4(s)).toEqual({ ok: false, code: 10420 });
  });
  it('rejects non-strings', () => {
    for (const v of [null, 1, {}, [], undefined]) expect(isStrictIPv4(v)).toBe(false);
  });
});

describe('special-purpose blocks', () => {
  it.each([
    '0.1.2.3',
    '10.0.0.1',
    '100.64.0.1',
    '100.127.255.255',
    '127.0.0.1',
    '169.254.1.1',
    '172.16.0.1',
    '172.31.255.255',
    '192.0.0.9',
    '192.0.2.5',
    '192.31.196.1',
    '192.52.193.1',
    '192.88.99.1',
    '192.168.1.1',
    '192.175.48.1',
    '198.18.0.1',
    '198.19.255.255',
    '198.51.100.7',
    '203.0.113.9',
    '224.0.0.1',
    '239.255.255.255',
    '240.0.0.1',
    '255.255.255.255',
  ])('%s is not public (10421)', (ip) => {
    expect(checkWhitelistIpv4(ip)).toEqual({ ok: false, code: 10421 });
  });
  it.each([
    '8.8.8.8',
    '1.1.1.1',
    '100.63.255.255',
    '100.128.0.0',
    '172.15.255.255',
    '172.32.0.0',
    '198.20.0.0',
    '223.255.255.255',
  ])('%s is public', (ip) => expect(checkWhitelistIpv4(ip)).toEqual({ ok: true }));
});

describe('remark length', () => {
  it('counts code points, not UTF-16 units', () => {
    expect(codePointLength('😀'.repeat(255))).toBe(255);
    expect(codePointLength('a'.repeat(256))).toBe(256);
  });
});
