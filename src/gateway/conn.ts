// One client connection on a gateway listener, as one state machine: its state, the allowed steps
// between states (NEXT) and what each step does to the socket (`to`) are all here. The PROXY header
// stage, the handshake byte queue, the header deadline, and the bookkeeping that runs exactly once
// when it closes (per-account slot, traffic, counters) live here too. docs/gateway.md draws it.
import type net from 'node:net';
import { ByteQueue } from './wire/byte-queue.js';
import type { ByteBudget } from './relay/byte-budget.js';
import type { RateBudget } from './relay/rate-budget.js';
import type { AdmitOutcome, GatewayCore } from './core.js';
import type { DialOutcome, EgressSession, ExitWish } from './dial/dialer.js';
import { parseProxyHeader } from './wire/proxy-protocol.js';
import { failureLogReason, httpFailureReply, httpReply, socksFailureReply, type Failure } from './replies.js';
import { canonicalIp } from './dial/target-policy.js';
import { AddressScreen } from './dial/target-rules.js';
import type { CloseCause, LogProtocol, LogReason } from './types.js';

export type ListenerKind = 'http' | 'socks5';

/**
 * proxy-header: an optional PROXY header may still come · handshake: the HTTP head or a SOCKS5
 * message is being read · admitting: admission runs (reading paused) · resolving: the target name is
 * resolved and checked (paused; still under the header deadline) · dialing: the connect runs (the
 * connect timeout governs) · replying: a final answer is sent, the client reads it ·
 * tunnel: CONNECT or SOCKS5 bytes both ways (splice.ts) · forward: one absolute-form exchange
 * (forward.ts) · closed: the socket closed and the bookkeeping ran.
 */
export type ConnState =
  | 'proxy-header'
  | 'handshake'
  | 'admitting'
  | 'resolving'
  | 'dialing'
  | 'replying'
  | 'tunnel'
  | 'forward'
  | 'udp'
  | 'closed';

const NEXT: Record<ConnState, readonly ConnState[]> = {
  'proxy-header': ['handshake', 'closed'],
  // SOCKS5 resolves from its request stage, after admission brought it back to the handshake.
  // A SOCKS5 UDP ASSOCIATE goes from its request straight to the association (nothing to dial).
  handshake: ['admitting', 'resolving', 'replying', 'udp', 'closed'],
  admitting: ['handshake', 'resolving', 'replying', 'closed'],
  resolving: ['dialing', 'replying', 'closed'],
  // dialing → dialing: a dialer that tries another socket (an entry's hop on another exit) is still dialing.
  dialing: ['dialing', 'tunnel', 'forward', 'replying', 'closed'],
  replying: ['closed'],
  tunnel: ['closed'],
  forward: ['closed'],
  udp: ['closed'],
  closed: [],
};

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

/**
 * The tunnel pump takes over EOF handling (one listener per event is cheaper). The error listener stays: it destroys
 * the connection, its upstream with it, as the pump's own would (one listener fewer to take off and put on).
 */
export function detachHandshakeListeners(socket: net.Socket): void {
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
  (this[kConn] as ClientConn).to('closed');
}
function destroyConn(conn: ClientConn): void {
  conn.destroy();
}
/**
 * The header deadline passed. Waiting on admission or on the target's name is the gateway's side (typed
 * answer on the HTTP listener, and the reason that says so); an unfinished handshake is the client's
 * (`malformed`, when it sent anything at all).
 */
function headerTimedOut(conn: ClientConn): void {
  if (conn.state === 'admitting' || conn.state === 'resolving') {
    const admitting = conn.state === 'admitting';
    const reason = admitting ? 'admission_unavailable' : 'dns_error';
    if (conn.listener !== 'http') {
      conn.logRefusal(reason);
      return conn.destroy();
    }
    return conn.refuse(
      reason,
      admitting
        ? httpReply(503, 'proxy_internal_error', 'admission did not answer in time', conn.requestId)
        : httpReply(504, 'dns_timeout', 'resolving the target name timed out', conn.requestId),
    );
  }
  if (conn.protocol || conn.queue.length > 0) conn.logRefusal('malformed');
  conn.destroy();
}
function discard(): void {}

