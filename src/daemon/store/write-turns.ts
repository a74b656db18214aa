// Turns at the database's write lock for the workers of one host: worker `slot` of `of` writes usage and the
// connection log only in its own slice of the wall clock, so two workers' writers never meet SQLite's lock
// (a busy answer costs a retry and delays the records). Every worker computes the same slices: no messages.

export const DEFAULT_TURN_MS = 50;

export class WriteTurns {
  constructor(
    readonly slot: number,
    readonly of: number,
    readonly turnMs = DEFAULT_TURN_MS,
  ) {
    if (!Number.isInteger(of) || of < 1 || !Number.isInteger(slot) || slot < 0 || slot >= of) throw new RangeError(`write turn ${slot} of ${of}`);
  }

  /** Milliseconds until this worker's turn starts; 0 inside it (writes begun in the turn's first half only). */
  waitMs(nowMs: number): number {
    const cycle = this.turnMs * this.of;
    const into = (((nowMs - this.slot * this.turnMs) % cycle) + cycle) % cycle;
    // A write begun late in the turn would run into the next worker's.
    return into < this.turnMs / 2 ? 0 : cycle - into;
  }

  /** Resolves at the start of this worker's next turn (at once inside it). */
  wait(now: () => number = Date.now): Promise<void> {
    const ms = this.waitMs(now());
    return ms === 0 ? Promise.resolve() : new Promise((r) => setTimeout(r, ms));
  }
}

/** One writer alone needs no turns. */
export function writeTurnsFor(slot: number | undefined, of: number): WriteTurns | null {
  return of > 1 && slot !== undefined ? new WriteTurns(slot, of) : null;
}
