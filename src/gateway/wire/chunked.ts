// Incremental scanner that finds where a chunked request body ends (RFC 9112 7.1), so the forward
// path relays exactly the body and nothing after it. It does not decode: bytes pass through as sent.

export type ChunkedError = 'bad_chunk_size' | 'bad_chunk_framing' | 'line_too_long';

export type ChunkedStep = { consumed: number; done: boolean } | { error: ChunkedError };

// Scanner states.
const S = {
  Size: 0,
  Ext: 1,
  SizeLf: 2,
  Data: 3,
  DataCr: 4,
  DataLf: 5,
  TrailerStart: 6,
  Trailer: 7,
  TrailerLf: 8,
  FinalLf: 9,
  Done: 10,
  ExtWs: 11,
} as const;
type State = (typeof S)[keyof typeof S];

const MAX_LINE = 4096;
const MAX_SIZE_DIGITS = 12; // < 2^48: safe integers, and no one sends a bigger chunk

function hexValue(b: number): number {
  if (b >= 0x30 && b <= 0x39) return b - 0x30;
  if (b >= 0x41 && b <= 0x46) return b - 0x37;
  if (b >= 0x61 && b <= 0x66) return b - 0x57;
  return -1;
}

export class ChunkedScanner {
  private state: State = S.Size;
  private size = 0;
  private digits = 0;
  private lineLen = 0;

  get done(): boolean {
    return this.state === S.Done;
  }

  /** Feed the next bytes; `consumed` is how many of them belong to the body. */
  feed(buf: Uint8Array): ChunkedStep {
    let i = 0;
    const n = buf.length;
    while (i < n) {
      const b = buf[i] as number;
      switch (this.state) {
        case S.Size: {
          const h = hexValue(b);
          if (h >= 0) {
            if (++this.digits > MAX_SIZE_DIGITS) return { error: 'bad_chunk_size' };
            this.size = this.size * 16 + h;
            i++;
            break;
          }
          if (this.digits === 0) return { error: 'bad_chunk_size' };
          if (b === 0x0d) this.state = S.SizeLf;
          else if (b === 0x3b) {
            this.state = S.Ext;
            this.lineLen = 0;
          } else if (b === 0x20 || b === 0x09) {
            this.state = S.ExtWs;
            this.lineLen = 0;
          } else return { error: 'bad_chunk_size' };
          i++;
          break;
        }
        case S.ExtWs: // BWS between the size and ';' only (RFC 9112 7.1.1)
          if (b === 0x3b) this.state = S.Ext;
          else if ((b !== 0x20 && b !== 0x09) || ++this.lineLen > MAX_LINE) return { error: 'bad_chunk_size' };
          i++;
          break;
        case S.Ext:
          if (b === 0x0d) this.state = S.SizeLf;
          else if (b === 0x0a || (b < 0x20 && b !== 0x09) || b === 0x7f) return { error: 'bad_chunk_framing' };
          else if (++this.lineLen > MAX_LINE) return { error: 'line_too_long' };
          i++;
          break;
        case S.SizeLf:
          if (b !== 0x0a) return { error: 'bad_chunk_framing' };
          i++;
          this.digits = 0;
          if (this.size === 0) {
            this.state = S.TrailerStart;
          } else this.state = S.Data;
          break;
        case S.Data: {
          const take = Math.min(this.size, n - i);
          i += take;
          this.size -= take;
          if (this.size === 0) this.state = S.DataCr;
          break;
        }
        case S.DataCr:
          if (b !== 0x0d) return { error: 'bad_chunk_framing' };
          this.state = S.DataLf;
          i++;
          break;
        case S.DataLf:
          if (b !== 0x0a) return { error: 'bad_chunk_framing' };
          this.state = S.Size;
          this.size = 0;
          i++;
          break;
        case S.TrailerStart:
          if (b === 0x0d) this.state = S.FinalLf;
          else if (b === 0x0a || b < 0x20 || b === 0x7f) return { error: 'bad_chunk_framing' };
          else {
            this.state = S.Trailer;
            this.lineLen = 1;
          }
          i++;
          break;
        case S.Trailer:
          if (b === 0x0d) this.state = S.TrailerLf;
          else if (b === 0x0a || (b < 0x20 && b !== 0x09) || b === 0x7f) return { error: 'bad_chunk_framing' };
          else if (++this.lineLen > MAX_LINE) return { error: 'line_too_long' };
          i++;
          break;
        case S.TrailerLf:
          if (b !== 0x0a) return { error: 'bad_chunk_framing' };
          this.state = S.TrailerStart;
          i++;
          break;
        case S.FinalLf:
          if (b !== 0x0a) return { error: 'bad_chunk_framing' };
          this.state = S.Done;
          return { consumed: i + 1, done: true };
        case S.Done:
          return { consumed: i, done: true };
      }
    }
    return { consumed: n, done: false };
  }
}
