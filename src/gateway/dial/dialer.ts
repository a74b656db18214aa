// The dialer seam (glider's Dialer): forward, CONNECT and SOCKS5 reach targets only through a Dialer.
// DirectDialer resolves, applies the target policy and connects from a local address; PoolDialer wraps
// it and picks that address per connection from the egress pool (sticky session or rotation); PrefixDialer
// picks a random address of an IPv6 prefix (a sticky session keeps one). A UDP association is dialed the same way
// (`associate`, GOST's WrapPacketConn beside WrapConn): the same choice of egress address gives a UdpCarrier
// (udp-out.ts) instead of a socket; an entry's HopDialer gives one over the hop (hop/udp-carrier.ts).
import net from 'node:net';
import type { EgressPrefix } from './egress-prefix.js';
import { mixedHash, rendezvousPick } from '../../rules/rendezvous.js';
import { destroySelf } from '../relay/sockets.js';
import { CachingResolver } from './resolver.js';
import type { StickyAddresses, StickySessions } from './sticky-sessions.js';
import { canonicalIp, checkTarget, parseIp, reachesListener, type TargetRefusal } from './target-policy.js';
import { isGatewayUdpSocket, UdpOut, type UdpCarrier } from './udp-out.js';
import type { AddressScreen, TargetDenial } from './target-rules.js';

/**
 * Dedicated egress addresses (docs/gateway.md, "Dedicated addresses") from the daemon's in-memory view, asked
 * synchronously per connection: an account that holds addresses leaves only from them; nobody else does.
 */
export interface DedicatedEgress {
  /** This node's addresses the account holds (empty: none here). */
  here(accountId: number): readonly string[];
  /** Whether the account holds an address anywhere in the fleet (then it never leaves from a shared address). */
  holdsAny(accountId: number): boolean;
  /** Whether this address is out of the shared rotation (assigned or quarantined). */
  reserved(address: string): boolean;
  /** Moves whenever what `reserved` says may have changed (an assignment, a release, a quarantine that ended). */
  generation(): number;
  /** The node the account's address `ip` is on; null when it is not the account's. */
  nodeOf(accountId: number, ip: string): string | null;
  /** The nodes holding the account's addresses. */
  nodesOf(accountId: number): ReadonlySet<string>;
}

export type ResolveOutcome =
  | { ok: true; address: string; family: 4 | 6 }
  | { ok: false; reason: TargetRefusal | TargetDenial | 'dns_failed' | 'no_usable_address' };

export type DialFailure = 'refused' | 'net_unreachable' | 'host_unreachable' | 'timeout';

/** An entry node found no healthy exit that matches what the username asked for. */
export type ExitFailure = 'no_exit';

export type TargetFailure = Exclude<ResolveOutcome, { ok: true }>['reason'] | DialFailure | ExitFailure;

/** Every TargetFailure, once (the compiler keeps it complete): what an exit may answer a DIAL with. */
const TARGET_FAILURES: Record<TargetFailure, true> = {
  private_target: true,
  own_listener: true,
  dns_failed: true,
  no_usable_address: true,
  refused: true,
  net_unreachable: true,
  host_unreachable: true,
  timeout: true,
  no_exit: true,
  target_denied: true,
  target_denied_service: true,
};

export function isTargetFailure(name: string): name is TargetFailure {
  return Object.hasOwn(TARGET_FAILURES, name);
}

/** `null`: the caller no longer wanted it (its client went away); the socket, if any, is destroyed. */
export type DialOutcome =
  | { ok: true; socket: net.Socket; via?: { exit: string; movedFrom: string | null }; egress?: string }
  | { ok: false; failure: TargetFailure; detail?: string; via?: { exit: string; movedFrom: string | null } }
  | null;

/** What a username's targeting asks of the exit (lower-case; null: any). */
export interface ExitWish {
  country: string | null;
  city: string | null;
}

/** A sticky session of an admitted connection: same key, same egress for `minutes` from its first use. */
export interface EgressSession {
  key: string;
  minutes: number;
}

