// The gateway's boundary: what it needs from the daemon (Admitter) and how the daemon starts it.
// The gateway imports nothing else of ours.
import type { EgressPrefix } from './dial/egress-prefix.js';
import type { StickyAddresses, StickySessions } from './dial/sticky-sessions.js';
import type { ByteBudget } from './relay/byte-budget.js';
import type { RateBudget } from './relay/rate-budget.js';
import type { DedicatedEgress, Dialer, ExitWish } from './dial/dialer.js';
export type { DedicatedEgress };
import type { HopIdentity } from './hop/identity.js';
import type { HopRefusal } from './hop/server.js';
import type { TargetRuleSets } from './dial/target-rules.js';

export type { ExitRow, ExitRegistry, ExitDirectoryOptions } from './hop/directory.js';
export type { HopIdentity, HopRefusal, TargetRuleSets };
export type { TargetDenial, RuleItemProblem } from './dial/target-rules.js';

/**
 * The target rules in force, from the daemon's in-memory view (synchronous: asked once per connection, before
 * its target is resolved or dialled).
 */
export interface TargetRules {
  /** The service's rules and the account's (null: none). */
  forAccount(accountId: number): TargetRuleSets;
  /** A proxy user's own rules (`subject` `user:NAME`), checked after its account's; null: none. */
  forUser?(accountId: number, subject: string): TargetRuleSets['account'];
}

// Each admission failure, precisely: the client always gets the same 407 for the first six (no oracle for
// usernames); the connection log keeps the precise reason for the account owner and support.
export type AdmitFailure =
  | 'unknown_user' // no proxy user of that name (or malformed credentials)
  | 'wrong_password'
  | 'login_throttled' // the node's failure budget is spent: refused without comparing the password
  | 'user_disabled' // the proxy user is disabled
  | 'account_inactive' // suspended or closed account
  | 'not_whitelisted' // source IP has no live entry
  | 'whitelist_entry_disabled' // the source IP's entry is disabled (status 2)
  | 'connection_limit' // the account's (or the user's) concurrent connections are at the cap
  | 'traffic_limit' // the plan's (or the user's) traffic for the period is used up
  | 'plan_expired'
  | 'bad_username_params' // the base user's password matched, but the username's parameters do not parse (`alice-country-usa`)
  | 'bad_ip_parameter'; // the username's `-ip-A.B.C.D` names no dedicated address of the account

/**
 * `user`: the proxy user whose credentials matched (absent for whitelist admission). A failure names the
 * account when one was matched (a wrong password for an existing user, a disabled entry), for the log.
 */
export type AdmitResult =
  { ok: true; accountId: number; user?: string } | { ok: false; reason: AdmitFailure; accountId?: number };

export interface Admitter {
  /**
   * Credentials given (HTTP Basic or RFC 1929). Must not be slow on repeat (cache verified credentials).
   * `baseUsername` (the user named by session parameters) is tried only when no user `username` exists.
   * `sourceIp`: the client's address, IPv4 or IPv6 (after any trusted PROXY header), for per-source limits on failures.
   * Either method may answer at once (the connection goes on in the same turn) or with a promise; either may
   * throw or reject (the gateway answers `admission_error`).
   */
  admitByCredentials(
    username: string,
    password: string,
    baseUsername?: string,
    sourceIp?: string | null,
  ): AdmitResult | Promise<AdmitResult>;
  /** No credentials: the connection's source IPv4 (after any trusted PROXY header). */
  admitBySourceIp(ipv4: string): AdmitResult | Promise<AdmitResult>;
}

/**
 * Metered usage since the last `collectUsage()`, per account and subject: `user:NAME` (the proxy
 * user whose credentials matched; a session username counts for its base user) or `ip:A.B.C.D` (whitelist
 * admission, under the entry's IP). Bytes as relayed between client and target while connections are open
 * (a tunnel's payload after the 200 / SOCKS reply; a forwarded request and response as sent); the gateway's
 * own answers never count. `connections`: connections admitted. `target`: the host the client asked for
 * (lower-case, no trailing dot, IPv6 without brackets; null: none dialled yet); the daemon's meter replaces it
 * with the host's registrable domain before it is stored.
 */
export interface UsageDelta {
  accountId: number;
  subject: string;
  target?: string | null;
  bytesUp: number;
  bytesDown: number;
  connections: number;
}

/** Usage of an account by the dedicated address its connections left from (docs/api.md, usage summary `ips`). */
export interface EgressUsageDelta {
  accountId: number;
  address: string;
  bytesUp: number;
  bytesDown: number;
  connections: number;
}

/** Why a change closes open connections: the plan expired, its traffic is used up, the proxy user was disabled or deleted. */
export type CloseCause = 'plan_expired' | 'traffic_limit' | 'user_disabled';

