// Many tunnels over one hop connection (docs/decisions.md#d-030 "The hop across the internet", "Many tunnels on one TLS connection").
// After the proof (wire.ts), both ends speak frames:
//   u8 type, u32 stream id, u32 payload length, payload
//   OPEN    entry → exit   a stream's first line: `DIAL …` or `UDP …` (wire.ts)
//   REPLY   exit → entry   its answer: `OK <egress address> [<port>]`, `OK udp` or `ERR <failure>` (an ERR ends the stream)
//   DATA    both ways      the stream's bytes, at most what the peer's window allows
//   END     both ways      no more DATA this way (a half-close); a stream is over when both ways ended
//   RESET   both ways      the stream is over at once (a socket destroyed, an idle timeout)
//   WINDOW  both ways      u32: the sender may send that many more bytes on the stream
//   PING / PONG            stream 0: 8 opaque bytes echoed (liveness, and the round trip a window grows by)
//   GOAWAY  exit → entry   no new stream on this connection (the exit is stopping, or the proof's secret expired)
// Each stream has its own window: a slow customer fills only its own (at most MAX_WINDOW bytes buffered),
// never the connection, so the others keep flowing. A window starts at INITIAL_WINDOW and doubles while
// its reader keeps up within a few round trips (a long link needs a large one), as yamux does.
import { EventEmitter } from 'node:events';
import { isIP } from 'node:net';
import type net from 'node:net';
import type tls from 'node:tls';
import { readInto } from '../relay/splice.js';

export const enum Frame {
  Open = 1,
  Reply = 2,
  Data = 3,
  End = 4,
  Reset = 5,
  Window = 6,
  Ping = 7,
  Pong = 8,
  GoAway = 9,
}

const HEADER = 9;
/** A stream's window at its start (both ends assume it), and the most it grows to. */
export const INITIAL_WINDOW = 256 * 1024;
export const MAX_WINDOW = 4 * 1024 * 1024;
/** The largest DATA frame sent (a larger write goes in several: streams take turns on the connection). */
const MAX_DATA = 128 * 1024;
/** The most handed to a stream's reader in one 'data' event. */
const DELIVER_MAX = 256 * 1024;
/** The largest control frame accepted (an OPEN line, a REPLY); more ends the connection. */
const MAX_CONTROL = 4096;
/** Bytes queued on the TLS connection past which streams hold their writes (and wait for its drain). */
const CONNECTION_HWM = 1024 * 1024;
/** Most streams open at once on one connection (an OPEN past it is refused; an entry opens another connection well before). */
export const MAX_STREAMS = 65_536;
/** A connection's read buffer: a TLS socket hands over one record (at most 16 KiB) per read. */
const READ_SIZE = 16 * 1024;
/** The slab flowing streams' bytes of one turn are copied into (see keep()). */
const SLAB = 1024 * 1024;
const EMPTY = Buffer.alloc(0);

// DATA bytes for readers that take them this turn: copied from the connection's read buffer into one slab
// (every connection's, this process), back to back, so a stream's bytes of one turn are one piece of it (no
// concatenation), and a read costs no allocation. At the end of the turn every stream has handed its piece
// on; a reader that takes bytes as the pump does (MuxStream.readWith: copied or written before it returns)
// gets its piece of the slab; a 'data' listener (which may keep it) gets a copy; so the slab is free for the
// next turn. Bytes still held (a reader that paused) are copied out first.
let slab = EMPTY;
let slabAt = 0;
/** Streams with bytes for their readers at the end of this turn. */
let due: MuxStream[] = [];

/** `piece` copied into the slab: where it starts. */
function keep(piece: Buffer): number {
  if (slab.length - slabAt < piece.length) {
    slab = Buffer.allocUnsafeSlow(Math.max(SLAB, piece.length));
    slabAt = 0;
  }
  const at = slabAt;
  piece.copy(slab, at);
  slabAt += piece.length;
  return at;
}

/** Hands `s`'s bytes to its reader once this turn's reads are done (see MuxStream.arrive). */
function later(s: MuxStream): void {
  if (due.push(s) === 1) setImmediate(deliverDue);
}

