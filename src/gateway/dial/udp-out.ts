// Datagrams out to their targets, for one UDP association (on a `both` node for its SOCKS5 client; on an exit
// for an entry's association): each target resolved and checked like a CONNECT's, every datagram from one egress
// address, answers taken only from targets the association sent to.
import dgram from 'node:dgram';
import net from 'node:net';
import { canonicalIp, isLocalAddress, isLocalhostName, parseIp, reachesListener } from './target-policy.js';

/**
 * How long a resolved, allowed target is reused without asking again (the resolver's own cache is longer). Short
 * enough that a target rule saved meanwhile holds for the association's next datagrams within a second.
 */
const READY_MS = 500;
/** Targets remembered per association at most. */
const MAX_READY = 1_024;
/** Targets whose answers are taken, per association at most. */
const MAX_SENT_TO = 4_096;

/**
 * The `lookup` of every UDP socket that sends to addresses already resolved (targets, the client): the address
 * as it is, at once. dgram's default (dns.lookup) answers an IP literal a tick later, a tick per datagram.
 */
export function literalLookup(
  address: string,
  family: unknown,
  cb: (err: Error | null, address: string, family: number) => void,
): void {
  cb(null, address, family === 6 ? 6 : 4);
}

/**
 * The gateway's UDP sockets in this process (associations' relay sockets, egress sockets): port → the addresses
 * bound on it, each with how many sockets. A datagram to one of them is refused like one to the daemon's own
 * listeners, and one from one of them is not a client's: sent to its own relay, a datagram came back as the
 * client's and went round again, a header longer each time (one 34-byte datagram made 6,549, 214 MB billed).
 */
const ownUdp = new Map<number, Map<string, number>>();

/** A gateway UDP socket bound to `address:port` (given back with releaseUdpPort when it closes). */
export function holdUdpPort(address: string, port: number): void {
  const host = canonicalIp(address);
  const at = ownUdp.get(port) ?? new Map<string, number>();
  at.set(host, (at.get(host) ?? 0) + 1);
  ownUdp.set(port, at);
}

export function releaseUdpPort(address: string, port: number): void {
  const host = canonicalIp(address);
  const at = ownUdp.get(port);
  const n = at?.get(host) ?? 0;
  if (n > 1) return void at!.set(host, n - 1);
  at?.delete(host);
  if (at?.size === 0) ownUdp.delete(port);
}

/** Whether this process holds `port` for a gateway UDP socket on any address. */
export function holdsUdpPort(port: number): boolean {
  return ownUdp.has(port);
}

/** Whether `address:port` (an IP literal) reaches one of this process's gateway UDP sockets, matched as listeners are. */
export function isOwnUdpSocket(address: string, port: number): boolean {
  const at = ownUdp.get(port);
  return (
    at !== undefined &&
    reachesListener(
      address,
      port,
      [...at.keys()].map((host) => ({ host, port })),
    )
  );
}

/**
 * One of the gateway's UDP sockets as a datagram's target: this process's (relays, egress), or on a local address
 * (`localhost` included) any port of the node's relay range (another worker's relay, unknown to this process).
 */
export function isGatewayUdpSocket(
  host: string,
  port: number,
  relayPorts: { lo: number; hi: number } | undefined,
): boolean {
  if (
    relayPorts !== undefined &&
    port >= relayPorts.lo &&
    port <= relayPorts.hi &&
    (isLocalhostName(host) || isLocalAddress(host))
  )
    return true;
  return parseIp(host) !== null && isOwnUdpSocket(canonicalIp(host), port);
}

/** Who an answer came from: an address and port (a target never answers under a name). */
export interface UdpSender {
  address: string;
  family: 4 | 6;
  port: number;
}

/**
 * Where a UDP association's datagrams go, as a tunnel's upstream socket is where its bytes go: out from this node
 * (UdpOut, from the egress address a connection's dial would use), or over the hop to an exit (hop/udp-carrier.ts).
 * A dialer makes it (dial/dialer.ts, `Dialer.associate`).
 */
