// The gateway's boundary: what it needs from the daemon (Admitter) and how the daemon starts it.
// The gateway imports nothing else of ours.
import type { StickySessions } from './sticky-sessions.js';

export type AdmitFailure =
  | 'bad_credentials' // unknown user, wrong password, disabled proxy user
  | 'account_inactive' // suspended or closed account
  | 'not_whitelisted' // source IP has no active entry of an active account
  | 'over_connection_limit';

/** `user`: the proxy user whose credentials matched (absent for whitelist admission). */
export type AdmitResult = { ok: true; accountId: number; user?: string } | { ok: false; reason: AdmitFailure };

export interface Admitter {
  /**
   * Credentials given (HTTP Basic or RFC 1929). Must not be slow on repeat (cache verified credentials).
   * `baseUsername` (the user named by session parameters) is tried only when no user `username` exists.
   * `sourceIp`: the client's IPv4 (after any trusted PROXY header), for per-source limits on failures.
   */
  admitByCredentials(username: string, password: string, baseUsername?: string, sourceIp?: string | null): Promise<AdmitResult>;
  /** No credentials: the connection's source IPv4 (after any trusted PROXY header). */
  admitBySourceIp(ipv4: string): Promise<AdmitResult>;
}

/** Per-account traffic the gateway reports; the daemon flushes it to the store. */
export interface TrafficSink {
  connectionOpened(accountId: number): void;
  connectionClosed(accountId: number, bytesUp: number, bytesDown: number): void;
}

/** What a presented username asks for (the daemon injects the rule that parses it). */
export type UsernameParams =
  | { kind: 'plain'; user: string }
  | { kind: 'session'; user: string; session: string; minutes: number }
  | { kind: 'malformed' };

export interface GatewayLimits {
  headerTimeoutMs: number; // HTTP head / SOCKS handshake must complete within this
  connectTimeoutMs: number; // outgoing connect to the target
  idleTimeoutMs: number; // tunnel with no bytes either way
  maxHeaderBytes: number;
  maxConnectionsPerAccount: number;
  maxConnectionsTotal: number;
}

export interface GatewayOptions {
  httpProxyListen: { host: string; port: number } | null;
  socksListen: { host: string; port: number } | null;
  egressAddress?: string | undefined;
  /** IPv4 addresses each outgoing connection binds one of (sticky per session, else in turn); replaces egressAddress. */
  egressPool?: { addresses: readonly string[]; sessions: StickySessions } | undefined;
  /** Reads session parameters out of a username; without it every username is taken as written. */
  parseUsername?: (username: string) => UsernameParams;
  allowPrivateTargets: boolean;
  /** CIDRs whose PROXY protocol v1/v2 header is believed. */
  proxyProtocolFrom: string[];
  /** Addresses (host:port) of the daemon's own listeners: always refused as targets. */
  ownListeners: () => Array<{ host: string; port: number }>;
  admission: Admitter;
  traffic?: TrafficSink;
  limits?: Partial<GatewayLimits>;
  /** Structured log sink (pino-compatible subset). Never given secrets. */
  log?: { info(obj: object, msg?: string): void; warn(obj: object, msg?: string): void };
  /** Lookup used to resolve target names (injectable for tests). */
  lookup?: (host: string) => Promise<Array<{ address: string; family: 4 | 6 }>>;
}

export interface Gateway {
  httpProxyAddress(): { host: string; port: number } | null;
  socksAddress(): { host: string; port: number } | null;
  /** Stop accepting; let open tunnels drain up to `drainMs`, then destroy the rest. */
  close(drainMs: number): Promise<void>;
  /** Counters for the metrics endpoint. */
  stats(): GatewayStats;
}

export interface GatewayStats {
  connectionsOpen: number;
  connectionsTotal: Record<'http' | 'connect' | 'socks5', number>;
  admissionFailures: Record<string, number>;
  targetRefusals: Record<string, number>;
  bytesUp: number;
  bytesDown: number;
  /** Outgoing connections by the local address they left from (with an egress address or pool). */
  egressConnections: Record<string, number>;
}