function deliverDue(): void {
  const list = due;
  due = [];
  for (const s of list) s.deliverNow();
  for (const s of list) s.unslab();
  slabAt = 0;
}

/** Whether `b` is a piece of this turn's slab. */
const inSlab = (b: Buffer): boolean => b.buffer === slab.buffer && slab !== EMPTY;

// Frames to send are written back to back into buffers of SEND_SIZE, each write a piece of one; a buffer
// every write of which is done (its callback came) is used again, so a busy connection allocates nothing per
// frame. A connection whose writes are all done gives its buffer back (an idle one holds none); a few are
// kept free (SEND_FREE: memory held when idle).
const SEND_SIZE = 512 * 1024;
const SEND_FREE = 4;

class SendBuffer {
  readonly buf = Buffer.allocUnsafeSlow(SEND_SIZE);
  /** Written up to here; `sent`: handed to the socket up to here. */
  at = 0;
  sent = 0;
  /** Writes not done yet. */
  pending = 0;
  /** No more frames go in (full, or its connection closed): free again once `pending` is 0. */
  retired = false;
  /** The connection writing into it. */
  owner: { out: SendBuffer | null } | null = null;
  readonly done = (): void => {
    if (--this.pending > 0) return;
    if (this.retired) return this.release();
    // All written, and nothing added since: the connection gives it back.
    if (this.at === this.sent && this.owner !== null && this.owner.out === this) {
      this.owner.out = null;
      this.release();
    }
  };

  retire(): void {
    this.retired = true;
    if (this.pending === 0) this.release();
  }

  private release(): void {
    this.at = 0;
    this.sent = 0;
    this.retired = false;
    this.owner = null;
    if (freeSend.length < SEND_FREE) freeSend.push(this);
  }
}
const freeSend: SendBuffer[] = [];

let pingSeq = 0;

/** The REPLY to an OPEN on a connection that takes no new stream (GOAWAY sent, or full): retried elsewhere. */
export const GOING_AWAY = 'going_away';

export interface MuxOptions {
  /** The exit's side: an OPEN arrived (the stream, its line). */
  onOpen?: (stream: MuxStream, line: string) => void;
  /** The exit said GOAWAY (entry side). */
  onGoAway?: () => void;
  /** The connection closed (either end, or a frame that is not this wire). */
  onClose?: () => void;
  /** Its last open stream ended. */
  onIdle?: () => void;
  /** PING the peer now and then for the round trip (the exit's side: its entry's probes give the entry's). */
  measureRtt?: boolean;
}

/** How often a side that measures the round trip itself PINGs (measureRtt). */
const RTT_EVERY_MS = 5_000;

/** One TLS hop connection carrying streams, on either end. */
export class MuxSession {
  readonly streams = new Map<number, MuxStream>();
  private nextId = 1;
  /** Streams holding bytes until the connection drains. */
  private readonly blocked = new Set<MuxStream>();
  private readonly pings = new Map<number, { at: number; done: (ok: boolean) => void }>();
  /** The last measured round trip (ms); 0: none yet. */
  rtt = 0;
  closed = false;
  /** No new stream on it (GOAWAY heard or sent, a retired certificate or secret). */
  draining = false;
  /** When the last frame arrived. */
  lastHeard = Date.now();
  // The frame reader: a header being read, then its payload (DATA handed on piece by piece as it arrives).
  private head = Buffer.alloc(HEADER);
  private headHave = 0;
  private type = 0;
  private id = 0;
  private left = 0;
  private control: Buffer[] = [];

  constructor(
    readonly socket: tls.TLSSocket,
    private readonly o: MuxOptions = {},
  ) {
    // What the proof's reader left (unshifted: frames right behind its line), then every read into a buffer
    // of its own (no allocation and no stream machinery per record); 'data' where Node offers no such switch.
    for (let c: Buffer | null; (c = socket.read() as Buffer | null) !== null;) this.read(c, c.length);
    const buffer = Buffer.allocUnsafeSlow(READ_SIZE);
    if (!readInto(socket, buffer, (n) => (this.read(buffer, n), true)))
      socket.on('data', (chunk: Buffer) => this.read(chunk, chunk.length));
    socket.on('drain', () => this.flushBlocked());
    socket.once('close', () => this.lost());
    socket.on('end', () => socket.end());
    socket.resume();
    if (o.measureRtt) {
      void this.ping(RTT_EVERY_MS);
      this.rttTimer = setInterval(() => void this.ping(RTT_EVERY_MS), RTT_EVERY_MS);
      this.rttTimer.unref();
    }
  }