export interface DialRequest {
  host: string;
  port: number;
  /** Null: the connection rotates over the pool. */
  session: EgressSession | null;
  /** The username's targeting (`-country-CC-city-NAME`); null or absent: any exit. */
  exitWish?: ExitWish | null;
  /** A dedicated address the username named (`-ip-A.B.C.D`): the connection leaves from it or not at all. */
  pin?: string | null;
  /** An entry: only these exits may carry it (they hold the account's dedicated addresses); null or absent: any. */
  onlyExits?: ReadonlySet<string> | null;
  /** Target rules on the addresses a name resolves to (target-rules.ts); absent: none. */
  screen?: AddressScreen | null;
  /** The admitted account, for an exit to apply its target rules to what a name resolves to (the hop's DIAL carries it). */
  accountId?: number;
  /** Checked once the target is resolved: false abandons the dial. */
  stillWanted(): boolean;
  /** The socket while it connects, so the caller can destroy it if its client goes away. */
  connecting(socket: net.Socket): void;
}

export type { UdpCarrier } from './udp-out.js';

/** A UDP association to carry: what a DialRequest says of where it leaves from, and how each datagram's target is judged. */
export interface AssociateRequest {
  /** Null: the association rotates over the pool. */
  session: EgressSession | null;
  exitWish?: ExitWish | null;
  pin?: string | null;
  onlyExits?: ReadonlySet<string> | null;
  accountId?: number;
  /** Checked as it waits (an exit's answer, a session's address): false abandons it. */
  stillWanted(): boolean;
  /**
   * The account's (and the service's) target rules on a datagram's target as asked: a refusal, a screen for the
   * addresses it resolves to, or null (the gateway's judgeTarget for the association's account and user).
   */
  judge?(host: string): { denied: TargetDenial } | AddressScreen | null;
  /** The node's relay port range (`--udp-ports`): on a local address every port of it is a relay, never a target. */
  relayPorts?: { lo: number; hi: number };
  /**
   * One of this node's own sockets, as asked (an entry's check: the exit cannot know them, and sent on, a datagram
   * came back into another of this node's associations). OwnListenerGuard sets it.
   */
  ownTarget?(host: string, port: number): boolean;
  /** A datagram dropped by the carrier: a refused target, an answer from a sender never sent to, a frame no exit makes. */
  drop(reason: 'policy' | 'unsolicited' | 'malformed'): void;
}

/** A UDP association's carrier, or why there is none (as a dial's failure); null: no longer wanted. */
export type AssociateOutcome =
  | { ok: true; carrier: UdpCarrier; via?: { exit: string; movedFrom: string | null }; egress?: string }
  | { ok: false; failure: TargetFailure; detail?: string; via?: { exit: string; movedFrom: string | null } }
  | null;

export interface Dialer {
  dial(req: DialRequest): Promise<DialOutcome>;
  /**
   * A UDP association, its egress chosen as a connection's would be: datagrams out from this node's address
   * (dial/udp-out.ts), or (an entry's) over the hop to an exit chosen like a connection's (hop/udp-carrier.ts).
   * Absent: this dialer carries no UDP (an entry whose exits cannot).
   */
  associate?(req: AssociateRequest): Promise<AssociateOutcome>;
}

type Lookup = (host: string) => Promise<Array<{ address: string; family: 4 | 6 }>>;

export interface DirectDialerOptions {
  /** Default local address (`--egress-address`); a PoolDialer passes its own per dial. */
  localAddress?: string | undefined;
  /** Family every local address has (an IPv4 pool: 4, an IPv6 prefix: 6): targets of the other family are unusable. */
  family: 4 | 6 | null;
  allowPrivateTargets: boolean;
  ownListeners: () => Array<{ host: string; port: number }>;
  connectTimeoutMs: number;
  lookup?: Lookup | undefined;
  countRefusal(reason: TargetRefusal | TargetDenial): void;
  /** Counts each dial by the local address it leaves from (metrics). */
  countEgress(address: string): void;
  /** An outgoing connection or UDP carrier from a local address, for as long as it is open (closed when that address changes hands). */
  trackEgress?(
    socket: { destroy(): void; once(event: 'close', f: () => void): unknown },
    address: string,
    accountId: number,
  ): void;
}

