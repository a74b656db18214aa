// The tunnel pump shared by CONNECT and SOCKS5: bytes both ways with backpressure, half-close
// passed through (a FIN one way keeps the other way delivering until it ends), an idle timeout,
// and both sockets released on every path.
//
// Work per chunk is the product here (docs/benchmarks/gateway.md): each socket reads into one buffer shared
// by every tunnel (`useUserBuffer`, what `net.Socket`'s `onread` option does), and each chunk is
// written straight to the other socket's descriptor; only what the kernel does not take at once is
// copied and queued on the stream, and the reader pauses when that queue is full. No allocation,
// closure, timer refresh or stream machinery per chunk on the fast path.
//
// Listeners are module-level functions that find their tunnel through the socket (`this`), so an
// idle tunnel costs one small object instead of a dozen closures: memory per tunnel is the product too.
import fs from 'node:fs';
import net from 'node:net';
import type { ByteBudget } from './byte-budget.js';
import type { RateBudget } from './rate-budget.js';
import type { Tunnels } from './open-tunnels.js';
import { destroySelf } from './sockets.js';

// Bytes one side may have queued in user space before the other side is paused. Only a stalled (or
// slower) peer ever fills it: a kernel that keeps up takes every chunk straight from the read buffer.
const MAX_PENDING = 256 * 1024;
// One read buffer for every tunnel: a read's bytes are written (or copied) before the next read.
const READ_SIZE = 256 * 1024;
const shared = Buffer.allocUnsafe(READ_SIZE);

const kTunnel = Symbol('tunnel');

/** What the pump needs of the connection it serves: a customer's (conn.ts), or an exit's hop connection (hop/server.ts). */
export interface SpliceOwner {
  readonly socket: net.Socket;
  upstream: net.Socket | null;
  /** Under a traffic limit: every relayed byte is taken from it (byte-budget.ts); null: none. */
  budget: ByteBudget | null;
  /** Under a rate limit: every relayed byte is taken from its direction's bucket (rate-budget.ts); null: none. */
  rate: RateBudget | null;
  bytesUp: number;
  bytesDown: number;
  readonly core: { readonly tunnels: Tunnels; readonly limits: { readonly idleTimeoutMs: number } };
  /**
   * Takes the owner's own EOF listener off its socket as the pump takes it over (a customer's handshake listener). An
   * owner that has this keeps its 'error' listener on the socket, and that listener destroys both sockets (conn.ts's
   * destroy); one without it gets the pump's.
   */
  releaseSocket?(): void;
}

export interface Tunnel {
  /** Its place in the open tunnels (live-set.ts). */
  liveIndex: number;
  conn: SpliceOwner;
  client: TunnelSocket;
  upstream: TunnelSocket;
  /** Bytes moved since the idle sweep last looked (0: idle during that period). */
  active: number;
  idleSweeps: number;
  /** Bytes read from the client (heldUp) or the target (heldDown) that wait for the byte budget's next grant or the rate's refill. */
  heldUp: Buffer | null;
  heldDown: Buffer | null;
  /** The sides whose 'drain' the pump listens for (1: the client, 2: the upstream): only those that ever backed up. */
  drains: number;
}

type TunnelSocket = net.Socket & {
  [kTunnel]?: Tunnel;
  _handle?: StreamHandle | null;
  encrypted?: boolean;
  writeCopy?: (buf: Buffer, n: number) => boolean;
  readWith?: (sink: (this: net.Socket, n: number, buf: Buffer) => boolean) => void;
};
interface StreamHandle {
  fd?: number;
  reading?: boolean;
  useUserBuffer?: (buf: Uint8Array) => void;
}

// Node keeps the `onread` state of a socket under these symbols; found once from a probe socket, so
// a socket accepted by a server (which has no `onread` option) can be switched to it after the fact.
const onreadKeys = ((): { buffer: symbol; callback: symbol; gen: symbol } | null => {
  const probe = new net.Socket({ onread: { buffer: Buffer.alloc(1), callback: () => true } });
  const find = (name: string): symbol | undefined =>
    Object.getOwnPropertySymbols(probe).find((s) => s.description === name);
  const buffer = find('kBuffer');
  const callback = find('kBufferCb');
  const gen = find('kBufferGen');
  probe.destroy();
  return buffer && callback && gen ? { buffer, callback, gen } : null;
})();

function otherSide(t: Tunnel, s: TunnelSocket): TunnelSocket {
  return s === t.client ? t.upstream : t.client;
}

/** `dst` backed up (its reader is to pause): from now on its 'drain' resumes the other side (onDrain). */
function backedUp(dst: TunnelSocket): false {
  const t = dst[kTunnel] as Tunnel;
  const bit = dst === t.client ? 1 : 2;
  if ((t.drains & bit) === 0) {
    t.drains |= bit;
    dst.on('drain', onDrain);
  }
  return false;
}

