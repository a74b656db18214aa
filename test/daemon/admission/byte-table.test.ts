// The admission view's buffer-backed table (src/daemon/admission/byte-table.ts) against a Map doing the same.
import { describe, expect, it } from 'vitest';
import { ByteTable, MAX_KEY_BYTES } from '../../../src/daemon/admission/byte-table.js';

const put = (t: ByteTable, k: string, v: string): boolean =>
  t.set(k, Buffer.byteLength(v), (b, o) => void b.write(v, o, 'utf8'));
const get = (t: ByteTable, k: string): string | null => {
  const e = t.find(k);
  return e < 0 ? null : t.chunkOf(e).toString('utf8', t.valueAt(e), t.valueAt(e) + t.valueLength(e));
};

// A small deterministic generator: the same sequence every run.
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32;
}

describe('ByteTable', () => {
  it('answers as a Map does through inserts, same-size and resized updates, deletes and index growth', () => {
    const t = new ByteTable();
    const m = new Map<string, string>();
    const r = rng(7);
    for (let i = 0; i < 60_000; i++) {
      const k = `user${Math.floor(r() * 20_000)}`;
      const op = r();
      if (op < 0.6) {
        const v = 'v'.repeat(1 + Math.floor(r() * 5)) + i;
        put(t, k, v);
        m.set(k, v);
      } else {
        expect(t.delete(k)).toBe(m.delete(k));
      }
      if (i % 997 === 0) expect(t.size).toBe(m.size);
    }
    expect(t.size).toBe(m.size);
    for (let i = 0; i < 20_000; i++) expect(get(t, `user${i}`)).toBe(m.get(`user${i}`) ?? null);
    expect(t.garbageBytes).toBeGreaterThan(0);
  });

  it('keys are exact bytes: case, unicode, prefixes, the empty key; too long or ill-formed keys are never stored', () => {
    const t = new ByteTable();
    for (const k of ['alice', 'Alice', 'alic', 'alice ', 'ålice', '用户', '']) expect(put(t, k, `=${k}`)).toBe(true);
    for (const k of ['alice', 'Alice', 'alic', 'alice ', 'ålice', '用户', '']) expect(get(t, k)).toBe(`=${k}`);
    expect(get(t, 'alicf')).toBeNull();
    expect(put(t, 'x'.repeat(MAX_KEY_BYTES + 1), 'v')).toBe(false);
    expect(put(t, '\ud800', 'v')).toBe(false);
    expect(get(t, '\ud800')).toBeNull();
    expect(get(t, 'x'.repeat(MAX_KEY_BYTES + 1))).toBeNull();
    expect(put(t, 'é'.repeat(MAX_KEY_BYTES / 2), 'v')).toBe(true);
    expect(get(t, 'é'.repeat(MAX_KEY_BYTES / 2))).toBe('v');
  });

  it('spans arena chunks, and a copy drops garbage and answers the same', async () => {
    const t = new ByteTable(10);
    const big = 'h'.repeat(60_000);
    for (let i = 0; i < 300; i++) put(t, `k${i}`, `${i}${big}`); // ~18 MB: several 4 MiB chunks
    for (let i = 0; i < 300; i += 2) t.delete(`k${i}`);
    let turns = 0;
    const c = await t.copyInSlices(10, async () => void turns++);
    expect(turns).toBe(15);
    expect(c.size).toBe(150);
    expect(c.garbageBytes).toBe(0);
    expect(c.liveBytes).toBe(t.liveBytes);
    for (let i = 0; i < 300; i++) expect(get(c, `k${i}`)).toBe(i % 2 ? `${i}${big}` : null);
    put(c, 'k0', 'back');
    expect(get(c, 'k0')).toBe('back');
  });

  it('moves to another thread as its buffers (transferred or shared, not copied) and answers the same there, seed and all', async () => {
    // Another thread's seed (the module's is per thread); an arena taken in one allocation, then chunks one by
    // one past it (6 MiB reserved), or with some of it still to hand out (24 MiB); over ArrayBuffers (moved) or
    // SharedArrayBuffers (shared, as the reload worker builds them).
    for (const [reserve, shared] of [
      [6 << 20, false],
      [24 << 20, false],
      [6 << 20, true],
      [24 << 20, true],
    ] as const) {
      const t = new ByteTable(1_000, reserve, { seed: 0x9e3779b9, shared });
      const big = 'h'.repeat(40_000);
      for (let i = 0; i < 400; i++) put(t, `k${i}`, `${i}${big}`); // ~16 MB
      for (let i = 0; i < 400; i += 3) t.delete(`k${i}`);
      const { size, liveBytes, garbageBytes } = t;
      const { state, transfer } = t.exportState();
      expect(state.reserved === null).toBe(reserve < 16 << 20);
      expect(transfer.length).toBe(shared ? 0 : state.buffers.length + 2);
      const moved = structuredClone(state, { transfer }); // what postMessage does with a transfer list
      expect(transfer.every((b) => b.byteLength === 0)).toBe(true); // detached here: nothing was copied
      if (shared)
        expect(
          moved.buffers.every((b) => b instanceof SharedArrayBuffer) && moved.slots.buffer instanceof SharedArrayBuffer,
        ).toBe(true);
      const r = ByteTable.fromState(moved);
      expect([r.size, r.liveBytes, r.garbageBytes]).toEqual([size, liveBytes, garbageBytes]);
      for (let i = 0; i < 400; i++) expect(get(r, `k${i}`)).toBe(i % 3 ? `${i}${big}` : null);
      // It goes on taking changes, and a copy of it keeps its seed.
      put(r, 'k0', 'back');
      put(r, 'k1', 'short');
      for (let i = 0; i < 200; i++) put(r, `n${i}`, `${i}${big}`);
      const c = await r.copyInSlices(100, async () => {});
      for (const x of [r, c]) {
        expect(get(x, 'k0')).toBe('back');
        expect(get(x, 'k1')).toBe('short');
        expect(get(x, 'k2')).toBe(`2${big}`);
        expect(get(x, 'n199')).toBe(`199${big}`);
      }
      if (reserve > 16 << 20 && !shared) {
        expect(() => ByteTable.fromState({ ...moved, slots: new Uint32Array(10) })).toThrow(RangeError);
        expect(() => ByteTable.fromState({ ...moved, chunks: [[0, 1 << 30]] })).toThrow(RangeError);
      }
    }
  });
});
