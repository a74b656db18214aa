// TOTP on node:crypto against RFC 4226's HOTP vectors and RFC 6238's TOTP vectors (Appendix B, all three hashes),
// base32 as authenticator apps read it, the ±1 step window, and recovery codes as typed.
import { describe, expect, it } from 'vitest';
import {
  base32Decode,
  base32Encode,
  hotp,
  matchingStep,
  normalizeCode,
  otpauthUri,
  totp,
  totpStep,
} from '../../../src/daemon/services/totp.js';
import {
  hashRecoveryCode,
  newRecoveryCodes,
  normalizeRecoveryCode,
} from '../../../src/daemon/services/second-factor.js';

const SHA1_KEY = Buffer.from('12345678901234567890');
const SHA256_KEY = Buffer.from('12345678901234567890123456789012');
const SHA512_KEY = Buffer.from('1234567890123456789012345678901234567890123456789012345678901234');

describe('HOTP (RFC 4226, Appendix D)', () => {
  it('gives the ten published codes', () => {
    const expected = [
      '755224',
      '287082',
      '359152',
      '969429',
      '338314',
      '254676',
      '287922',
      '162583',
      '399871',
      '520489',
    ];
    expect(expected.map((_, i) => hotp(SHA1_KEY, i))).toEqual(expected);
  });
});

describe('TOTP (RFC 6238, Appendix B)', () => {
  const vectors: Array<[number, string, string, string]> = [
    [59, '94287082', '46119246', '90693936'],
    [1111111109, '07081804', '68084774', '25091201'],
    [1111111111, '14050471', '67062674', '99943326'],
    [1234567890, '89005924', '91819424', '93441116'],
    [2000000000, '69279037', '90698825', '38618901'],
    [20000000000, '65353130', '77737706', '47863826'],
  ];
  it.each(vectors)('T = %i s', (t, sha1, sha256, sha512) => {
    expect(totp(SHA1_KEY, t * 1000, 8, 'sha1')).toBe(sha1);
    expect(totp(SHA256_KEY, t * 1000, 8, 'sha256')).toBe(sha256);
    expect(totp(SHA512_KEY, t * 1000, 8, 'sha512')).toBe(sha512);
    // What the console uses: six digits of the same HMAC-SHA-1 value.
    expect(totp(SHA1_KEY, t * 1000)).toBe(sha1.slice(2));
  });

  it('accepts one 30 s step either side of now, and no further; names the step it matched', () => {
    const now = 1_700_000_015_000;
    const step = totpStep(now);
    for (const d of [-1, 0, 1]) expect(matchingStep(SHA1_KEY, hotp(SHA1_KEY, step + d), now)).toBe(step + d);
    for (const d of [-2, 2]) expect(matchingStep(SHA1_KEY, hotp(SHA1_KEY, step + d), now)).toBeNull();
  });
});

describe('secrets and codes as people type them', () => {
  it('base32 round-trips and reads spaces, lower case and padding; refuses other letters', () => {
    expect(base32Encode(SHA1_KEY)).toBe('GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ');
    expect(base32Decode('gezd gnbv gy3t qojq gezd gnbv gy3t qojq')).toEqual(SHA1_KEY);
    expect(base32Decode('MZXW6===')).toEqual(Buffer.from('foo'));
    expect(base32Decode('M1XW')).toBeNull();
    expect(base32Decode('')).toBeNull();
  });

  it('a code is six digits (spaces allowed between); anything else is malformed', () => {
    expect(normalizeCode(' 123 456 ')).toBe('123456');
    for (const bad of ['12345', '1234567', '12a456', '', '１２３４５６']) expect(normalizeCode(bad)).toBeNull();
  });

  it('the otpauth URI names issuer, account and secret', () => {
    expect(otpauthUri('proxyd', 'a b@example.com', 'ABC')).toBe(
      'otpauth://totp/proxyd:a%20b%40example.com?secret=ABC&issuer=proxyd&algorithm=SHA1&digits=6&period=30',
    );
  });

  it('recovery codes: ten, 80 bits each, read in any case with or without dashes, hashed', () => {
    const codes = newRecoveryCodes();
    expect(codes).toHaveLength(10);
    expect(new Set(codes).size).toBe(10);
    for (const c of codes) expect(c).toMatch(/^[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}$/);
    const c = codes[0]!;
    expect(normalizeRecoveryCode(c.toUpperCase().replace(/-/g, ' '))).toBe(c.replace(/-/g, ''));
    expect(normalizeRecoveryCode('123456')).toBeNull();
    expect(hashRecoveryCode(normalizeRecoveryCode(c)!)).toMatch(/^[0-9a-f]{64}$/);
    expect(hashRecoveryCode(normalizeRecoveryCode(c)!)).not.toContain(c.replace(/-/g, ''));
  });
});