export interface UdpCarrier {
  /** Sends one datagram's data to host:port; false when it was dropped (a refused target, a backed-up hop). */
  send(host: string, port: number, data: Buffer): boolean | Promise<boolean>;
  /**
   * Answers go to `onAnswer` from now on (only from targets sent to); `onEnd` once the carrier ends by itself (its
   * hop stream closed, its egress address changed hands), at once if it already has.
   */
  receive(onAnswer: (from: UdpSender, data: Buffer) => void, onEnd: () => void): void;
  /** Ends it (the association ended): `onEnd` is not called for this. */
  close(): void;
}

/** A target resolved and allowed (the address to send to), or refused. */
export type UdpResolved = { ok: true; address: string; family: 4 | 6 } | { ok: false };

export interface UdpOutOptions {
  resolve(host: string, port: number): Promise<UdpResolved>;
  /** The association's egress address (undefined: the OS picks). */
  egressAddress: string | undefined;
  /** A datagram dropped here: a refused target, or an answer from a sender never sent to. */
  drop(reason: 'policy' | 'unsolicited'): void;
  /** Where answers go before receive() says (tests); none: dropped. */
  onAnswer?(from: UdpSender, data: Buffer): void;
  /** How long a resolved target is reused (tests); READY_MS unless given. */
  readyMs?: number;
  /**
   * The node's relay port range (`--udp-ports`): on a local address every port of it is a relay, another
   * worker's too (this process knows only its own sockets), so never a target.
   */
  relayPorts?: { lo: number; hi: number };
}

/** The direct carrier: datagrams out from this node's egress address (the `both` node's, or an exit's for an entry). */
export class UdpOut implements UdpCarrier {
  /** `address:port` of every target sent to: the only senders whose answers are taken. */
  private readonly sentTo = new Set<string>();
  /** One socket per family, bound to the egress address (made at the family's first datagram). */
  private readonly sockets = new Map<4 | 6, Promise<dgram.Socket | null>>();
  private closed = false;
  /** Ended from outside (destroy: its egress address changed hands) before receive() was told where to say so. */
  private ended = false;
  private onAnswer: (from: UdpSender, data: Buffer) => void;
  private onEnd: (() => void) | null = null;
  private closeListeners: Array<() => void> = [];

  constructor(private readonly o: UdpOutOptions) {
    this.onAnswer = o.onAnswer ? (from, data) => o.onAnswer!(from, data) : () => {};
  }

  receive(onAnswer: (from: UdpSender, data: Buffer) => void, onEnd: () => void): void {
    this.onAnswer = onAnswer;
    if (this.ended) return onEnd();
    this.onEnd = onEnd;
  }

  /** Targets resolved and allowed, with their socket, for half a second: a datagram to one of them is sent at once. */
  private readonly ready = new Map<string, { address: string; socket: dgram.Socket; until: number }>();

  /**
   * Sends one datagram's data to host:port; false when it was dropped (refused target, no usable socket). A
   * target seen in the last few seconds goes at once (true); a new one is resolved and checked first (a promise).
   */
  send(host: string, port: number, data: Buffer): boolean | Promise<boolean> {
    // The last target again (the usual case: one server per association) skips building its key.
    const last = this.last;
    if (last !== null && last.host === host && last.port === port && last.ready.until > Date.now()) {
      last.ready.socket.send(data, port, last.ready.address);
      return true;
    }
    const key = `${host}\0${port}`;
    const known = this.ready.get(key);
    if (known !== undefined && known.until > Date.now()) {
      this.last = { host, port, ready: known }; // an object per change of target, none per datagram
      known.socket.send(data, port, known.address);
      return true;
    }
    return this.sendNew(key, host, port, data);
  }