  private rttTimer: NodeJS.Timeout | null = null;
  /** end() was called: a FIN is on its way, and the connection goes within its grace. */
  private ending = false;

  /** The buffer frames are written into now (null: none; SendBuffer sets it back to null when all of it is written). */
  out: SendBuffer | null = null;
  /** Frames are being added by one caller (writeCopy, flush): written to the socket in one write when it is done. */
  private batching = 0;

  /** Whether new streams may be opened on it. */
  usable(): boolean {
    return !this.closed && !this.draining && this.streams.size < MAX_STREAMS;
  }

  /** Entry side: a new stream whose OPEN says `line`; its REPLY comes to `answer()`. */
  open(line: string): MuxStream {
    const id = this.nextId++;
    const s = new MuxStream(this, id);
    this.streams.set(id, s);
    this.send(Frame.Open, id, Buffer.from(line, 'latin1'));
    return s;
  }

  /** A PING answered within `timeoutMs` (the round trip is kept for the windows). */
  ping(timeoutMs: number): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    return new Promise((resolve) => {
      const seq = ++pingSeq >>> 0;
      const sentAt = Date.now();
      // Not answered in time, but frames came meanwhile: the PONG waits behind a busy connection's data, and
      // the peer is there (a PING goes behind what is queued to send; the answer only says the path is alive).
      const timer = setTimeout(() => finish(this.lastHeard > sentAt && !this.closed), timeoutMs);
      const finish = (ok: boolean): void => {
        clearTimeout(timer);
        this.pings.delete(seq);
        resolve(ok);
      };
      this.pings.set(seq, { at: performance.now(), done: finish });
      const p = Buffer.alloc(8);
      p.writeUInt32BE(seq, 4);
      this.send(Frame.Ping, 0, p);
    });
  }

  goAway(): void {
    this.draining = true;
    this.send(Frame.GoAway, 0);
  }

  destroy(): void {
    this.socket.destroy();
  }

  /**
   * Closes after what is queued on it has gone (a FIN behind the last frames; the peer closes its side in
   * turn), or at once after `graceMs` (a peer that never answers the FIN).
   */
  end(graceMs = 10_000): void {
    if (this.closed || this.ending) return;
    this.ending = true;
    this.draining = true;
    this.socket.end();
    setTimeout(() => this.socket.destroy(), graceMs).unref();
  }

  /**
   * Writes one frame: header and payload copied into the send buffer, after the frames before it, and written
   * to the socket with them in one write (now, or at the end of a batch()): one TLS write for many frames, and
   * no allocation (a corked series of writes would go through writev, which copies them together again).
   */
  send(type: Frame, id: number, payload?: Uint8Array, from = 0, to = payload?.length ?? 0): void {
    if (this.closed || this.socket.destroyed) return;
    const n = to - from;
    let o = this.out;
    if (o === null || o.buf.length - o.at < HEADER + n) {
      if (o !== null) {
        this.push();
        o.retire();
      }
      o = this.out = freeSend.pop() ?? new SendBuffer();
      o.owner = this;
      if (o.buf.length < HEADER + n) throw new Error('hop frame larger than a send buffer'); // not made: DATA is at most MAX_DATA
    }
    const f = o.buf;
    const at = o.at;
    f[at] = type;
    f.writeUInt32BE(id, at + 1);
    f.writeUInt32BE(n, at + 5);
    if (n > 0) f.set(payload!.subarray(from, to), at + HEADER);
    o.at = at + HEADER + n;
    if (this.batching === 0) this.push();
  }

  /** Runs `fn`, whose frames go to the socket in one write at its end. */
  batch(fn: () => void): void {
    this.batching++;
    try {
      fn();
    } finally {
      if (--this.batching === 0) this.push();
    }
  }

  /** The frames added since the last write, in one write. */
  private push(): void {
    const o = this.out;
    if (o === null || o.at === o.sent || this.socket.destroyed) return;
    o.pending++;
    this.socket.write(o.buf.subarray(o.sent, o.at), o.done);
    o.sent = o.at;
  }

  sendWindow(id: number, n: number): void {
    const p = Buffer.allocUnsafe(4);
    p.writeUInt32BE(n);
    this.send(Frame.Window, id, p);
  }

  /** Whether the connection takes more now (else streams queue, and flush on its drain). */
  congested(): boolean {
    const o = this.out;
    return this.socket.writableLength + (o === null ? 0 : o.at - o.sent) > CONNECTION_HWM;
  }

  block(s: MuxStream): void {
    this.blocked.add(s);
  }

  private flushBlocked(): void {
    for (const s of this.blocked) {
      if (this.congested()) return;
      this.blocked.delete(s);
      s.flush();
    }
  }

  forget(id: number): void {
    const s = this.streams.get(id);
    if (!s || !this.streams.delete(id)) return;
    this.blocked.delete(s);
    if (this.streams.size === 0 && !this.closed) this.o.onIdle?.();
  }

  /** `end` bytes of `chunk` arrived; they are copied or handed on before this returns (the buffer is reused). */
  private read(chunk: Buffer, end: number): void {
    this.lastHeard = Date.now();
    let at = 0;
    while (at < end && !this.closed) {
      if (this.left === 0 && this.headHave < HEADER) {
        const n = Math.min(HEADER - this.headHave, end - at);
        chunk.copy(this.head, this.headHave, at, at + n);
        this.headHave += n;
        at += n;
        if (this.headHave < HEADER) return;
        this.type = this.head[0]!;
        this.id = this.head.readUInt32BE(1);
        this.left = this.head.readUInt32BE(5);
        if (this.type !== Frame.Data && this.left > MAX_CONTROL) return this.broken();
        if (this.left === 0) {
          this.headHave = 0;
          this.frame(Buffer.alloc(0));
        }
        continue;
      }
      const n = Math.min(this.left, end - at);
      const piece = chunk.subarray(at, at + n);
      at += n;
      this.left -= n;
      if (this.type === Frame.Data) {
        const s = this.streams.get(this.id);
        if (s) s.arrive(piece);
      } else this.control.push(Buffer.from(piece));
      if (this.left === 0) {
        this.headHave = 0;
        if (this.type !== Frame.Data) {
          const payload = this.control.length === 1 ? this.control[0]! : Buffer.concat(this.control);
          this.control = [];
          this.frame(payload);
        }
      }
    }
  }

  /** A whole frame other than DATA (or an empty DATA). */
  private frame(p: Buffer): void {
    const id = this.id;
    switch (this.type) {
      case Frame.Data:
        return;
      case Frame.Open: {
        if (!this.o.onOpen || id === 0 || this.streams.has(id)) return this.broken();
        // Not here (stopping, or full): an answer the entry retries on another connection, not a target's failure.
        if (this.draining || this.streams.size >= MAX_STREAMS)
          return this.send(Frame.Reply, id, Buffer.from(`ERR ${GOING_AWAY}`, 'latin1'));
        const s = new MuxStream(this, id);
        this.streams.set(id, s);
        this.o.onOpen(s, p.toString('latin1'));
        return;
      }
      case Frame.Reply:
        return this.streams.get(id)?.replied(p.toString('latin1'));
      case Frame.End:
        return void this.streams.get(id)?.ended();
      case Frame.Reset:
        return void this.streams.get(id)?.reset();
      case Frame.Window:
        if (p.length !== 4) return this.broken();
        return this.streams.get(id)?.credit(p.readUInt32BE(0));
      case Frame.Ping:
        return this.send(Frame.Pong, 0, p);
      case Frame.Pong: {
        if (p.length !== 8) return;
        const waiting = this.pings.get(p.readUInt32BE(4));
        if (!waiting) return;
        this.rtt = performance.now() - waiting.at;
        waiting.done(true);
        return;
      }
      case Frame.GoAway:
        this.draining = true;
        this.o.onGoAway?.();
        return;
      default:
        return this.broken();
    }
  }

  /** Not this wire: the connection ends (its streams with it). */
  private broken(): void {
    this.socket.destroy();
    this.lost();
  }

  private lost(): void {
    if (this.closed) return;
    this.closed = true;
    this.out?.retire();
    this.out = null;
    if (this.rttTimer) clearInterval(this.rttTimer);
    for (const p of [...this.pings.values()]) p.done(false);
    for (const s of [...this.streams.values()]) s.lost();
    this.streams.clear();
    this.blocked.clear();
    this.o.onClose?.();
  }
}

