// One client connection on a gateway listener: the PROXY header stage, the handshake byte queue,
// the header deadline, and the bookkeeping that runs exactly once when it closes.
import type net from 'node:net';
import { ByteQueue } from './byte-queue.js';
import type { GatewayCore } from './core.js';
import { parseProxyHeader } from './proxy-protocol.js';
import { canonicalIp } from './target-policy.js';

export type ListenerKind = 'http' | 'socks5';

/** The protocol spoken after any PROXY header: it reads `conn.queue` when bytes arrive. */
export interface ProtocolHandler {
  onBytes(): void;
}

// How long a refused connection may keep sending before it is cut (so the reply is read, not reset).
const LINGER_MS = 2000;

// Socket listeners are shared functions that find their connection through the socket, so a
// connection does not carry a closure per listener.
const kConn = Symbol('conn');
type ConnSocket = net.Socket & { [kConn]?: ClientConn };

/** The tunnel pump takes over error and EOF handling (one listener per event is cheaper). */
export function detachHandshakeListeners(socket: net.Socket): void {
  socket.removeListener('error', onSocketError);
  socket.removeListener('end', onSocketEnd);
}

function onSocketData(this: ConnSocket, chunk: Buffer): void {
  (this[kConn] as ClientConn).onData(chunk);
}
function onSocketError(this: ConnSocket): void {
  (this[kConn] as ClientConn).destroy();
}
function onSocketEnd(this: ConnSocket): void {
  (this[kConn] as ClientConn).onEnd();
}
function onSocketClose(this: ConnSocket): void {
  (this[kConn] as ClientConn).onClose();
}
function onHeaderTimeout(conn: ClientConn): void {
  conn.destroy();
}

export class ClientConn {
  readonly queue = new ByteQueue();
  /** Source IPv4 used for admission (from a trusted PROXY header, else the peer), if IPv4. */
  sourceIp: string | null;
  accountId = -1;
  bytesUp = 0;
  bytesDown = 0;
  upstream: net.Socket | null = null;
  handler: ProtocolHandler | null = null;
  /** Waiting on admission, DNS or a dial: bytes queue up but are not parsed. */
  busy = false;
  /** Set once destroy() ran or the socket closed: async steps check it before going on. */
  closed = false;
  /** The tunnel pump owns both sockets' lifecycles (see splice.ts). */
  spliced = false;
  private accounted = false;
  private proxyStage: boolean;
  private readonly trustedPeer: boolean;
  private headerTimer: NodeJS.Timeout | null;

  constructor(
    readonly core: GatewayCore,
    readonly socket: net.Socket,
    readonly listener: ListenerKind,
  ) {
    const peer = canonicalIp(socket.remoteAddress ?? '');
    this.sourceIp = peer.includes(':') || peer === '' ? null : peer;
    this.trustedPeer = core.isTrustedPeer(peer);
    this.proxyStage = true;
    core.conns.add(this);
    core.stats.connectionsOpen++;
    socket.setNoDelay(true);
    this.headerTimer = setTimeout(onHeaderTimeout, core.limits.headerTimeoutMs, this);
    (socket as ConnSocket)[kConn] = this;
    socket.on('data', onSocketData);
    socket.on('error', onSocketError);
    socket.on('end', onSocketEnd);
    socket.on('close', onSocketClose);
  }

  onEnd(): void {
    this.eof = true;
    // EOF mid-handshake: unless an async step may still finish it, nothing more can come.
    if (!this.handedOff && !this.busy) this.destroy();
  }

  private handedOff = false;
  /** The client sent FIN (possibly during the handshake, right after its request). */
  eof = false;

  onData(chunk: Buffer): void {
    if (this.closed) return;
    this.queue.append(chunk);
    if (this.queue.length > this.core.limits.maxHeaderBytes + 64 * 1024) {
      // Far more than any handshake plus early data: stop buffering, the client is abusing us.
      this.destroy();
      return;
    }
    if (this.busy) return;
    this.process();
  }

  /** Parse what is queued (also called when an async step finishes). */
  process(): void {
    if (this.closed || this.busy) return;
    if (this.proxyStage) {
      const r = parseProxyHeader(this.queue.view());
      if (r.kind === 'incomplete') return;
      if (r.kind === 'error') return this.destroy();
      if (r.kind === 'ok') {
        // From an untrusted peer, a PROXY header is a protocol error (spoofing attempt or misconfig).
        if (!this.trustedPeer) return this.destroy();
        this.queue.consume(r.consumed);
        if (r.value.source) {
          const src = canonicalIp(r.value.source.address);
          this.sourceIp = src.includes(':') ? null : src;
        }
      }
      this.proxyStage = false;
    }
    if (this.queue.length > 0 || this.handler) this.handler?.onBytes();
    // The handler wants more bytes, but the client has finished sending.
    if (this.eof && !this.busy && !this.handedOff) this.destroy();
  }

  /** Stop reading while an async step runs; bytes arriving meanwhile stay in the socket. */
  pause(): void {
    this.busy = true;
    this.socket.pause();
  }

  resume(): void {
    this.busy = false;
    if (this.closed) return;
    this.socket.resume();
    this.process();
  }

  /** The handshake is over: the caller owns the socket's data from now on. Returns early data. */
  handOff(): Buffer {
    this.handedOff = true;
    this.busy = false;
    this.socket.pause();
    this.socket.removeListener('data', onSocketData);
    this.clearHeaderTimer();
    this.handler = null;
    return Buffer.from(this.queue.takeAll());
  }

  clearHeaderTimer(): void {
    if (this.headerTimer) clearTimeout(this.headerTimer);
    this.headerTimer = null;
  }

  /** Send a final reply, then close once the client has read it (or after a short linger). */
  endWithReply(bytes: Buffer | string): void {
    if (this.closed) return;
    this.upstream?.destroy();
    this.handedOff = true;
    this.clearHeaderTimer();
    this.busy = true; // never parse again
    this.socket.removeListener('data', onSocketData);
    this.socket.on('data', () => {}); // discard, so the kernel does not reset on close
    this.socket.resume();
    this.socket.on('end', () => this.destroy());
    this.socket.end(bytes);
    setTimeout(() => this.destroy(), LINGER_MS).unref();
  }

  /** Record the admitted account; false if the connection closed meanwhile (slot given back). */
  bindAccount(accountId: number): boolean {
    if (this.accounted) {
      this.core.releaseSlot(accountId, 0, 0);
      return false;
    }
    this.accountId = accountId;
    return !this.closed;
  }

  destroy(): void {
    this.closed = true;
    this.socket.destroy();
    this.upstream?.destroy();
  }

  onClose(): void {
    if (this.accounted) return;
    this.accounted = true;
    this.closed = true;
    this.clearHeaderTimer();
    this.queue.clear();
    // A spliced upstream may still be flushing the client's last bytes; the pump ends it.
    if (!this.spliced) this.upstream?.destroy();
    this.core.conns.delete(this);
    this.core.stats.connectionsOpen--;
    // Byte counters are kept per connection while it is open (stats() adds the open ones).
    this.core.stats.bytesUp += this.bytesUp;
    this.core.stats.bytesDown += this.bytesDown;
    if (this.accountId >= 0) this.core.releaseSlot(this.accountId, this.bytesUp, this.bytesDown);
  }
}