/** Send bytes on: straight to the kernel when nothing is queued, else (or for what it left) a copy. */
function relay(dst: TunnelSocket, buf: Buffer, n: number): boolean {
  // A stream that frames what it writes (a hop stream) copies the bytes into its frames itself: one copy, not two.
  if (dst.writeCopy !== undefined) return (dst.writeCopy(buf, n) && dst.writableLength < MAX_PENDING) || backedUp(dst);
  let written = 0;
  // A TLS socket (the hop) has a descriptor under its TLS layer: bytes written there would skip the encryption.
  const fd = dst.encrypted === true ? -1 : (dst._handle?.fd ?? -1);
  if (dst.writableLength === 0 && fd >= 0 && !dst.writableEnded) {
    try {
      written = fs.writeSync(fd, buf, 0, n);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') {
        dst.destroy();
        return false;
      }
    }
    if (written === n) return true;
  }
  const rest = Buffer.allocUnsafe(n - written);
  buf.copy(rest, 0, written, n);
  dst.write(rest);
  return dst.writableLength < MAX_PENDING || backedUp(dst);
}

// Called by Node for every read (`this` is the socket); false pauses the reader until the peer drains.
function onRead(this: TunnelSocket, n: number, buf: Buffer): boolean {
  const t = this[kTunnel] as Tunnel;
  const conn = t.conn;
  if (conn.budget !== null || conn.rate !== null) {
    if (held(t, this) !== null || roomFor(t, this) < n) return overBudget(t, this, buf, n);
    takeFor(t, this, n);
  }
  t.active += n;
  if (this === t.client) conn.bytesUp += n;
  else conn.bytesDown += n;
  return relay(otherSide(t, this), buf, n);
}

// Under a traffic limit (byte-budget.ts) or a rate limit (rate-budget.ts): what both allow goes on, the rest is
// held (a copy of one read) and the reader parks until the next grant or refill. Only limited tunnels come here.
function held(t: Tunnel, s: TunnelSocket): Buffer | null {
  return s === t.client ? t.heldUp : t.heldDown;
}

function setHeld(t: Tunnel, s: TunnelSocket, b: Buffer | null): void {
  if (s === t.client) t.heldUp = b;
  else t.heldDown = b;
}

/** Bytes this side may pass now: the traffic budget's room and its direction's rate, whichever is less. */
function roomFor(t: Tunnel, s: TunnelSocket): number {
  const { budget, rate } = t.conn;
  let room = budget === null ? Infinity : budget.available();
  if (rate !== null) {
    const r = (s === t.client ? rate.up : rate.down).available();
    if (r < room) room = r;
  }
  return room;
}

function takeFor(t: Tunnel, s: TunnelSocket, n: number): void {
  const { budget, rate } = t.conn;
  if (budget !== null) budget.take(n);
  if (rate !== null) (s === t.client ? rate.up : rate.down).take(n);
}

/** Waits on whichever is short: the traffic budget (its next grant) or the direction's rate (its refill). */
function parkFor(t: Tunnel, s: TunnelSocket): void {
  const { budget, rate } = t.conn;
  const resume = (): void => unpark(t, s);
  if (budget !== null && budget.available() <= 0) budget.park(resume);
  else if (rate !== null) (s === t.client ? rate.up : rate.down).park(resume);
  // Neither is short any more (a limit lifted meanwhile): look again on the next turn.
  else setImmediate(resume);
}

function pass(t: Tunnel, s: TunnelSocket, buf: Buffer, n: number): boolean {
  takeFor(t, s, n);
  t.active += n;
  if (s === t.client) t.conn.bytesUp += n;
  else t.conn.bytesDown += n;
  return relay(otherSide(t, s), buf, n);
}

function overBudget(t: Tunnel, s: TunnelSocket, buf: Buffer, n: number): false {
  const waiting = held(t, s);
  if (waiting !== null) {
    // Already parked (a read that was under way): keep its bytes behind the others.
    setHeld(t, s, Buffer.concat([waiting, buf.subarray(0, n)]));
    return false;
  }
  const room = Math.max(0, Math.min(roomFor(t, s), n));
  if (room > 0) pass(t, s, buf, room);
  setHeld(t, s, Buffer.from(buf.subarray(room, n)));
  parkFor(t, s);
  return false;
}

function unpark(t: Tunnel, s: TunnelSocket): void {
  const rest = held(t, s);
  if (rest === null || s.destroyed) return;
  // A limit lifted while it waited (the plan tables changed): no budget or rate any more, everything goes on.
  const room = Math.min(roomFor(t, s), rest.length);
  if (room <= 0) {
    parkFor(t, s);
    return;
  }
  const flowing = pass(t, s, rest, room);
  if (room < rest.length) {
    setHeld(t, s, rest.subarray(room));
    parkFor(t, s);
    return;
  }
  setHeld(t, s, null);
  // Its FIN came before the pump took over (the request's own): pass it on after its bytes.
  if (s.readableEnded) otherSide(t, s).end();
  // Else the other side's drain resumes it.
  else if (flowing) s.resume();
}