  /** The target of the last datagram sent at once. */
  private last: { host: string; port: number; ready: { address: string; socket: dgram.Socket; until: number } } | null =
    null;
  /** The last sender an answer was taken from (its address as received, and what onAnswer is given). */
  private lastFrom: { address: string; port: number; from: UdpSender } | null = null;

  private async sendNew(key: string, host: string, port: number, data: Buffer): Promise<boolean> {
    const resolved = port === 0 ? null : await this.o.resolve(host, port);
    if (this.closed) return false;
    if (!resolved || !resolved.ok || isGatewayUdpSocket(resolved.address, port, this.o.relayPorts)) {
      this.o.drop('policy');
      return false;
    }
    const socket = await this.socketFor(resolved.family);
    if (!socket || this.closed) {
      this.o.drop('policy');
      return false;
    }
    // Bounded: a client spraying targets keeps the newest (answers from the oldest are then dropped).
    if (this.sentTo.size >= MAX_SENT_TO) {
      this.sentTo.delete(this.sentTo.values().next().value as string);
      this.lastFrom = null; // it may have been that one
    }
    this.sentTo.add(`${resolved.address}:${port}`);
    if (this.ready.size >= MAX_READY) this.ready.delete(this.ready.keys().next().value as string);
    const ready = { address: resolved.address, socket, until: Date.now() + (this.o.readyMs ?? READY_MS) };
    this.ready.set(key, ready);
    // The fast path takes the fresh entry: left on the expired one, every later datagram would be resolved again.
    this.last = { host, port, ready };
    socket.send(data, port, resolved.address);
    return true;
  }

  private socketFor(family: 4 | 6): Promise<dgram.Socket | null> {
    let p = this.sockets.get(family);
    if (!p) {
      p = this.bind(family);
      this.sockets.set(family, p);
    }
    return p;
  }

  private async bind(family: 4 | 6): Promise<dgram.Socket | null> {
    const local = this.o.egressAddress;
    if (local && (net.isIPv6(local) ? 6 : 4) !== family) return null; // the egress is of the other family
    const s = dgram.createSocket({ type: family === 4 ? 'udp4' : 'udp6', lookup: literalLookup });
    const ok = await new Promise<boolean>((resolve) => {
      s.once('error', () => resolve(false));
      s.bind({ address: local, port: 0 }, () => resolve(true));
    });
    if (!ok || this.closed) {
      s.close();
      return null;
    }
    const { address, port } = s.address();
    holdUdpPort(address, port);
    s.once('close', () => releaseUdpPort(address, port));
    s.on('error', () => {});
    s.on('message', (msg, rinfo) => {
      if (this.closed) return;
      const last = this.lastFrom;
      if (last !== null && last.address === rinfo.address && last.port === rinfo.port)
        return this.onAnswer(last.from, msg);
      const from = canonicalIp(rinfo.address);
      if (!this.sentTo.has(`${from}:${rinfo.port}`)) return this.o.drop('unsolicited');
      const sender = { address: from, family: net.isIPv4(from) ? (4 as const) : (6 as const), port: rinfo.port };
      this.lastFrom = { address: rinfo.address, port: rinfo.port, from: sender };
      this.onAnswer(sender, msg);
    });
    return s;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const p of this.sockets.values()) void p.then((s) => s?.close());
    const listeners = this.closeListeners;
    this.closeListeners = [];
    for (const f of listeners) f();
  }

  /** Ended from outside (its egress address changed hands: core.ts, closeEgressWhere): closed, and the association told. */
  destroy(): void {
    if (this.closed) return;
    this.close();
    const onEnd = this.onEnd;
    if (onEnd === null) this.ended = true;
    else onEnd();
  }

  /** `close`: once it is closed, whoever closed it (what GatewayCore.trackEgress listens for). */
  once(_event: 'close', f: () => void): void {
    if (this.closed) f();
    else this.closeListeners.push(f);
  }
}
