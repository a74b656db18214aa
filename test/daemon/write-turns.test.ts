import { describe, expect, it } from 'vitest';
import { WriteTurns, writeTurnsFor } from '../../src/daemon/store/write-turns.js';

describe('write turns of the workers on one SQLite file', () => {
  it('gives each worker its own slice of the clock, and no two the same instant', () => {
    const turns = [0, 1, 2].map((slot) => new WriteTurns(slot, 3, 50));
    for (let t = 1_700_000_000_000; t < 1_700_000_000_000 + 600; t++) {
      const writing = turns.filter((w) => w.waitMs(t) === 0);
      expect(writing.length).toBeLessThanOrEqual(1);
    }
  });

  it('waits until the start of its own turn, and begins no write in the second half of it', () => {
    const w = new WriteTurns(1, 2, 50);
    expect(w.waitMs(50)).toBe(0); // its turn is [50, 100) of every 100 ms
    expect(w.waitMs(74)).toBe(0);
    expect(w.waitMs(75)).toBe(75); // late in its turn: the next one, at 150
    expect(w.waitMs(0)).toBe(50);
    expect(w.waitMs(120)).toBe(30);
  });

  it('a lone writer has no turns; a slot outside the workers is refused', () => {
    expect(writeTurnsFor(0, 1)).toBeNull();
    expect(writeTurnsFor(undefined, 2)).toBeNull();
    expect(writeTurnsFor(1, 2)).toBeInstanceOf(WriteTurns);
    expect(() => new WriteTurns(2, 2)).toThrow(RangeError);
  });
});