export class DirectDialer implements Dialer {
  private readonly lookup: Lookup;

  constructor(private readonly o: DirectDialerOptions) {
    // Names resolve through c-ares with a cache, never on libuv's pool (src/gateway/dial/resolver.ts).
    this.lookup = o.lookup ?? new CachingResolver().lookup;
  }

  dial(req: DialRequest): Promise<DialOutcome> {
    return this.dialFrom(req, this.o.localAddress);
  }

  associate(req: AssociateRequest): Promise<AssociateOutcome> {
    return Promise.resolve(this.associateFrom(req, this.o.localAddress));
  }

  /**
   * A UDP association from `localAddress` (undefined: the OS picks): each datagram's target judged as asked, then
   * resolved and checked like a dial's (`resolve`), never one of the gateway's own UDP sockets (udp-out.ts).
   */
  associateFrom(req: AssociateRequest, localAddress: string | undefined): AssociateOutcome {
    const carrier = new UdpOut({
      resolve: (host, port) => {
        const judged = req.judge?.(host) ?? null;
        if (judged !== null && 'denied' in judged) return Promise.resolve({ ok: false });
        return this.resolve(host, port, judged);
      },
      egressAddress: localAddress,
      drop: (reason) => req.drop(reason),
      ...(req.relayPorts ? { relayPorts: req.relayPorts } : {}),
    });
    if (localAddress === undefined) return { ok: true, carrier };
    // Dedicated addresses changing hands end the association within 2 s, as they end a connection.
    this.o.trackEgress?.(carrier, localAddress, req.accountId ?? -1);
    return { ok: true, carrier, egress: localAddress };
  }

  /** `countAs`: the metrics label (an IPv6 prefix counts under its own name, not per random address). */
  dialFrom(
    req: DialRequest,
    localAddress: string | undefined,
    countAs: string | undefined = localAddress,
  ): Promise<DialOutcome> {
    // A dotted-quad target is checked at once: no promise turn for a name that needs no lookup (target rules judged
    // a literal before the dial; the screen is for what a name resolves to). The connect's is the only promise.
    if (net.isIPv4(req.host))
      return this.connectTo(
        req,
        this.resolveAddress([{ address: req.host, family: 4 }], req.port),
        localAddress,
        countAs,
      );
    return this.resolve(req.host, req.port, req.screen ?? null).then((resolved) =>
      this.connectTo(req, resolved, localAddress, countAs),
    );
  }

  private connectTo(
    req: DialRequest,
    resolved: ResolveOutcome,
    localAddress: string | undefined,
    countAs: string | undefined,
  ): Promise<DialOutcome> {
    if (!req.stillWanted()) return Promise.resolve(null);
    if (!resolved.ok) return Promise.resolve({ ok: false, failure: resolved.reason });
    if (countAs) this.o.countEgress(countAs);
    return new Promise((resolve) => {
      const socket = this.connect(resolved.address, resolved.family, req.port, localAddress, (err) => {
        if (!req.stillWanted()) {
          socket.destroy();
          resolve(null);
        } else {
          if (!err && localAddress !== undefined) this.o.trackEgress?.(socket, localAddress, req.accountId ?? -1);
          resolve(err ? { ok: false, failure: err } : { ok: true, socket });
        }
      });
      req.connecting(socket);
    });
  }

  /**
   * Resolve a target and pick the first address the policy allows: that is the one to dial. A name any of whose
   * addresses the target rules refuse is refused (another address of it reaches the same place).
   */
  async resolve(host: string, port: number, screen: AddressScreen | null = null): Promise<ResolveOutcome> {
    let candidates: Array<{ address: string; family: 4 | 6 }>;
    const literal = parseIp(host);
    if (literal) {
      candidates = [{ address: literal.toString(), family: literal.kind() === 'ipv4' ? 4 : 6 }];
    } else {
      try {
        candidates = await this.lookup(host);
      } catch {
        return { ok: false, reason: 'dns_failed' };
      }
      candidates = candidates.map((c) => {
        const text = canonicalIp(c.address);
        return { address: text, family: net.isIPv4(text) ? 4 : 6 };
      });
      if (candidates.length === 0) return { ok: false, reason: 'dns_failed' };
      if (screen) {
        for (const c of candidates) {
          const denied = screen.check(c.address);
          if (denied) {
            this.o.countRefusal(denied);
            return { ok: false, reason: denied };
          }
        }
      }
    }
    return this.resolveAddress(candidates, port);
  }

