// Whose usage a byte counts as, and the one key of an account and subject (src/rules/usage-key.ts).
import { describe, expect, it } from 'vitest';
import { subjectOf, userOf } from '../../src/daemon/services/usage.js';
import {
  ipSubject,
  splitUsageKey,
  subjectIp,
  subjectUser,
  usageKey,
  usageTargetKey,
  userSubject,
} from '../../src/rules/usage-key.js';

describe('usage subjects and keys', () => {
  it('names a proxy user and a whitelisted address, and reads the user back', () => {
    expect(userSubject('alice')).toBe('user:alice');
    expect(ipSubject('203.0.113.9')).toBe('ip:203.0.113.9');
    expect(subjectUser('user:alice')).toBe('alice');
    expect(subjectUser('ip:203.0.113.9')).toBeNull();
    expect(subjectUser(null)).toBeNull();
    expect(subjectIp('ip:203.0.113.9')).toBe('203.0.113.9');
    expect(subjectIp('user:alice')).toBeNull();
  });

  it("the usage reports' words are the same rule", () => {
    expect(subjectOf('alice')).toBe(userSubject('alice'));
    expect(subjectOf('ip:203.0.113.9')).toBe('ip:203.0.113.9');
    expect(userOf(userSubject('alice'))).toBe('alice');
    expect(userOf(ipSubject('203.0.113.9'))).toBe('ip:203.0.113.9');
  });

  it('a key splits back into its account and subject, and a target key extends it', () => {
    for (const [accountId, subject] of [
      [1, 'user:alice'],
      [12, 'ip:203.0.113.9'],
      [1, 'user:a\u0000b'],
    ] as const) {
      expect(splitUsageKey(usageKey(accountId, subject))).toEqual({ accountId, subject });
      expect(usageTargetKey(accountId, subject, 'example.com')).toBe(
        `${usageKey(accountId, subject)}\u0000example.com`,
      );
    }
    expect(usageTargetKey(1, 'user:a', '')).toBe(`${usageKey(1, 'user:a')}\u0000`);
  });

  it('no two accounts and subjects share a key', () => {
    const pairs: Array<[number, string]> = [
      [1, 'user:a'],
      [11, 'user:a'],
      [1, 'user:a1'],
      [1, 'ip:1.2.3.4'],
      [11, 'ip:1.2.3.4'],
    ];
    expect(new Set(pairs.map(([a, s]) => usageKey(a, s))).size).toBe(pairs.length);
  });
});