/** What admission decided for a connection: null (admitted, slot bound), the failure, or 'gone' (nothing more to do). */
export type AdmitStep = Failure | 'gone' | null;

/**
 * Runs `admit` (the connection's admission) and goes on with `next` once it has decided: in this turn when it
 * answered at once, else when its promise settles. A throw in either, now or later (or a rejected admission),
 * cuts the connection, as an unexpected error anywhere does: never a throw into the socket's event handler.
 */
export function afterAdmission(
  conn: ClientConn,
  admit: () => AdmitStep | Promise<AdmitStep>,
  next: (step: AdmitStep) => void,
): void {
  try {
    const step = admit();
    if (step instanceof Promise) step.then(next).catch(() => conn.destroy());
    else next(step);
  } catch {
    conn.destroy();
  }
}

export class ClientConn {
  /** Its place in the core's open connections (live-set.ts). */
  liveIndex = -1;
  state: ConnState = 'proxy-header';
  readonly queue = new ByteQueue();
  /** Source IPv4 used for admission (from a trusted PROXY header, else the peer), if IPv4. */
  sourceIp: string | null;
  /** The client's address for the log, either family (after a trusted PROXY header). */
  clientAddress: string;
  accountId = -1;
  /** What this connection's bytes count for once admitted (`user:NAME` or `ip:A.B.C.D`). */
  meterSubject = '';
  slotKey = '';
  meterTarget: string | null = null;
  /** Admitted and not yet counted in the usage (core.meter counts it once it relays, or at its end). */
  connectionUnmetered = false;
  connectionFate: 'pending' | 'relaying' | 'refused' = 'pending';
  meteredUp = 0;
  meteredDown = 0;
  /** The dedicated address it leaves from, when its account holds some (usage by address). */
  egressAddress: string | null = null;
  /** Set when admitted under a traffic limit: the pump takes every relayed byte from it (byte-budget.ts). */
  budget: ByteBudget | null = null;
  /** Set when admitted under a rate limit: the pump takes every relayed byte from its direction's bucket (rate-budget.ts). */
  rate: RateBudget | null = null;
  /** The admitted username's sticky session (null: the connection rotates over the egress pool). */
  egressSession: EgressSession | null = null;
  /** The username's targeting (`-country-`, `-city-`), null: any exit. */
  exitWish: ExitWish | null = null;
  /** The dedicated address the username named (`-ip-`), else null. */
  egressPin: string | null = null;
  /** On an entry node: the exit it went through (and the one its session had before, when it moved). */
  via: { exit: string; movedFrom: string | null } | null = null;
  bytesUp = 0;
  bytesDown = 0;
  /** A UDP association's datagrams relayed each way (its record says them). */
  datagramsUp = 0;
  datagramsDown = 0;
  upstream: net.Socket | null = null;
  handler: ProtocolHandler | null = null;
  // What the connection log says of it: set as the handshake learns them.
  readonly startedAt = Date.now();
  /** Known once the handshake says what the client asks for. */
  protocol: LogProtocol | null = null;
  /** As presented (session parameters included); never the password. */
  username: string | null = null;
  target: string | null = null;
  /** The account a refusal concerns, when one was matched (wrong password of an existing user, …). */
  private refusedAccountId = -1;
  private logged = false;
  /** Refused because its source or username was past its failed-login budget: counted apart from the log's reason (metrics). */
  private throttled = false;
  private slotGivenBack = false;
  private rid: string | null = null;
  private readonly trustedPeer: boolean;
  private headerTimer: NodeJS.Timeout | null;

