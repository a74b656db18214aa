// Rendezvous hashing (src/rules/rendezvous.ts): one hash for an entry's exit per session and a node's address per
// session; a pick is the same everywhere, and stays when a name it did not pick goes away.
import { describe, expect, it } from 'vitest';
import { mixedHash, rendezvousPick, rendezvousScore } from '../../src/rules/rendezvous.js';

describe('rendezvous hashing', () => {
  it('is a pure function of its input, and spreads names that differ in their last character', () => {
    expect(mixedHash('session-a')).toBe(mixedHash('session-a'));
    const buckets = new Set(Array.from({ length: 64 }, (_, i) => mixedHash(`k${i}`) % 8));
    expect(buckets.size).toBe(8);
    expect(rendezvousScore('k', 'a')).toBe(mixedHash('k\0a'));
  });

  it('picks the highest score, null among none; removing another name keeps the pick', () => {
    expect(rendezvousPick([], 'k')).toBeNull();
    const names = ['198.51.100.1', '198.51.100.2', '198.51.100.3', '198.51.100.4'];
    const first = rendezvousPick(names, 'acct:alice:s1')!;
    expect(Math.max(...names.map((n) => rendezvousScore('acct:alice:s1', n)))).toBe(
      rendezvousScore('acct:alice:s1', first),
    );
    for (const other of names.filter((n) => n !== first))
      expect(
        rendezvousPick(
          names.filter((n) => n !== other),
          'acct:alice:s1',
        ),
      ).toBe(first);
  });
});