/**
 * One tunnel on a hop connection, shaped as the pump (relay/splice.ts), the forward exchange and the UDP
 * frames use a socket: write/end/destroy, 'data'/'end'/'drain'/'close', pause/resume, setTimeout.
 */
export class MuxStream extends EventEmitter {
  destroyed = false;
  readableEnded = false;
  writableEnded = false;
  /** Entry side: the exit's REPLY, once. */
  private onReply: ((line: string | null) => void) | null = null;
  /** Entry side: the exit's egress socket for this tunnel, as its REPLY names it (null: not named). */
  private egress: { address: string; port: number | undefined } | null = null;
  // Reading: what arrived while paused, and the window given to the peer.
  private flowing: boolean | null = null;
  private readonly inbox: Buffer[] = [];
  /** This turn's bytes so far, when they went to the slab: slab() from `runStart` to `runEnd` (runBuf null: none). */
  private runBuf: Buffer | null = null;
  private runStart = 0;
  private runEnd = 0;
  private inboxEnd = false;
  private window = INITIAL_WINDOW;
  /** Bytes the peer may still send now. */
  private allowance = INITIAL_WINDOW;
  /** Bytes handed to the reader since the last WINDOW. */
  private consumed = 0;
  private lastGrant = performance.now();
  // Writing: what waits for the peer's window or the connection's drain.
  private sendable = INITIAL_WINDOW;
  private readonly outbox: Buffer[] = [];
  private outBytes = 0;
  private endQueued = false;
  private endSent = false;
  private needDrain = false;
  private idleMs = 0;
  private idleTimer: NodeJS.Timeout | null = null;
  private activity = 0;
  private seenActivity = 0;

