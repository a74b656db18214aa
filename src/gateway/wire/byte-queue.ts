// Bytes received during a handshake, before the tunnel takes over. Grows by doubling so a message
// fed one byte per packet costs linear time; released as soon as the handshake ends.
const EMPTY = Buffer.alloc(0);

export class ByteQueue {
  private data: Buffer = EMPTY;
  private start = 0;
  private end = 0;

  get length(): number {
    return this.end - this.start;
  }

  append(chunk: Buffer): void {
    if (this.length === 0 && chunk.length > 0) {
      // Common case: the whole message in one packet; keep the packet itself, no copy.
      this.data = chunk;
      this.start = 0;
      this.end = chunk.length;
      return;
    }
    const need = this.length + chunk.length;
    if (this.end + chunk.length > this.data.length) {
      const next = Buffer.allocUnsafe(Math.max(need, Math.min(2 * this.data.length, need + 16 * 1024), 256));
      this.data.copy(next, 0, this.start, this.end);
      this.data = next;
      this.end = this.length;
      this.start = 0;
    }
    chunk.copy(this.data, this.end);
    this.end += chunk.length;
  }

  /** The queued bytes (a view: valid until the next append/consume). */
  view(): Buffer {
    return this.data.subarray(this.start, this.end);
  }

  consume(n: number): void {
    this.start = Math.min(this.end, this.start + n);
    if (this.start === this.end) this.clear();
  }

  /** Take everything queued (a copy-free view) and empty the queue. */
  takeAll(): Buffer {
    const out = this.view();
    this.clear();
    return out;
  }

  clear(): void {
    this.data = EMPTY;
    this.start = 0;
    this.end = 0;
  }
}