  /** The first candidate of the usable family that the policy allows: that is the one to dial. */
  private resolveAddress(candidates: Array<{ address: string; family: 4 | 6 }>, port: number): ResolveOutcome {
    if (this.o.family) candidates = candidates.filter((c) => c.family === this.o.family);
    if (candidates.length === 0) return { ok: false, reason: 'no_usable_address' };
    let refusal: TargetRefusal | null = null;
    const policy = { allowPrivateTargets: this.o.allowPrivateTargets, ownListeners: this.o.ownListeners };
    for (const c of candidates) {
      const r = checkTarget(c.address, port, policy);
      if (r === null) return { ok: true, address: c.address, family: c.family };
      refusal ??= r;
    }
    this.o.countRefusal(refusal as TargetRefusal);
    return { ok: false, reason: refusal as TargetRefusal };
  }

  /** Start an outgoing connection; `onDone` fires once, with null on success. */
  private connect(
    address: string,
    family: 4 | 6,
    port: number,
    localAddress: string | undefined,
    onDone: (err: DialFailure | null) => void,
  ): net.Socket {
    const socket = net.connect({ host: address, port, family, localAddress, allowHalfOpen: true, noDelay: true });
    let done = false;
    const finish = (err: DialFailure | null): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.removeListener('connect', onConnect);
      socket.removeListener('error', onError);
      // Never an unhandled 'error' (which would crash the process) before the pump attaches its own.
      socket.on('error', destroySelf);
      onDone(err);
    };
    const onConnect = (): void => finish(null);
    const onError = (err: NodeJS.ErrnoException): void => {
      socket.destroy();
      finish(dialFailure(err.code));
    };
    const timer = setTimeout(() => {
      socket.destroy();
      finish('timeout');
    }, this.o.connectTimeoutMs);
    // `on`, not `once` (no wrapper per listener): finish() takes both off.
    socket.on('connect', onConnect);
    socket.on('error', onError);
    return socket;
  }
}

/**
 * Picks the local address per connection: the session's sticky one, else the next in turn. Addresses `reserved`
 * says (dedicated to an account, or quarantined) are skipped: a session whose address became reserved moves to
 * the free address its key ranks first (rendezvous hashing, the same on every worker). Null: every address is reserved.
 */
export class PoolDialer implements Dialer {
  private next = 0;
  /** The addresses not reserved, as of `freeGeneration` (rebuilt when the reservations move, never per connection). */
  private free: readonly string[];
  private freeGeneration = -1;

  constructor(
    private readonly base: DirectDialer,
    private readonly addresses: readonly string[],
    private readonly sessions: StickySessions,
    private readonly reservations: { reserved(address: string): boolean; generation(): number } | null = null,
  ) {
    this.free = addresses;
  }

  /** The pool without its reserved addresses: the same array while nothing changed. */
  private freeAddresses(): readonly string[] {
    const r = this.reservations;
    if (r === null) return this.addresses;
    const g = r.generation();
    if (g !== this.freeGeneration) {
      this.free = this.addresses.filter((a) => !r.reserved(a));
      this.freeGeneration = g;
    }
    return this.free;
  }

  /** The local address for a connection or a UDP association: its session's, else the next in turn. */
  localFor(session: EgressSession | null): string | null | Promise<string | null> {
    if (session) {
      const held = this.sessions.assign(session.key, session.minutes);
      return held instanceof Promise
        ? held.then((h) => this.unreserved(this.addresses[h.index]!, session.key))
        : this.unreserved(this.addresses[held.index]!, session.key);
    }
    const free = this.freeAddresses();
    if (free.length === 0) return null;
    const index = this.next % free.length;
    this.next = index + 1;
    return free[index]!;
  }