  constructor(
    private readonly session: MuxSession,
    readonly id: number,
  ) {
    super();
    this.on('newListener', (event: string) => {
      if (event === 'data' && this.flowing !== false) process.nextTick(() => this.flowing !== false && this.resume());
    });
  }

  // What callers read of a socket. Local: the exit's egress socket, as its REPLY named it (a SOCKS5 reply's BND;
  // the hop connection's own end would name the entry's side of the hop). Remote: the hop connection's.
  get localAddress(): string | undefined {
    return this.egress?.address;
  }
  get localPort(): number | undefined {
    return this.egress?.port;
  }
  get localFamily(): string | undefined {
    return this.egress ? (this.egress.address.includes(':') ? 'IPv6' : 'IPv4') : undefined;
  }
  get remoteAddress(): string | undefined {
    return this.session.socket.remoteAddress;
  }
  get remotePort(): number | undefined {
    return this.session.socket.remotePort;
  }
  get writableLength(): number {
    return this.outBytes;
  }
  get writableFinished(): boolean {
    return this.endSent;
  }
  /** Not a descriptor the pump may write to directly (relay/splice.ts). */
  readonly encrypted = true;

  /** Entry side: waits for the exit's REPLY (null: the connection went, or `timeoutMs` passed). */
  answer(timeoutMs: number): Promise<string | null> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => settle(null), timeoutMs);
      const settle = (line: string | null): void => {
        clearTimeout(timer);
        this.onReply = null;
        resolve(line);
      };
      this.onReply = settle;
      if (this.destroyed) settle(null);
    });
  }

  /** Exit side: the answer to the OPEN. An ERR ends the stream (both ends forget it, nothing more is sent). */
  reply(line: string): void {
    if (this.destroyed) return;
    this.session.send(Frame.Reply, this.id, Buffer.from(line, 'latin1'));
    if (line.startsWith('ERR')) this.finish(false, false);
  }

  replied(line: string): void {
    const [ok, address, port] = line.split(' ');
    if (ok === 'OK' && address !== undefined && isIP(address) !== 0) {
      const p = Number(port);
      this.egress = { address, port: Number.isInteger(p) && p > 0 && p < 65536 ? p : undefined };
    }
    this.onReply?.(line);
    if (!line.startsWith('OK')) this.finish(false, false); // the exit forgot it already
  }

  // ---- reading
  /**
   * A DATA frame's bytes (or part of them): kept, and handed to the reader at the end of this turn of the event
   * loop together with whatever else arrives in it (a TLS connection yields at most 16 KiB per read; one
   * write of their sum costs the reader a system call instead of one each).
   */
  arrive(piece: Buffer): void {
    if (this.destroyed || this.inboxEnd) return;
    this.allowance -= piece.length;
    if (this.allowance < 0) {
      this.destroy(); // past the window it was given: not this wire
      return;
    }
    this.activity++;
    // `piece` is the connection's read buffer: copied. A reader that takes it this turn gets it in the slab,
    // after this turn's bytes before it; bytes a paused reader holds get a buffer of their own (a slab is
    // not kept alive for them).
    if (this.flowing !== true) {
      this.seal();
      this.inbox.push(Buffer.from(piece));
      return;
    }
    const first = this.runBuf === null;
    const at = keep(piece);
    // One piece per turn, at most DELIVER_MAX (a reader that pauses holds the rest, copied out of the slab).
    if (this.runBuf === slab && this.runEnd === at && this.runEnd - this.runStart + piece.length <= DELIVER_MAX)
      this.runEnd += piece.length;
    else {
      this.seal();
      this.runBuf = slab;
      this.runStart = at;
      this.runEnd = at + piece.length;
    }
    if (first) later(this);
  }

  /** Bytes not handed to the reader yet. */
  private holding(): boolean {
    return this.inbox.length > 0 || this.runBuf !== null;
  }

  /** This turn's run of slab bytes joins the inbox as one piece. */
  private seal(): void {
    if (this.runBuf === null) return;
    this.inbox.push(this.runBuf.subarray(this.runStart, this.runEnd));
    this.runBuf = null;
  }

  /** Bytes a paused reader holds in the slab: copied out before the slab is used again (deliverDue). */
  unslab(): void {
    this.seal();
    for (let i = 0; i < this.inbox.length; i++) if (inSlab(this.inbox[i]!)) this.inbox[i] = Buffer.from(this.inbox[i]!);
  }

  /** The turn's end (deliverDue): what arrived goes to the reader in one piece, then its END. */
  deliverNow(thenEnd = true): void {
    this.seal();
    while (this.inbox.length > 0 && this.flowing === true && !this.destroyed) {
      // At most DELIVER_MAX at a time: a reader that backs up (and pauses) holds no more than that of it.
      let n = 0;
      let k = 0;
      while (k < this.inbox.length && n + this.inbox[k]!.length <= DELIVER_MAX) n += this.inbox[k++]!.length;
      if (k === 0) k = 1;
      const all = k === 1 ? this.inbox[0]! : Buffer.concat(this.inbox.slice(0, k), n);
      this.inbox.splice(0, k);
      this.deliver(all);
    }
    if (thenEnd && this.inbox.length === 0 && this.inboxEnd && this.flowing === true && !this.destroyed)
      this.finishReading();
    // The reader keeps up again: what it took since the last WINDOW is given back now.
    if (this.flowing === true && !this.destroyed && this.consumed >= this.window >>> 1) this.grant();
  }

  private deliver(piece: Buffer): void {
    if (this.sink !== null) {
      if (!this.sink.call(this.asSocket(), piece.length, piece)) this.flowing = false;
    } else this.emit('data', inSlab(piece) ? Buffer.from(piece) : piece);
    this.consumed += piece.length;
    // Credit goes back only while the reader keeps up: one that paused (its customer stopped reading) gets its
    // bytes held here, at most the window, and the peer waits; resume() gives the credit back.
    if (this.consumed >= this.window >>> 1 && this.flowing === true && !this.destroyed) this.grant();
  }

  /** Gives the peer back what the reader took; doubles the window while the reader keeps up within a few round trips. */
  private grant(): void {
    const now = performance.now();
    let n = this.consumed;
    const rtt = this.session.rtt;
    if (this.window < MAX_WINDOW && rtt > 0 && now - this.lastGrant < 4 * rtt + 1) {
      n += this.window;
      this.window *= 2;
    }
    this.lastGrant = now;
    this.consumed = 0;
    this.allowance += n;
    this.session.sendWindow(this.id, n);
  }

  ended(): void {
    if (this.destroyed || this.inboxEnd) return;
    this.inboxEnd = true;
    if (this.flowing === true && !this.holding()) this.finishReading();
    // Else the reader gets it after the bytes before it (deliverNow, or resume).
  }

  private finishReading(): void {
    if (this.readableEnded) return;
    this.readableEnded = true;
    this.emit('end');
    this.maybeClosed();
  }

  pause(): this {
    this.flowing = false;
    return this;
  }

  resume(): this {
    if (this.destroyed) return this;
    this.flowing = true;
    this.deliverNow();
    return this;
  }

  isPaused(): boolean {
    return this.flowing === false;
  }

  /**
   * Bytes go to `sink(n, buf)` instead of 'data' (what a socket's `onread` does): the first `n` bytes of `buf`
   * are the sink's until it returns (it copies what it keeps); false pauses the stream, resume() goes on.
   */
  readWith(sink: (this: net.Socket, n: number, buf: Buffer) => boolean): void {
    this.sink = sink;
  }

  private sink: ((this: net.Socket, n: number, buf: Buffer) => boolean) | null = null;

  /** Nothing is ever held for read(): bytes go to 'data'. */
  read(): null {
    return null;
  }

  // ---- writing
  write(data: Buffer | string, cb?: (err?: Error | null) => void): boolean {
    if (this.destroyed || this.writableEnded) return false;
    const b = typeof data === 'string' ? Buffer.from(data, 'latin1') : data;
    this.activity++;
    if (b.length > 0) {
      this.outbox.push(b);
      this.outBytes += b.length;
    }
    this.flush();
    if (cb) process.nextTick(cb);
    if (this.outBytes > 0) this.needDrain = true;
    return this.outBytes === 0;
  }

  end(data?: Buffer | string | (() => void), cb?: () => void): this {
    if (typeof data === 'function') [cb, data] = [data, undefined];
    if (data !== undefined) this.write(data);
    if (!this.writableEnded) {
      this.writableEnded = true;
      this.endQueued = true;
      this.flush();
    }
    if (cb) process.nextTick(cb);
    return this;
  }

  /**
   * The pump's write (relay/splice.ts): `n` bytes of its read buffer, copied once, straight into frames when
   * the window and the connection take them (else queued, as write() does).
   */
  writeCopy(buf: Buffer, n: number): boolean {
    if (this.destroyed || this.writableEnded) return false;
    this.activity++;
    let at = 0;
    // A connection that takes more takes the whole read (the window allowing): it may go past its mark by one
    // read, and the pump then waits for its drain, rather than this read being copied into a queue here and
    // copied again into frames later.
    if (this.outBytes === 0 && this.sendable > 0 && !this.session.congested()) {
      this.session.batch(() => {
        while (at < n && this.sendable > 0) {
          const k = Math.min(n - at, this.sendable, MAX_DATA);
          this.session.send(Frame.Data, this.id, buf, at, at + k);
          this.sendable -= k;
          at += k;
        }
      });
    }
    if (at === n) {
      if (!this.session.congested()) return true;
      this.needDrain = true;
      this.session.block(this);
      return false;
    }
    const rest = Buffer.allocUnsafe(n - at);
    buf.copy(rest, 0, at, n);
    this.outbox.push(rest);
    this.outBytes += rest.length;
    this.needDrain = true;
    if (this.sendable > 0) this.session.block(this);
    return this.outBytes < MAX_DATA * 2;
  }

  /** Sends what the peer's window and the connection take now. */
  flush(): void {
    if (this.destroyed) return;
    if (this.outBytes > 0 && this.sendable > 0) this.session.batch(() => this.sendQueued());
    if (this.outBytes > 0) {
      if (this.sendable > 0) this.session.block(this);
      return;
    }
    if (this.endQueued && !this.endSent) {
      this.endSent = true;
      this.session.send(Frame.End, this.id);
      this.emit('finish');
      this.maybeClosed();
    }
    if (this.needDrain && !this.destroyed) {
      this.needDrain = false;
      this.emit('drain');
    }
  }

  /** What is queued, as far as the peer's window and the connection take it. */
  private sendQueued(): void {
    while (this.outBytes > 0 && this.sendable > 0 && !this.session.congested()) {
      const head = this.outbox[0]!;
      const n = Math.min(head.length, this.sendable, MAX_DATA);
      this.session.send(Frame.Data, this.id, head, 0, n);
      if (n === head.length) this.outbox.shift();
      else this.outbox[0] = head.subarray(n);
      this.sendable -= n;
      this.outBytes -= n;
    }
  }

  credit(n: number): void {
    if (this.destroyed) return;
    this.sendable += n;
    this.flush();
  }

  private maybeClosed(): void {
    if (this.endSent && this.readableEnded && !this.destroyed) this.finish(false, false);
  }

  // ---- ending
  /** A socket's idle timeout: 'timeout' (and `cb`) when nothing moved either way for `ms`; 0 turns it off. */
  setTimeout(ms: number, cb?: () => void): this {
    if (cb) this.once('timeout', cb);
    this.idleMs = ms;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
    if (ms > 0 && !this.destroyed) this.armIdle();
    return this;
  }

  private armIdle(): void {
    this.seenActivity = this.activity;
    this.idleTimer = setTimeout(() => {
      this.idleTimer = null;
      if (this.destroyed) return;
      if (this.activity !== this.seenActivity) return this.armIdle();
      this.emit('timeout');
      if (!this.destroyed && this.idleMs > 0) this.armIdle();
    }, this.idleMs);
    this.idleTimer.unref();
  }

  setNoDelay(): this {
    return this;
  }
  setKeepAlive(): this {
    return this;
  }
  ref(): this {
    return this;
  }
  unref(): this {
    return this;
  }

  /** The peer reset it. */
  reset(): void {
    // What came before the RESET is the reader's (an answer sent just before the target reset, as a direct
    // connection delivers it): handed on first when the reader takes it now.
    if (this.holding() && this.flowing === true) this.deliverNow(false); // no 'end': it was reset, not ended
    this.finish(true, false);
  }

  /** The connection under it went. */
  lost(): void {
    // Over on the wire both ways (its END sent, the peer's received): what is left is this end's own, handed
    // to the reader as usual (a peer closes a connection after its last stream, and that FIN can arrive in the
    // same read as the stream's last bytes).
    if (this.inboxEnd && this.endSent) {
      if (this.flowing === true) this.deliverNow();
      return;
    }
    if (this.holding() && this.flowing === true) this.deliverNow(false); // what arrived before the loss
    this.finish(true, false);
  }

  destroy(): this {
    this.finish(false, true);
    return this;
  }

  /** Over: forgotten by the session, 'close' on the next turn (`hadError`: reset or lost), a RESET sent if the peer may still be using it. */
  private finish(hadError: boolean, tellPeer: boolean): void {
    if (this.destroyed) return;
    this.destroyed = true;
    if (tellPeer && !(this.endSent && this.readableEnded)) this.session.send(Frame.Reset, this.id);
    this.session.forget(this.id);
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.inbox.length = 0;
    this.runBuf = null;
    this.outbox.length = 0;
    this.outBytes = 0;
    this.onReply?.(null);
    // After this turn's promise continuations (not on the next tick): a stream reset right after its REPLY is
    // handed to the pump first, which must hear its 'close'.
    setImmediate(() => {
      if (hadError && this.listenerCount('error') > 0)
        this.emit('error', Object.assign(new Error('hop stream reset'), { code: 'ECONNRESET' }));
      this.emit('close', hadError);
    });
  }

  /** What the pump and the forward exchange take it as. */
  asSocket(): net.Socket {
    return this as unknown as net.Socket;
  }
}
