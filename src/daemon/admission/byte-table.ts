// A string-keyed table held in a few large buffers instead of JS objects (docs/decisions.md#d-036, "Admission view
// at a million proxy users", "Proxy users and IPs in buffers"): the admission view keeps a million proxy users, and as a Map of strings those were two million
// heap objects that every major garbage collection had to visit (hundreds of milliseconds of stalled set-ups),
// at 450+ bytes each. Here the collector sees four objects whatever the size.
//
// Layout: an arena of entries `[key length u16][value length u16][key (UTF-8)][value]`, appended; an
// open-addressed index (linear probing, backward-shift deletion: no tombstones) of the entry's arena offset + 1
// (0: empty) beside each key's 32-bit hash. A value of the same length is overwritten in place; otherwise the
// entry is appended again and the old bytes are counted as garbage until the table is rebuilt (`copyInSlices`).
import { randomBytes } from 'node:crypto';
import { fmix32 } from '../../rules/rendezvous.js';

/** Keys longer than this (in UTF-8 bytes) are never stored; a lookup of one is a miss. */
export const MAX_KEY_BYTES = 1024;
const HEADER = 4;
/** Index load factor above which it doubles. */
const MAX_LOAD = 0.7;
// A random seed (per thread; a table keeps the one it was built with): keys are chosen by customers, so their
// collisions must not be predictable.
const SEED = randomBytes(4).readUInt32LE(0);

