// The gateway's sets of open connections and tunnels (src/gateway/relay/live-set.ts): an array with each member's index,
// in place of a Set (docs/decisions.md#d-039, "GC: tunnels that outlived young collections").
import { describe, expect, it } from 'vitest';
import { LiveSet } from '../../../src/gateway/relay/live-set.js';

const member = (name: string) => ({ name, liveIndex: -1 });

describe('LiveSet', () => {
  it('adds once, deletes any member with the last taking its place, and knows who is in', () => {
    const s = new LiveSet<ReturnType<typeof member>>();
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map(member) as [
      ReturnType<typeof member>,
      ReturnType<typeof member>,
      ReturnType<typeof member>,
      ReturnType<typeof member>,
    ];
    for (const x of [a, b, c, d]) s.add(x);
    s.add(b); // already in: no second place
    expect(s.size).toBe(4);
    expect(s.delete(b)).toBe(true);
    expect(s.delete(b)).toBe(false);
    expect(b.liveIndex).toBe(-1);
    expect(s.has(b)).toBe(false);
    expect([...s].map((x) => x.name).sort()).toEqual(['a', 'c', 'd']);
    // d moved into b's place and still leaves cleanly; the last member leaves without a swap.
    expect(s.delete(d)).toBe(true);
    expect(s.delete(c)).toBe(true);
    expect([...s]).toEqual([a]);
    expect(s.has(a)).toBe(true);
    s.add(b);
    expect(s.size).toBe(2);
    expect(s.has(b)).toBe(true);
  });

  it('a member of another set is not taken for one of this set at the same index', () => {
    const s = new LiveSet<ReturnType<typeof member>>();
    const t = new LiveSet<ReturnType<typeof member>>();
    const a = member('a');
    const b = member('b');
    s.add(a);
    t.add(b); // index 0 in t
    expect(s.has(b)).toBe(false);
    expect(s.delete(b)).toBe(false);
    expect(s.size).toBe(1);
    expect(t.size).toBe(1);
  });

  it('a walk sees every member present when it began, once, while members leave and join during it', () => {
    const s = new LiveSet<ReturnType<typeof member>>();
    const all = Array.from({ length: 100 }, (_, i) => member(String(i)));
    for (const x of all) s.add(x);
    const seen: string[] = [];
    for (const x of s) {
      seen.push(x.name);
      // Each visit removes another member and itself, and brings a newcomer: none is skipped or repeated.
      s.delete(all[(Number(x.name) * 7) % 100]!);
      s.delete(x);
      s.add(member(`new${x.name}`));
    }
    expect(seen.sort()).toEqual(all.map((x) => x.name).sort());
    // Every one of the first hundred left; the hundred newcomers stay.
    expect(s.size).toBe(100);
    expect([...s].every((x) => x.name.startsWith('new'))).toBe(true);
  });
});