// Fallback when the runtime has no user-buffer reads: ordinary 'data' events, same relay.
function onData(this: TunnelSocket, chunk: Buffer): void {
  if (!onRead.call(this, chunk.length, chunk)) this.pause();
}

function onDrain(this: TunnelSocket): void {
  const t = this[kTunnel] as Tunnel;
  const other = otherSide(t, this);
  // A reader parked on the byte budget or the rate stays parked until its grant or refill.
  if (held(t, other) === null) other.resume();
}

// Half-close: pass each FIN on; each socket closes itself once both of its directions are done.
function onEnd(this: TunnelSocket): void {
  const t = this[kTunnel] as Tunnel;
  otherSide(t, this).end();
}

// An error or reset on either side, or the idle timeout, ends the tunnel at once.
function destroyBoth(this: TunnelSocket): void {
  const t = this[kTunnel] as Tunnel;
  t.client.destroy();
  t.upstream.destroy();
}

function onClientClose(this: TunnelSocket, hadError: boolean): void {
  const t = this[kTunnel] as Tunnel;
  t.conn.core.tunnels.delete(t);
  if (hadError || !t.upstream.readableEnded) t.upstream.destroy();
  // Upstream may still flush the client's last bytes: it gets its own idle limit for that.
  else {
    t.upstream.setTimeout(t.conn.core.limits.idleTimeoutMs);
    t.upstream.on('timeout', destroyBoth);
  }
}

function onUpstreamClose(this: TunnelSocket, hadError: boolean): void {
  const t = this[kTunnel] as Tunnel;
  if (hadError || !t.client.readableEnded) t.client.destroy();
}

/**
 * Switches `s`'s reads to `buffer` (what `net.Socket`'s `onread` option does): each read lands there and
 * `callback(n, buffer)` is called (false pauses the socket), with no allocation and no stream machinery per read.
 * The bytes are the callback's until it returns. False (nothing changed) when this Node has no such switch.
 */
export function readInto(
  s: net.Socket,
  buffer: Buffer,
  callback: (this: net.Socket, n: number, buf: Buffer) => boolean,
): boolean {
  const handle = (s as TunnelSocket)._handle;
  if (!onreadKeys || !handle?.useUserBuffer) return false;
  const fields = s as unknown as Record<symbol, unknown>;
  fields[onreadKeys.buffer] = buffer;
  fields[onreadKeys.callback] = callback;
  fields[onreadKeys.gen] = null;
  handle.useUserBuffer(buffer);
  return true;
}

/** Everything a socket read before the pump took over (it was paused), then its reads go to `onRead`. */
function takeOver(s: TunnelSocket): void {
  for (let chunk: Buffer | null; (chunk = s.read() as Buffer | null) !== null;) onRead.call(s, chunk.length, chunk);
  const reader = onRead as (this: net.Socket, n: number, buf: Buffer) => boolean;
  // A hop stream hands its bytes over the same way (hop/mux.ts, readWith).
  if (s.readWith !== undefined) s.readWith(reader);
  else if (s.encrypted === true || !readInto(s, shared, reader)) s.on('data', onData);
}

export function splice(conn: SpliceOwner, upstream: net.Socket, earlyData: Buffer): void {
  const client = conn.socket as TunnelSocket;
  const up = upstream as TunnelSocket;
  conn.upstream = upstream;
  const t: Tunnel = {
    liveIndex: -1,
    conn,
    client,
    upstream: up,
    active: 0,
    idleSweeps: 0,
    heldUp: null,
    heldDown: null,
    drains: 0,
  };
  client[kTunnel] = t;
  up[kTunnel] = t;
  conn.core.tunnels.add(t);

  // Listeners per tunnel are what an idle tunnel's set-up costs most (docs/benchmarks/tunnel-cost.md): the owner's and
  // the dialer's error listeners stay where they end the tunnel as the pump's would (the client's destroys both; the
  // upstream's destroySelf closes it, and its 'close' with an error destroys the client), and 'drain' is listened
  // for only once a side backs up (watchDrain).
  if (conn.releaseSocket) conn.releaseSocket();
  else client.on('error', destroyBoth);
  if (up.listenerCount('error', destroySelf) === 0) up.on('error', destroyBoth);
  client.on('end', onEnd);
  up.on('end', onEnd);
  client.on('close', onClientClose);
  up.on('close', onUpstreamClose);

  if (earlyData.length > 0) {
    conn.bytesUp += earlyData.length;
    conn.budget?.take(earlyData.length); // what came with the request (at most its head's size) is not held
    conn.rate?.up.take(earlyData.length);
    up.write(earlyData);
  }
  takeOver(client);
  takeOver(up);
  if (t.heldUp === null) client.resume();
  // The client's FIN came with its request, before the pump existed: pass it on now.
  if (client.readableEnded && t.heldUp === null) up.end();
  if (t.heldDown === null) up.resume();
  // Gone before the pump took it (a target that reset right after the connect): its 'close' came and went.
  if (up.destroyed) destroyBoth.call(up);
}

/** A shared listener (no closure, so it retains nothing of the dial). */
