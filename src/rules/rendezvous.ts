// Spreading keys over names the same on every worker and node: a session's exit on an entry (hop/directory.ts) and
// its dedicated address on a node (dial/dialer.ts) are picked by rendezvous hashing, stable while the list changes
// little; a session moved off a reserved address lands on the free one its key hashes to.

/** 32-bit FNV-1a of a string with murmur3's fmix32 as a final avalanche, so strings that differ in their last character spread evenly. */
export function mixedHash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return fmix32(h);
}

/** murmur3's 32-bit finalizer: every input bit affects every output bit (the admission view's byte-table hash ends with it too). */
export function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** How strongly `key` prefers `name` (rendezvous hashing: the highest score wins). */
export function rendezvousScore(key: string, name: string): number {
  return mixedHash(`${key}\0${name}`);
}

/** The name `key` ranks first among `names`; null when there is none. */
export function rendezvousPick(names: readonly string[], key: string): string | null {
  let best: string | null = null;
  let bestScore = -1;
  for (const n of names) {
    const score = rendezvousScore(key, n);
    if (score > bestScore) [best, bestScore] = [n, score];
  }
  return best;
}
