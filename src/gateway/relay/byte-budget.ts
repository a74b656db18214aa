// A byte budget: what this node may still relay for one limited account or proxy user before the
// fleet's usage has been confirmed again. The daemon's plan enforcer grants it (at most a few MiB, never more
// than the limit leaves) after this node's usage is flushed and the fleet's read back; the pump takes from it
// as bytes pass and, when it runs out, parks the reader until the next grant. So no node relays more than one
// grant past what the fleet has confirmed: the overshoot past a limit is at most one grant per node.
//
// Unlimited connections carry no budget (null): their pump does one null check per read.

export class ByteBudget {
  /** Bytes this node may still relay before it asks again (may go below 0 on the forward path). */
  remaining = 0;
  /** Bytes taken since the budget was made (monotonic). */
  taken = 0;
  private waiters: Array<() => void> = [];
  private asked = false;

  /**
   * @param parent the account's budget when this is a proxy user's: both must have room.
   * @param onEmpty asks for a new grant: once per grant when it falls under `lowMark`, and whenever a reader parks.
   */
  constructor(
    readonly parent: ByteBudget | null,
    private readonly onEmpty: () => void,
    private readonly lowMark = 0,
  ) {}

  /** Bytes that may pass now. */
  available(): number {
    const own = this.remaining;
    if (this.parent === null) return own;
    const p = this.parent.available();
    return p < own ? p : own;
  }

  take(n: number): void {
    this.remaining -= n;
    this.taken += n;
    if (this.remaining < this.lowMark && !this.asked) {
      this.asked = true;
      this.onEmpty();
    }
    if (this.parent !== null) this.parent.take(n);
  }

  /** Calls `resume` after the next grant (to this budget or its parent); asks for that grant now. */
  park(resume: () => void): void {
    this.waiters.push(resume);
    if (this.parent !== null) this.parent.park(resume);
    this.onEmpty();
  }

  /** A new grant: room for `bytes` more; parked readers look again. */
  refill(bytes: number): void {
    this.remaining = bytes;
    this.asked = false;
    this.wake();
  }

  /** Parked readers look again (they park again if there is still no room). */
  wake(): void {
    if (this.waiters.length === 0) return;
    const w = this.waiters;
    this.waiters = [];
    for (const resume of new Set(w)) resume();
  }

  get parked(): number {
    return this.waiters.length;
  }
}