  /** Where this connection counts in core.handshaking until it is admitted or closed; null: not counted. */
  private handshakeSource: string | null;

  /** `peer` (canonical), `trusted` (a PROXY peer) and `handshakeSource` (where it counts) as the accepting listener found them. */
  constructor(
    readonly core: GatewayCore,
    readonly socket: net.Socket,
    readonly listener: ListenerKind,
    peer = canonicalIp(socket.remoteAddress ?? ''),
    trusted = core.isTrustedPeer(peer),
    handshakeSource: string | null = null,
  ) {
    this.sourceIp = peer.includes(':') || peer === '' ? null : peer;
    this.clientAddress = peer;
    this.trustedPeer = trusted;
    this.handshakeSource = handshakeSource;
    if (handshakeSource !== null)
      core.handshaking.set(handshakeSource, (core.handshaking.get(handshakeSource) ?? 0) + 1);
    core.conns.add(this);
    core.stats.connectionsOpen++;
    socket.setNoDelay(true);
    this.headerTimer = setTimeout(headerTimedOut, core.limits.headerTimeoutMs, this);
    (socket as ConnSocket)[kConn] = this;
    socket.on('data', onSocketData);
    socket.on('error', onSocketError);
    socket.on('end', onSocketEnd);
    socket.on('close', onSocketClose);
  }

  /** The id of this connection in answers (`X-Request-Id`) and in the connection log; made when first asked for. */
  get requestId(): string {
    return (this.rid ??= this.core.nextRequestId());
  }

  /** Gone, or going: async steps check this before going on. */
  get closed(): boolean {
    return this.state === 'closed' || this.socket.destroyed;
  }

  /** Take one step of the machine; false (and the connection cut) if it is not an allowed one. */
  to(next: ConnState): boolean {
    const from = this.state;
    if (!NEXT[from].includes(next)) {
      if (from !== 'closed') this.destroy();
      return false;
    }
    this.state = next;
    // Admitted (on to its target, or back to SOCKS5's request), or closed: out of its source's count. A refusal
    // still lingering stays in it, or junk answered at once would hold as many connections as idle handshakes; so
    // does a SOCKS5 refusal deferred to the request (auth answered OK, no account slot: accountId stays -1).
    if (
      this.handshakeSource !== null &&
      (next === 'handshake' ? from === 'admitting' && this.accountId >= 0 : next !== 'admitting' && next !== 'replying')
    )
      this.leaveHandshake();
    switch (next) {
      case 'handshake':
        // Admitted, and the protocol has more to read (SOCKS5): parse what came meanwhile.
        if (from === 'admitting') {
          this.socket.resume();
          this.process();
        }
        break;
      case 'admitting':
      case 'resolving':
        this.socket.pause(); // bytes arriving meanwhile stay in the socket
        break;
      case 'dialing':
        // From here the connect timeout governs; the header deadline no longer applies.
        this.clearHeaderTimer();
        break;
      case 'tunnel':
      case 'forward':
      case 'udp':
        // It reaches its target: counted in the usage from now (core.meter), and its set-up time once.
        if (this.connectionFate === 'pending') {
          this.connectionFate = 'relaying';
          this.core.countSetup(Date.now() - this.startedAt);
        }
      // falls through
      case 'replying':
        // The handshake is over: its reader and deadline go; the next owner reads the socket.
        this.clearHeaderTimer();
        this.socket.removeListener('data', onSocketData);
        this.handler = null;
        break;
      case 'closed':
        this.release(from);
        break;
    }
    return true;
  }

  /** The client sent FIN. Mid-handshake nothing more can come: close at once, every listener. */
  onEnd(): void {
    if (this.state === 'proxy-header' || this.state === 'handshake' || this.state === 'replying') this.destroy();
    // admitting / resolving / dialing: the step finishes first (a CONNECT may be followed by the client's FIN).
  }