/** Why a connection was refused, as the connection log says it (a closed list: docs/support.md). */
export type LogReason =
  | Exclude<AdmitFailure, 'login_throttled'>
  | 'target_forbidden'
  | 'dns_error'
  | 'target_refused'
  | 'target_timeout'
  | 'no_exit'
  | 'malformed'
  | 'admission_unavailable'
  | 'target_denied' // the account's target rules
  | 'target_denied_service'; // the service's target rules (checked first)

/**
 * Why a connection was refused, as /metrics counts it: the log's reason, except a login refused unchecked because
 * its source or username was past its failure budget (`login_throttled`; the log says `admission_unavailable`),
 * so that reason alone means the gateway could not decide.
 */
export type RefusalReason = LogReason | 'login_throttled';

export type LogProtocol = 'http' | 'connect' | 'socks5' | 'socks5-udp';

/**
 * One connection-log record as the gateway reports it: a refused attempt when it is refused, an admitted
 * connection when it ends. Never a password. `accountId` -1: no account matched. Times in ms since the epoch.
 */
export interface ConnectionRecord {
  startedAt: number;
  requestId: string;
  protocol: LogProtocol;
  sourceIp: string;
  username: string | null;
  accountId: number;
  target: string | null;
  reason: LogReason | null; // null: admitted
  bytesUp: number;
  bytesDown: number;
  durationMs: number;
  /** An entry node's records: the exit the connection went through, and the exit its session had before when it moved. */
  exit?: string | null | undefined;
  exitMovedFrom?: string | null | undefined;
  /** A SOCKS5 UDP association's datagrams each way (its bytes are the datagrams' payloads). */
  datagramsUp?: number | undefined;
  datagramsDown?: number | undefined;
}

/** Takes records off the connection path: must return at once and never throw (connection-log.ts buffers). */
export interface ConnectionLogSink {
  record(r: ConnectionRecord): void;
}

/**
 * Plans and limits (docs/decisions.md#d-028, "Plans and limits") as the gateway asks them, synchronously, from the daemon's in-memory view:
 * whether an admitted account/subject may open a connection at all, and its connection caps.
 */
export interface PlanLimits {
  refusal(accountId: number, subject: string): 'traffic_limit' | 'plan_expired' | null;
  /** Something to wait for before `refusal` can answer (the account's usage not read yet), or null. */
  pending(accountId: number, subject: string): Promise<void> | null;
  /**
   * Whether one more connection fits the account's and the user's connection caps, given how many this node
   * has open (`open.account`, `open.user`): within the slots this node holds (synchronous), or null when
   * deciding needs more slots from the fleet (then `moreSlots`, and ask again).
   */
  slotFree(accountId: number, subject: string, open: { account: number; user: number }): boolean | null;
  /** Asks the fleet for more connection slots for this account and subject (resolves when it answered). */
  moreSlots(accountId: number, subject: string, open: () => { account: number; user: number }): Promise<void>;
  /** The byte budget connections of this account and subject relay under; null: no traffic limit. */
  budgetFor(accountId: number, subject: string): ByteBudget | null;
  /** The rate budget this subject's connections on this node share (the user's, under the account's); null: no rate limit. */
  rateFor?(accountId: number, subject: string): RateBudget | null;
}

export interface GatewayLimits {
  headerTimeoutMs: number; // HTTP head / SOCKS handshake must complete within this
  connectTimeoutMs: number; // outgoing connect to the target
  idleTimeoutMs: number; // tunnel with no bytes either way
  maxHeaderBytes: number;
  maxConnectionsPerAccount: number;
  maxConnectionsTotal: number;
  maxHandshakesPerSource: number; // connections not admitted yet (handshake, or a refusal lingering) from one source (IPv4 address, IPv6 /64)
}

