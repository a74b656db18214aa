// The gateway's sets of live objects that come and go thousands of times a second (its connections, its open
// tunnels): an array and each member's own index, so adding and removing one writes no hash table.
//
// Why not a `Set`: one that members keep entering and leaving lives in V8's old generation and is rebuilt into a
// new table as they do; the discarded tables, dead but old, still refer to members, and a young-generation
// collection counts what the old generation refers to as live. Two such Sets kept every recent tunnel (its
// sockets, buffers, closures) alive through young collections and promoted it, ~3 KiB a tunnel, until a full
// collection (docs/decisions.md#d-039, "GC: tunnels that outlived young collections").

/**
 * A member carries its place in its set (-1: in none), declared with its other fields so that it never changes the
 * member's shape; a member belongs to one LiveSet at a time.
 */
export interface LiveMember {
  liveIndex: number;
}

export class LiveSet<T extends LiveMember> implements Iterable<T> {
  private readonly items: T[] = [];

  get size(): number {
    return this.items.length;
  }

  add(x: T): void {
    if (x.liveIndex >= 0) return;
    x.liveIndex = this.items.length;
    this.items.push(x);
  }

  /** Removes `x` (the last member takes its place); false if it was not in this set. */
  delete(x: T): boolean {
    const i = x.liveIndex;
    if (i < 0 || this.items[i] !== x) return false;
    const last = this.items.pop() as T;
    if (last !== x) {
      this.items[i] = last;
      last.liveIndex = i;
    }
    x.liveIndex = -1;
    return true;
  }

  has(x: T): boolean {
    const i = x.liveIndex;
    return i >= 0 && this.items[i] === x;
  }

  /**
   * The members as they are now: a copy, so members that leave (or join) while a caller walks them neither skip
   * nor repeat another. Taken by the once-a-second and shutdown walks, never per connection.
   */
  [Symbol.iterator](): Iterator<T> {
    return this.items.slice()[Symbol.iterator]();
  }
}