  onData(chunk: Buffer): void {
    if (this.closed) return;
    this.queue.append(chunk);
    if (this.queue.length > this.core.limits.maxHeaderBytes + 64 * 1024) {
      // Far more than any handshake plus early data: stop buffering, the client is abusing us.
      this.destroy();
      return;
    }
    this.process();
  }

  /** Parse what is queued. */
  process(): void {
    if (this.state === 'proxy-header') {
      const r = parseProxyHeader(this.queue.view());
      if (r.kind === 'incomplete') return;
      // A malformed header, or one from a peer not trusted for it (spoofing, or a load balancer the operator did not
      // list): closed without a reply, and recorded, so a misconfigured balancer shows in the log.
      if (r.kind === 'error') return this.refuseProxyHeader();
      if (r.kind === 'ok') {
        if (!this.trustedPeer) return this.refuseProxyHeader();
        this.queue.consume(r.consumed);
        if (r.value.source) {
          const src = canonicalIp(r.value.source.address);
          this.sourceIp = src.includes(':') ? null : src;
          this.clientAddress = src;
        }
      }
      this.to('handshake');
    }
    if (this.state !== 'handshake') return;
    if (this.queue.length > 0) this.handler?.onBytes();
    // Still wanting bytes, but the client has finished sending.
    if (this.state === 'handshake' && this.socket.readableEnded) this.destroy();
  }

  private refuseProxyHeader(): void {
    this.logRefusal('malformed');
    this.destroy();
  }

  /**
   * Admission for this connection: null when admitted (slot bound), the failure, or 'gone'. At once when the
   * gateway's admission answers at once (core.admit), else a promise: `afterAdmission` takes either.
   */
  admit(creds: { username: string; password: string } | null): AdmitStep | Promise<AdmitStep> {
    if (!this.to('admitting')) return 'gone';
    // Credentials: the failure budgets count by the client's address in either family (an IPv6 one by its /64);
    // with none, all IPv6 clients shared one budget, and one of them could lock out the rest.
    const out = this.core.admit(creds, creds ? this.clientAddress || null : this.sourceIp);
    return out instanceof Promise ? out.then((o) => this.admitted(o)) : this.admitted(out);
  }

  private admitted(out: AdmitOutcome): AdmitStep {
    if (!out.ok) {
      if (out.accountId !== undefined) this.refusedAccountId = out.accountId;
      this.throttled = out.reason === 'login_throttled';
      if (this.state === 'admitting' && !this.closed) return out.reason;
      // Gone meanwhile (or answered by the header deadline): the decision is still the record's.
      this.logRefusal(failureLogReason(out.reason));
      return 'gone';
    }
    if (this.state !== 'admitting' || this.closed) {
      // Closed (or answered by the header deadline) while admission ran: give the slot straight back; an
      // admitted connection that never carried a byte still gets its record.
      this.core.releaseSlot(out.accountId, out.subject);
      this.core.countConnection(out.accountId, out.subject);
      if (!this.logged) {
        this.logged = true;
        this.emit(null, out.accountId);
      }
      if (!this.closed && this.state !== 'replying') this.destroy();
      return 'gone';
    }
    this.accountId = out.accountId; // its slot given back with the final answer, or when the socket closes
    this.meterSubject = out.subject;
    this.slotKey = out.key ?? '';
    this.connectionUnmetered = true;
    this.budget = out.budget ?? null;
    this.rate = out.rate ?? null;
    this.egressSession = out.session;
    this.exitWish = out.exitWish ?? null;
    this.egressPin = out.pin ?? null;
    return this.closed ? 'gone' : null;
  }

  /**
   * On an entry: the exits that may carry this connection, when its account holds dedicated addresses (the node of
   * its `-ip-` address, else every node holding one of them); null: any exit.
   */
  onlyExits(): ReadonlySet<string> | null {
    const d = this.core.opts.dedicated;
    if (!d || !this.core.opts.exitDialer || this.accountId < 0) return null;
    if (this.egressPin !== null) {
      const node = d.nodeOf(this.accountId, this.egressPin);
      return new Set(node === null ? [] : [node]);
    }
    return d.holdsAny(this.accountId) ? d.nodesOf(this.accountId) : null;
  }

