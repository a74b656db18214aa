// Shapes shared by the check stages, the runner and the renderer (docs/support.md).
import type { ProxyError } from './reader.js';
import type { Socket } from 'node:net';
import type { IncomingMessage } from 'node:http';
import type { ProxySpec, TargetSpec } from './urls.js';

export const STAGE_NAMES = ['dns', 'tcp', 'auth', 'connect', 'tls', 'status'] as const;
export type StageName = (typeof STAGE_NAMES)[number];
export type StageStatus = 'ok' | 'fail' | 'skipped';

/** Why a stage failed, as a value: the diagnosis is built from this, never from message text. */
export type FailureCause =
  | { kind: 'timeout'; ms: number }
  | { kind: 'dns'; code: string }
  | { kind: 'tcp'; code: string }
  | { kind: 'closed'; during: string } // peer closed/reset before answering
  | { kind: 'not_http_proxy'; sample: string }
  | { kind: 'not_socks5'; firstByte: number }
  | { kind: 'not_a_proxy'; status: number } // an HTTP answer no proxy would give: no Via (RFC 9110 7.6.3), a web server's status
  | { kind: 'proxy_auth_required'; realm: string | null; withCredentials: boolean; status?: number } // HTTP 407 (401 from a proxy that uses it)
  | { kind: 'socks_no_method'; withCredentials: boolean } // method 0xFF
  | { kind: 'socks_auth_failed'; status: number } // RFC 1929 status != 0
  | { kind: 'http_connect_status'; status: number; reason: string; body: string; proxyError?: ProxyError } // body: the proxy's short explanation
  | { kind: 'socks_reply'; code: number }
  | { kind: 'target_dns'; code: string } // socks5:// resolves the target locally
  | { kind: 'tls'; code: string; reason: TlsReason }
  | { kind: 'target_status'; status: number }
  | { kind: 'protocol'; message: string }
  | { kind: 'bad_option'; message: string };

export type TlsReason =
  'expired' | 'not_yet_valid' | 'wrong_host' | 'self_signed' | 'untrusted' | 'revoked' | 'handshake' | 'other';

export interface StageResult {
  name: StageName;
  status: StageStatus;
  ms: number;
  detail: string;
}

/** What a stage module returns; the runner adds the name and timing. */
export type StageOutcome = { ok: true; detail: string } | { ok: false; detail: string; cause: FailureCause };

export interface CheckReport {
  stages: StageResult[];
  egress_ip: string | null;
  direct_ip: string | null;
  diagnosis: string;
  /** The gateway's `X-Request-Id` for this attempt (HTTP proxy only), the key support finds its log record by. */
  request_id: string | null;
}

export interface CheckOptions {
  /** Proxy URL: http://[user:pass@]host:port, socks5://…, socks5h://… */
  proxy: string;
  /** Target URL (http:// or https://) answering with the caller's IP. */
  target: string;
  /** Timeout of each stage, ms. */
  timeoutMs: number;
  /** Per-stage overrides of `timeoutMs` (also: `direct` for the direct request). */
  timeouts?: Partial<Record<StageName | 'direct', number>>;
  /** PEM text of extra CA certificate(s) trusted for the target (`--ca FILE`, already read). */
  ca?: string | undefined;
  /** Fetch the target directly too and compare egress IPs. */
  direct: boolean;
}

export type LookupFn = (host: string) => Promise<Array<{ address: string; family: number }>>;

export interface CheckDeps {
  lookup: LookupFn;
  /** Monotonic clock in ms (performance.now). */
  now: () => number;
}

/** Mutable state handed from stage to stage within one check. */
export interface CheckContext {
  readonly proxy: ProxySpec;
  readonly target: TargetSpec;
  readonly opts: CheckOptions;
  readonly deps: CheckDeps;
  /** Resolved address of the proxy (dns stage). */
  proxyAddress?: { address: string; family: number };
  /** Socket to the proxy, later the tunnel (tcp, auth, connect stages). */
  socket?: Socket;
  /** TLS socket to the target through the tunnel (tls stage). */
  tlsSocket?: Socket;
  /** HTTP proxy, CONNECT: the proxy's answer (auth stage reads it, connect stage judges it). */
  connectAnswer?: { status: number; reason: string; body: string; proxyError: ProxyError | null };
  /** HTTP proxy, http:// target: the absolute-form response (auth reads it, status finishes it). */
  forwardResponse?: IncomingMessage;
  /** HTTP proxy, http:// target: the forwarded answer had no Via header (auth stage). */
  viaMissing?: boolean;
  /** The proxy's `X-Request-Id` for the attempt, when it sent one (auth stage). */
  requestId?: string;
  /** Egress IP echoed by the target (status stage). */
  egressIp?: string | null;
  /** Every socket opened, destroyed at the end. */
  readonly sockets: Set<Socket>;
}