  /** A session's address, or (when it became reserved) the free one its key hashes to: O(1), the same on every worker. */
  private unreserved(address: string, key: string): string | null {
    if (this.reservations === null || !this.reservations.reserved(address)) return address;
    const free = this.freeAddresses();
    return free.length === 0 ? null : free[mixedHash(key) % free.length]!;
  }

  async dial(req: DialRequest): Promise<DialOutcome> {
    const got = this.localFor(req.session);
    const local = typeof got === 'string' || got === null ? got : await got;
    if (typeof got !== 'string' && got !== null && !req.stillWanted()) return null;
    if (local === null) return { ok: false, failure: 'no_exit', detail: NO_SHARED_ADDRESS };
    return this.base.dialFrom(req, local);
  }

  async associate(req: AssociateRequest): Promise<AssociateOutcome> {
    const local = await this.localFor(req.session);
    if (local === null) return { ok: false, failure: 'no_exit', detail: NO_SHARED_ADDRESS };
    return this.base.associateFrom(req, local);
  }
}

export const NO_SHARED_ADDRESS = 'no shared egress address free';
export const NO_DEDICATED_EXIT = 'no exit holds your dedicated addresses';

/**
 * Dedicated addresses (docs/gateway.md, "Dedicated addresses"): an account holding addresses on this node leaves
 * from them only (a `-ip-` address, else its session's by rendezvous hashing, else the next in turn); one holding
 * addresses only elsewhere, or naming one not here, gets `no_exit`; everyone else goes to `shared` (which skips
 * reserved addresses).
 */
export class DedicatedDialer implements Dialer {
  private readonly turn = new Map<number, number>();

  constructor(
    private readonly base: DirectDialer,
    readonly shared: Dialer,
    private readonly dedicated: DedicatedEgress,
  ) {}

  /** The account's own address for a connection or UDP association; `shared`: not an account with addresses; null: none may carry it here. */
  choose(accountId: number, session: EgressSession | null, pin: string | null): string | null | 'shared' {
    if (accountId < 0) return 'shared';
    const mine = this.dedicated.here(accountId);
    if (pin) return mine.includes(pin) ? pin : null;
    if (mine.length === 0) return this.dedicated.holdsAny(accountId) ? null : 'shared';
    if (session) return rendezvousPick(mine, session.key);
    const i = (this.turn.get(accountId) ?? 0) % mine.length;
    this.turn.set(accountId, i + 1);
    if (this.turn.size > 100_000) this.turn.delete(this.turn.keys().next().value as number);
    return mine[i]!;
  }

  dial(req: DialRequest): Promise<DialOutcome> {
    const chosen = this.choose(req.accountId ?? -1, req.session, req.pin ?? null);
    if (chosen === 'shared') return this.shared.dial(req);
    if (chosen === null) return Promise.resolve({ ok: false, failure: 'no_exit', detail: NO_DEDICATED_EXIT });
    return this.base.dialFrom(req, chosen);
  }

  associate(req: AssociateRequest): Promise<AssociateOutcome> {
    // Not `?? 'shared'`: choose's null (the account's addresses are all on other nodes) is a refusal, not the shared pool.
    const chosen = this.choose(req.accountId ?? -1, req.session, req.pin ?? null);
    if (chosen === 'shared') return this.shared.associate ? this.shared.associate(req) : this.base.associate(req);
    if (chosen === null) return Promise.resolve({ ok: false, failure: 'no_exit', detail: NO_DEDICATED_EXIT });
    return Promise.resolve(this.base.associateFrom(req, chosen));
  }
}

/**
 * An IPv6 egress prefix: each connection leaves from a fresh random address of it; a sticky session keeps
 * the one it was given until it ends. Connections count under the prefix (a /64 per address would be
 * unbounded metrics cardinality).
 */