export interface GatewayOptions {
  httpProxyListen: { host: string; port: number } | null;
  socksListen: { host: string; port: number } | null;
  /** One of several processes on the same ports: each listens on a socket of its own (SO_REUSEPORT) and the kernel spreads connections. */
  reusePort?: boolean | undefined;
  egressAddress?: string | undefined;
  /** IPv4 addresses each outgoing connection binds one of (sticky per session, else in turn); replaces egressAddress. */
  egressPool?: { addresses: readonly string[]; sessions: StickySessions } | undefined;
  /** An IPv6 prefix each outgoing connection leaves from a random address of (a session keeps one); replaces egressAddress. */
  egressPrefix?: { prefix: EgressPrefix; sessions: StickyAddresses } | undefined;
  allowPrivateTargets: boolean;
  /** CIDRs whose PROXY protocol v1/v2 header is believed. */
  proxyProtocolFrom: string[];
  /** Addresses (host:port) of the daemon's own listeners: always refused as targets. */
  ownListeners: () => Array<{ host: string; port: number }>;
  admission: Admitter;
  /** Plans and limits; absent: none. */
  plans?: PlanLimits;
  /** Dedicated egress addresses (docs/gateway.md, "Dedicated addresses"); absent: none. */
  dedicated?: DedicatedEgress;
  /** Account and service target rules (docs/gateway.md, "Target rules"); absent: none. */
  targetRules?: TargetRules;
  /** Where refused attempts and ended connections are reported (docs/gateway.md, "The connection log"); absent: not logged. */
  connectionLog?: ConnectionLogSink;
  limits?: Partial<GatewayLimits>;
  /** Structured log sink (pino-compatible subset). Never given secrets. */
  log?: { info(obj: object, msg?: string): void; warn(obj: object, msg?: string): void };
  /** This node's `--location` (a `both` node is its own exit: targeting elsewhere gets 502 no_exit). */
  location?: ExitWish | null;
  /** An entry node: every target is reached through this (the hop to an exit), never dialled here. */
  exitDialer?: Dialer;
  /**
   * An exit node: the hop listener entries reach it on (no customer listener, TLS 1.3 with `identity`), and the
   * fleet secrets a proof may use now.
   */
  hop?:
    | {
        listen: { host: string; port: number };
        identity: HopIdentity;
        secrets: () => readonly Buffer[];
        onRefused?: (why: HopRefusal) => void;
        /** This process's share of the bounds on unproven hop connections (an exit's workers split them). */
        unproven?: { total: number; perSource: number };
      }
    | undefined;
  /** SOCKS5 UDP ASSOCIATE: the relay ports, how long an association lives without a datagram, how many at most. */
  udp?: { ports: { lo: number; hi: number }; idleMs: number; maxAssociations: number };
  /** Lookup used to resolve target names (injectable for tests). */
  lookup?: (host: string) => Promise<Array<{ address: string; family: 4 | 6 }>>;
}

export interface Gateway {
  httpProxyAddress(): { host: string; port: number } | null;
  socksAddress(): { host: string; port: number } | null;
  /** An exit node's hop listener (docs/gateway.md, "Entry and exit nodes"), else null. */
  hopAddress(): { host: string; port: number } | null;
  /** An exit's new hop certificate: new hop connections get it, open ones keep theirs. */
  setHopIdentity(id: HopIdentity): void;
  /** Stop accepting; let open tunnels drain up to `drainMs`, then destroy the rest. */
  close(drainMs: number): Promise<void>;
  /** Counters for the metrics endpoint. */
  stats(): GatewayStats;
  /** Usage since the last call, open connections included (the daemon's meter calls it every second). */
  collectUsage(): UsageDelta[];
  /** Usage by dedicated address metered by the calls of collectUsage since the last call of this one. */
  collectEgressUsage(): EgressUsageDelta[];
  /** Connections open on this node for an account (and one of its subjects, when given). */
  openConnections(accountId: number, subject?: string): number;
  /**
   * Closes every open admitted connection for which `match` gives a cause; how many. One still resolving or
   * dialling its target has had no answer yet: it is answered the cause's refusal first (HTTP 403 or 407, a
   * SOCKS5 reply 0x02) and logged with it, as a new attempt would be; the others close.
   */
  closeWhere(match: (accountId: number, subject: string) => CloseCause | null): number;
  /**
   * Closes every open outgoing connection (and UDP association) leaving from a local address that `match` says
   * (its address, the account it carries; -1: unknown); how many.
   */
  closeEgressWhere(match: (address: string, accountId: number) => boolean): number;
  /** Puts every open admitted connection under the byte budget `budgetFor` gives now (null: none). */
  rebudget(budgetFor: (accountId: number, subject: string) => ByteBudget | null): void;
  /** Puts every open admitted connection under the rate budget `rateFor` gives now (null: none, parked readers go on). */
  rerate(rateFor: (accountId: number, subject: string) => RateBudget | null): void;
}

/**
 * A histogram of set-up times: `counts[i]` connections took at most `boundsMs[i]` (and more than the bound before),
 * the last count those over every bound; `sumMs` their total.
 */
export interface SetupTimes {
  readonly boundsMs: readonly number[];
  counts: number[];
  sumMs: number;
}

export interface GatewayStats {
  connectionsOpen: number;
  connectionsTotal: Record<'http' | 'connect' | 'socks5', number>;
  admissionFailures: Record<string, number>;
  targetRefusals: Record<string, number>;
  /** Connections refused (HTTP answered with an error, SOCKS5 with a failure reply), by why. */
  refusals: Partial<Record<RefusalReason, number>>;
  /** Time from accept to relaying (the target reached, the tunnel or forward under way): counts per bucket. */
  setup: SetupTimes;
  bytesUp: number;
  bytesDown: number;
  /** Outgoing connections by the local address they left from (with an egress address or pool); an IPv6 prefix counts under its name. */
  egressConnections: Record<string, number>;
  /** SOCKS5 UDP: associations open, datagrams and payload bytes each way, datagrams dropped by cause. */
  udp: {
    associationsOpen: number;
    datagramsUp: number;
    datagramsDown: number;
    bytesUp: number;
    bytesDown: number;
    dropped: Record<string, number>;
  };
}