  /** Dialled: the tunnel or forwarder owns the socket's data from now on. Returns early data. */
  handOff(next: 'tunnel' | 'forward'): Buffer | null {
    if (!this.to(next)) return null;
    return Buffer.from(this.queue.takeAll());
  }

  /** The pump takes the socket over: the handshake's EOF listener comes off it (its error listener stays, see detachHandshakeListeners). */
  releaseSocket(): void {
    detachHandshakeListeners(this.socket);
  }

  private clearHeaderTimer(): void {
    if (this.headerTimer) clearTimeout(this.headerTimer);
    this.headerTimer = null;
  }

  /** Send a final reply, then close once the client has read it (FIN, see onEnd) or after a short linger. */
  endWithReply(bytes: Buffer | string): void {
    if (this.closed || !this.to('replying')) return;
    // Refused: it carries nothing more, so it no longer holds one of the account's connections while the
    // client reads the answer (a client that keeps the socket open would otherwise hold it for the linger).
    this.giveSlotBack();
    this.upstream?.destroy();
    this.socket.on('data', discard); // read and drop, so the kernel does not reset on close
    this.socket.resume();
    // The client already finished sending: close once the reply is flushed.
    if (this.socket.readableEnded) this.socket.end(bytes, () => this.destroy());
    else {
      this.socket.end(bytes);
      setTimeout(destroyConn, LINGER_MS, this).unref();
    }
  }

  /** Refused: the record now (the reply may linger), then the answer. */
  refuse(reason: LogReason, reply: Buffer | string): void {
    if (this.closed) return;
    this.logRefusal(reason);
    this.endWithReply(reply);
  }

  /** A failure after the handshake, answered on the HTTP listener (SOCKS5 encodes its own reply). */
  failHttp(f: Failure, detail?: string): void {
    this.refuse(failureLogReason(f), httpFailureReply(f, this.requestId, detail));
  }

  /** One `refused` record, at most once per connection. */
  logRefusal(reason: LogReason): void {
    if (this.logged) return;
    this.logged = true;
    // The gateway's own answer: not a connection of the account's usage (unless it relayed before).
    if (this.connectionFate === 'pending') this.connectionFate = 'refused';
    // The log says a throttled login's check was unavailable; the metric tells it from the gateway failing to decide.
    this.core.countRefused(this.throttled ? 'login_throttled' : reason);
    this.emit(reason, this.accountId >= 0 ? this.accountId : this.refusedAccountId);
  }

  /** The record; `accountId` -1: no account matched. */
  private emit(reason: LogReason | null, accountId: number): void {
    const sink = this.core.opts.connectionLog;
    if (!sink) return;
    const via = this.via;
    const udp = this.protocol === 'socks5-udp';
    sink.record({
      startedAt: this.startedAt,
      requestId: this.requestId,
      protocol: this.protocol ?? (this.listener === 'http' ? 'http' : 'socks5'),
      sourceIp: this.clientAddress,
      username: this.username,
      accountId,
      target: this.target,
      reason,
      bytesUp: this.bytesUp,
      bytesDown: this.bytesDown,
      durationMs: Date.now() - this.startedAt,
      // Every record has every field (one shape, no copies of spread objects); undefined: not this kind of record.
      exit: via === null ? undefined : via.exit,
      exitMovedFrom: via === null ? undefined : via.movedFrom,
      datagramsUp: udp ? this.datagramsUp : undefined,
      datagramsDown: udp ? this.datagramsDown : undefined,
    });
  }

  destroy(): void {
    this.socket.destroy();
    this.upstream?.destroy();
  }