export class PrefixDialer implements Dialer {
  constructor(
    private readonly base: DirectDialer,
    private readonly prefix: EgressPrefix,
    private readonly sessions: StickyAddresses,
  ) {}

  /** The local address for a connection or a UDP association: its session's, else a fresh random one. */
  localFor(session: EgressSession | null): string | Promise<string> {
    if (!session) return this.prefix.randomAddress();
    const held = this.sessions.assign(session.key, session.minutes);
    return held instanceof Promise ? held.then((h) => h.address) : held.address;
  }

  async dial(req: DialRequest): Promise<DialOutcome> {
    const local = this.localFor(req.session);
    if (typeof local === 'string') return this.base.dialFrom(req, local, this.prefix.text);
    const address = await local;
    if (!req.stillWanted()) return null;
    return this.base.dialFrom(req, address, this.prefix.text);
  }

  async associate(req: AssociateRequest): Promise<AssociateOutcome> {
    return this.base.associateFrom(req, await this.localFor(req.session));
  }
}

/**
 * A `both` node is its own exit: a connection that asks for a country or city this node is not in gets
 * `no_exit` at once (HTTP 502 / SOCKS 0x03); any other dials here.
 */
export class LocatedDialer implements Dialer {
  constructor(
    private readonly inner: Dialer,
    private readonly location: ExitWish | null,
  ) {}

  dial(req: DialRequest): Promise<DialOutcome> {
    const miss = unmet(req.exitWish ?? null, this.location);
    if (miss !== null) return Promise.resolve({ ok: false, failure: 'no_exit', detail: miss });
    return this.inner.dial(req);
  }

  associate(req: AssociateRequest): Promise<AssociateOutcome> {
    const miss = unmet(req.exitWish ?? null, this.location);
    if (miss !== null) return Promise.resolve({ ok: false, failure: 'no_exit', detail: miss });
    return this.inner.associate ? this.inner.associate(req) : Promise.resolve({ ok: false, failure: 'no_exit' });
  }
}

/** Whether `at` satisfies `want`: null when it does, else the `details` of the 502 (`no exit for country us`). */
export function unmet(want: ExitWish | null, at: ExitWish | null): string | null {
  if (want === null) return null;
  if (want.country !== null && want.country !== at?.country) return `no exit for country ${want.country}`;
  if (want.city !== null && want.city !== at?.city) return `no exit for city ${want.city}`;
  return null;
}

function dialFailure(code: string | undefined): DialFailure {
  switch (code) {
    case 'ECONNREFUSED':
      return 'refused';
    case 'ENETUNREACH':
      return 'net_unreachable';
    case 'ETIMEDOUT':
      return 'timeout';
    default:
      return 'host_unreachable';
  }
}

/**
 * An entry's dialer (every target through an exit) with its own listeners refused first, as a `both` node refuses
 * them: an exit resolves and judges the rest, but does not know the entry's listeners. Sent on, an IP literal or
 * `localhost` naming one would have the exit dial the entry, and a customer could go round through it, every lap
 * admitted and metered again. A UDP association's datagrams are checked the same way, each as asked (`ownTarget`:
 * these listeners, the gateway's UDP sockets, its relay range on a local address); the exit judges the rest.
 */
export class OwnListenerGuard implements Dialer {
  readonly associate?: (req: AssociateRequest) => Promise<AssociateOutcome>;

  constructor(
    private readonly inner: Dialer,
    private readonly listeners: () => Array<{ host: string; port: number }>,
    private readonly countRefusal: (reason: TargetRefusal) => void,
  ) {
    const associate = inner.associate?.bind(inner);
    if (associate) {
      this.associate = (req) =>
        associate({
          ...req,
          ownTarget: (host, port) =>
            reachesListener(host, port, this.listeners()) || isGatewayUdpSocket(host, port, req.relayPorts),
        });
    }
  }

  dial(req: DialRequest): Promise<DialOutcome> {
    if (reachesListener(req.host, req.port, this.listeners())) {
      this.countRefusal('own_listener');
      return Promise.resolve({ ok: false, failure: 'own_listener' });
    }
    return this.inner.dial(req);
  }
}