/** murmur3 (32-bit) over `len` bytes of `b` from `off`. */
function hashBytes(seed: number, b: Uint8Array, off: number, len: number): number {
  let h = seed;
  const end = off + (len & ~3);
  let i = off;
  for (; i < end; i += 4) {
    let k = b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! << 24);
    k = Math.imul(k, 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    h ^= Math.imul(k, 0x1b873593);
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  let k = 0;
  switch (len & 3) {
    case 3:
      k ^= b[i + 2]! << 16;
    // falls through
    case 2:
      k ^= b[i + 1]! << 8;
    // falls through
    case 1:
      k ^= b[i]!;
      k = Math.imul(k, 0xcc9e2d51);
      k = (k << 15) | (k >>> 17);
      h ^= Math.imul(k, 0x1b873593);
  }
  return fmix32(h ^ len);
}

// String.prototype.isWellFormed (Node 20+), not in this project's TypeScript lib.
type WellFormed = string & { isWellFormed(): boolean };

function capacityFor(n: number): number {
  let cap = 16;
  while (cap * MAX_LOAD < n + 1) cap *= 2;
  return cap;
}

/** Arena chunk: entries never straddle one, and the arena grows by adding chunks (no copy of what is there). */
const CHUNK_BITS = 22;
const CHUNK = 1 << CHUNK_BITS;
const LOCAL = CHUNK - 1;
/** An entry's largest size: a key of MAX_KEY_BYTES and a value of up to 65,535 bytes. */
const MAX_VALUE_BYTES = 0xffff;

/**
 * A table as plain data over the buffers that hold it, for `postMessage` with those buffers in its transfer list:
 * the reload worker (reload-worker.ts) builds a table and hands it to the main thread without a copy.
 */
export interface ByteTableState {
  seed: number;
  slots: Uint32Array;
  hashes: Uint32Array;
  /** Every buffer the arena's chunks are views of (the reserved allocation, and chunks taken one by one). */
  buffers: Array<ArrayBuffer | SharedArrayBuffer>;
  /** Each chunk in order: its buffer's index in `buffers` and its offset there (a chunk is CHUNK bytes long). */
  chunks: Array<[buffer: number, offset: number]>;
  /** The reserved allocation's chunks not handed out yet: [buffer index, offset of the first, offset past the last]. */
  reserved: [buffer: number, taken: number, end: number] | null;
  used: number;
  stored: number;
  garbage: number;
  size: number;
}

export class ByteTable {
  /** Entry reference + 1 per index slot (0: empty); a reference is chunk << CHUNK_BITS | offset in it. */
  private slots: Uint32Array;
  private hashes: Uint32Array;
  private mask: number;
  private readonly chunks: Buffer[] = [];
  /** Bytes used in the last chunk. */
  private used = CHUNK;
  /** Bytes of all entries stored; `garbage` of them belong to replaced or deleted entries. */
  private stored = 0;
  private garbage = 0;
  size = 0;
  /** Where a key is encoded for a lookup (no allocation per lookup). */
  private readonly scratch = Buffer.allocUnsafeSlow(MAX_KEY_BYTES * 3 + 4);

  /**
   * Arena bytes taken in one allocation up front, handed out a chunk at a time (views of it). V8 counts every
   * buffer's memory as external and starts a major collection when that grows fast: a reload adding some 25
   * 4 MiB chunks one by one set off one every second or so (pauses of 3–15 ms on the gateway's loop), one
   * allocation sets off one at most. Pages of it not yet written are not resident.
   */
  private reserved: Buffer | null = null;
  private reservedTaken = 0;

  /** The hash seed: a copy (copyInSlices) keeps its original's, since it copies the hashes. */
  private readonly seed: number;
  /** Allocate over SharedArrayBuffers (below, `shared`). */
  private readonly shared: boolean;

  /**
   * `expected`: entries to size the index for, so that a full build never rehashes (a stall at a million);
   * `arenaBytes`: the arena to take in one allocation (the size of the table being rebuilt, say). `shared`: the
   * reload worker's tables are built over SharedArrayBuffers. V8 counts an ArrayBuffer that arrives in a
   * thread as new external memory there, and the ~100 MiB of a million users arriving at once set off a major
   * collection on the gateway's thread at every swap; shared memory arrives without that (and is freed, as the
   * table it replaces, by a later collection).
   */
  constructor(expected = 0, arenaBytes = 0, opts: { seed?: number; shared?: boolean } = {}) {
    this.seed = opts.seed ?? SEED;
    this.shared = opts.shared ?? false;
    const cap = capacityFor(expected);
    this.slots = this.words(cap);
    this.hashes = this.words(cap);
    this.mask = cap - 1;
    const chunks = Math.ceil(arenaBytes / CHUNK);
    if (chunks > 1) this.reserved = this.bytes(chunks * CHUNK);
  }

  /** `n` zeroed 32-bit words. */
  private words(n: number): Uint32Array {
    return this.shared ? new Uint32Array(new SharedArrayBuffer(n * 4)) : new Uint32Array(n);
  }

  /** `n` bytes of arena (not zeroed unless shared: every byte handed out is written before it is read). */
  private bytes(n: number): Buffer {
    return this.shared ? Buffer.from(new SharedArrayBuffer(n)) : Buffer.allocUnsafeSlow(n);
  }

  private newChunk(): Buffer {
    const r = this.reserved;
    if (r && this.reservedTaken + CHUNK <= r.length) {
      this.reservedTaken += CHUNK;
      return r.subarray(this.reservedTaken - CHUNK, this.reservedTaken);
    }
    return this.bytes(CHUNK);
  }

  get garbageBytes(): number {
    return this.garbage;
  }

  get liveBytes(): number {
    return this.stored - this.garbage;
  }

  /** The key's UTF-8 bytes in the scratch buffer, or -1 when it cannot be stored (too long, or not well-formed). */
  private encode(key: string): number {
    const n = key.length;
    if (n > MAX_KEY_BYTES) return -1;
    // ASCII (every valid proxy username) byte by byte: cheaper than a call into Buffer for a short key.
    const scratch = this.scratch;
    for (let i = 0; i < n; i++) {
      const c = key.charCodeAt(i);
      if (c >= 0x80) {
        if (!(key as WellFormed).isWellFormed()) return -1;
        const len = scratch.write(key, 0, 'utf8');
        return len > MAX_KEY_BYTES ? -1 : len;
      }
      scratch[i] = c;
    }
    return n;
  }

  /** Index slot holding the key in scratch[0, len), or -1. */
  private slotOf(len: number, h: number): number {
    const { slots, hashes, mask, chunks, scratch } = this;
    for (let i = h & mask; ; i = (i + 1) & mask) {
      const s = slots[i]!;
      if (s === 0) return -1;
      if (hashes[i] !== h) continue;
      const ref = s - 1;
      const c = chunks[ref >>> CHUNK_BITS]!;
      const off = ref & LOCAL;
      if (c.readUInt16LE(off) !== len) continue;
      const k = off + HEADER;
      let j = 0;
      while (j < len && c[k + j] === scratch[j]) j++;
      if (j === len) return i;
    }
  }

  /** The key's entry (read it with `chunkOf`, `valueAt` and `valueLength`), or -1 when absent. */
  find(key: string): number {
    const len = this.encode(key);
    if (len < 0) return -1;
    const i = this.slotOf(len, hashBytes(this.seed, this.scratch, 0, len));
    return i < 0 ? -1 : this.slots[i]! - 1;
  }

  /** The buffer an entry's bytes are in. */
  chunkOf(entry: number): Buffer {
    return this.chunks[entry >>> CHUNK_BITS]!;
  }

  /** Where an entry's value starts in its chunk. */
  valueAt(entry: number): number {
    const off = entry & LOCAL;
    return off + HEADER + this.chunkOf(entry).readUInt16LE(off);
  }

  valueLength(entry: number): number {
    return this.chunkOf(entry).readUInt16LE((entry & LOCAL) + 2);
  }

  has(key: string): boolean {
    return this.find(key) >= 0;
  }

  /**
   * Sets the key's value: `write(chunk, off)` writes exactly `valueLen` bytes at `off`. Returns false when the key
   * cannot be stored (longer than MAX_KEY_BYTES in UTF-8, or not well-formed).
   */
  set(key: string, valueLen: number, write: (chunk: Buffer, off: number) => void): boolean {
    if (valueLen > MAX_VALUE_BYTES) throw new RangeError(`admission view value of ${valueLen} bytes`);
    const len = this.encode(key);
    if (len < 0) return false;
    const h = hashBytes(this.seed, this.scratch, 0, len);
    const i = this.slotOf(len, h);
    if (i >= 0) {
      const ref = this.slots[i]! - 1;
      const c = this.chunkOf(ref);
      const off = ref & LOCAL;
      if (c.readUInt16LE(off + 2) === valueLen) {
        write(c, off + HEADER + len);
        return true;
      }
      this.garbage += HEADER + len + c.readUInt16LE(off + 2);
      this.slots[i] = this.append(len, valueLen, write) + 1;
      return true;
    }
    if (this.size + 1 > this.slots.length * MAX_LOAD) this.growIndex();
    this.place(h, this.append(len, valueLen, write) + 1);
    this.size++;
    return true;
  }

  delete(key: string): boolean {
    const len = this.encode(key);
    if (len < 0) return false;
    let i = this.slotOf(len, hashBytes(this.seed, this.scratch, 0, len));
    if (i < 0) return false;
    const ref = this.slots[i]! - 1;
    this.garbage += HEADER + len + this.chunkOf(ref).readUInt16LE((ref & LOCAL) + 2);
    this.size--;
    // Backward shift: move later entries of the probe run into the hole, so lookups never need tombstones.
    const { slots, hashes, mask } = this;
    for (let j = (i + 1) & mask; slots[j] !== 0; j = (j + 1) & mask) {
      const home = hashes[j]! & mask;
      const stays = i <= j ? i < home && home <= j : i < home || home <= j;
      if (stays) continue;
      slots[i] = slots[j]!;
      hashes[i] = hashes[j]!;
      i = j;
    }
    slots[i] = 0;
    hashes[i] = 0;
    return true;
  }

  /** Room for `need` bytes in the last chunk (a new chunk when they do not fit); returns their reference. */
  private reserve(need: number): number {
    if (this.used + need > CHUNK) {
      if (this.chunks.length >= 2 ** (32 - CHUNK_BITS) - 1) throw new RangeError('admission view arena over 4 GiB');
      this.chunks.push(this.newChunk());
      this.used = 0;
    }
    const ref = ((this.chunks.length - 1) << CHUNK_BITS) | this.used;
    this.used += need;
    this.stored += need;
    return ref >>> 0;
  }

  /** Appends an entry for the key in scratch; returns its reference. */
  private append(len: number, valueLen: number, write: (chunk: Buffer, off: number) => void): number {
    const ref = this.reserve(HEADER + len + valueLen);
    const c = this.chunkOf(ref);
    const off = ref & LOCAL;
    c.writeUInt16LE(len, off);
    c.writeUInt16LE(valueLen, off + 2);
    this.scratch.copy(c, off + HEADER, 0, len);
    write(c, off + HEADER + len);
    return ref;
  }

  private place(h: number, ref1: number): void {
    const { slots, hashes, mask } = this;
    let i = h & mask;
    while (slots[i] !== 0) i = (i + 1) & mask;
    slots[i] = ref1;
    hashes[i] = h;
  }

  private growIndex(): void {
    const old = this.slots;
    const oldHashes = this.hashes;
    this.slots = this.words(old.length * 2);
    this.hashes = this.words(old.length * 2);
    this.mask = this.slots.length - 1;
    for (let i = 0; i < old.length; i++) if (old[i] !== 0) this.place(oldHashes[i]!, old[i]!);
  }

  /**
   * A copy without garbage, built `slice` entries per turn of the event loop (the table in use keeps answering
   * meanwhile; the caller must not change it until the copy is done).
   */
  async copyInSlices(slice: number, yieldTurn: () => Promise<void>): Promise<ByteTable> {
    const t = new ByteTable(this.size, this.liveBytes * 1.05, { seed: this.seed });
    const { slots, hashes } = this;
    let n = 0;
    for (let i = 0; i < slots.length; i++) {
      const s = slots[i]!;
      if (s === 0) continue;
      const ref = s - 1;
      const c = this.chunkOf(ref);
      const off = ref & LOCAL;
      const need = HEADER + c.readUInt16LE(off) + c.readUInt16LE(off + 2);
      const to = t.reserve(need);
      c.copy(t.chunkOf(to), to & LOCAL, off, off + need);
      t.place(hashes[i]!, to + 1);
      t.size++;
      if (++n % slice === 0) await yieldTurn();
    }
    return t;
  }

  /**
   * The table as data over its buffers, and those buffers to transfer: post both with them in the transfer list.
   * They move to the receiver (detached here; shared ones are shared, not transferred), so this table must not be
   * used afterwards.
   */
  exportState(): { state: ByteTableState; transfer: ArrayBuffer[] } {
    const buffers: Array<ArrayBuffer | SharedArrayBuffer> = [];
    const index = new Map<ArrayBuffer | SharedArrayBuffer, number>();
    const indexOf = (b: Buffer): number => {
      const ab = b.buffer;
      let i = index.get(ab);
      if (i === undefined) {
        i = buffers.push(ab) - 1;
        index.set(ab, i);
      }
      return i;
    };
    const r = this.reserved;
    const state: ByteTableState = {
      seed: this.seed,
      slots: this.slots,
      hashes: this.hashes,
      buffers,
      chunks: this.chunks.map((c) => [indexOf(c), c.byteOffset]),
      reserved:
        r && this.reservedTaken + CHUNK <= r.length
          ? [indexOf(r), r.byteOffset + this.reservedTaken, r.byteOffset + r.length]
          : null,
      used: this.used,
      stored: this.stored,
      garbage: this.garbage,
      size: this.size,
    };
    const all = [...buffers, this.slots.buffer, this.hashes.buffer];
    return { state, transfer: all.filter((b): b is ArrayBuffer => !(b instanceof SharedArrayBuffer)) };
  }

  /** The table `exportState` described, over the same (transferred) buffers: nothing is copied. */
  static fromState(s: ByteTableState): ByteTable {
    const cap = s.slots.length;
    if (cap < 16 || (cap & (cap - 1)) !== 0 || s.hashes.length !== cap || s.size >= cap)
      throw new RangeError('admission table state: bad index');
    const view = (buffer: number, offset: number, length: number): Buffer => {
      const ab = s.buffers[buffer];
      if (!ab || offset < 0 || offset + length > ab.byteLength)
        throw new RangeError('admission table state: chunk out of its buffer');
      return Buffer.from(ab, offset, length);
    };
    const t = new ByteTable(0, 0, { seed: s.seed >>> 0 });
    t.slots = s.slots;
    t.hashes = s.hashes;
    t.mask = cap - 1;
    for (const [b, off] of s.chunks) t.chunks.push(view(b, off, CHUNK));
    if (s.reserved) {
      const [b, from, end] = s.reserved;
      t.reserved = view(b, from, end - from);
    }
    t.used = s.chunks.length ? s.used : CHUNK;
    t.stored = s.stored;
    t.garbage = s.garbage;
    t.size = s.size;
    return t;
  }
}