  /**
   * Closed by a change to its account or user (core.closeWhere). Still resolving or dialling, it has had no answer:
   * it gets the refusal a new attempt would (HTTP 403 / 407, SOCKS5 reply 0x02) and its record says why; the dial
   * is abandoned (stillWanted() is false once it replies). Any other state has answered already (or is not admitted): closed.
   */
  cut(cause: CloseCause): void {
    if (this.closed) return;
    if (this.state === 'resolving' || this.state === 'dialing') {
      if (this.listener === 'http') return this.failHttp(cause);
      return this.refuse(failureLogReason(cause), socksFailureReply(cause));
    }
    this.destroy();
  }

  /** Admitted or closed: out of its source's count. */
  private leaveHandshake(): void {
    const source = this.handshakeSource as string;
    this.handshakeSource = null;
    const n = (this.core.handshaking.get(source) ?? 1) - 1;
    if (n <= 0) this.core.handshaking.delete(source);
    else this.core.handshaking.set(source, n);
  }

  /** The account's (and user's) connection slot this connection holds, given back once. */
  private giveSlotBack(): void {
    if (this.slotGivenBack || this.accountId < 0) return;
    this.slotGivenBack = true;
    this.core.releaseSlot(this.accountId, this.meterSubject, this.slotKey || undefined);
  }

  private release(from: ConnState): void {
    this.clearHeaderTimer();
    this.queue.clear();
    // A spliced upstream may still be flushing the client's last bytes; the pump ends it.
    if (from !== 'tunnel') this.upstream?.destroy();
    this.core.conns.delete(this);
    this.core.stats.connectionsOpen--;
    // Byte counters are kept per connection while it is open (stats() adds the open ones).
    this.core.stats.bytesUp += this.bytesUp;
    this.core.stats.bytesDown += this.bytesDown;
    if (this.accountId >= 0) {
      this.core.meter(this, true);
      this.giveSlotBack();
      // Admitted: its record when it ends, with its bytes and duration (unless it was refused later, at the target).
      if (!this.logged) {
        this.logged = true;
        this.emit(null, this.accountId);
      }
    }
  }
}

/** Resolve and dial a target for an admitted connection, through the gateway's dialer. `null` if the client went away. */
export function dialTarget(conn: ClientConn, host: string, port: number): Promise<DialOutcome> {
  // Not async (its promise is the dial's own), but a throw still arrives as a rejection, as callers expect.
  try {
    return startDial(conn, host, port);
  } catch (e) {
    return Promise.reject(e);
  }
}

function startDial(conn: ClientConn, host: string, port: number): Promise<DialOutcome> {
  // Resolving stays under the header deadline; from the connect on, the connect timeout governs.
  if (!conn.to('resolving')) return Promise.resolve(null);
  // Target rules on the target as asked: a refused one is never resolved nor dialled.
  const judged = conn.core.judgeTarget(conn.accountId, host, conn.meterSubject);
  if (judged && !(judged instanceof AddressScreen)) return Promise.resolve({ ok: false, failure: judged.denied });
  conn.core.retarget(conn, host);
  return conn.core.dialer
    .dial({
      host,
      port,
      screen: judged,
      accountId: conn.accountId,
      session: conn.egressSession,
      exitWish: conn.exitWish,
      pin: conn.egressPin,
      onlyExits: conn.onlyExits(),
      // Not once the header deadline has answered instead (the connection is then `replying`).
      stillWanted: () => !conn.closed && (conn.state === 'resolving' || conn.state === 'dialing'),
      connecting: (socket) => {
        conn.to('dialing');
        conn.upstream = socket;
      },
    })
    .then((out) => {
      if (out && !out.ok) conn.upstream = null;
      if (out?.via) conn.via = out.via;
      if (out?.ok && conn.core.countsByAddress(conn.accountId))
        conn.egressAddress = out.egress ?? (out.via ? null : (out.socket.localAddress ?? null));
      return out;
    });
}
