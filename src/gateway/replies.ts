// The gateway's own answers (always final: the connection closes after them), and the one mapping
// from a failure to its HTTP status and SOCKS5 reply code.
import type { DialFailure } from './dialer.js';
import { Reply, encodeReply } from './socks5-parser.js';
import type { TargetRefusal } from './target-policy.js';
import type { AdmitFailure } from './types.js';

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  403: 'Forbidden',
  405: 'Method Not Allowed',
  407: 'Proxy Authentication Required',
  408: 'Request Timeout',
  411: 'Length Required',
  413: 'Content Too Large',
  429: 'Too Many Requests',
  431: 'Request Header Fields Too Large',
  501: 'Not Implemented',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
  505: 'HTTP Version Not Supported',
};

/** A complete HTTP/1.1 response with a short plain-text body naming the cause. */
export function httpReply(status: number, detail: string, extraHeaders: string[] = []): string {
  const body = `${status} ${REASONS[status] ?? ''}: ${detail}\n`;
  return (
    `HTTP/1.1 ${status} ${REASONS[status] ?? 'Error'}\r\n` +
    extraHeaders.map((h) => `${h}\r\n`).join('') +
    'Content-Type: text/plain; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    'Connection: close\r\n\r\n' +
    body
  );
}

export const PROXY_AUTHENTICATE = 'Proxy-Authenticate: Basic realm="proxy"';

/** Why a connection gets no tunnel after its handshake: admission, target policy, DNS, or the dial. */
export type Failure = AdmitFailure | 'admission_error' | TargetRefusal | 'dns_failed' | 'no_usable_address' | DialFailure;

// Every failure's answer on both protocols, in one table: HTTP status and text, SOCKS5 reply code.
// SOCKS5 admission failures are refused at method selection or RFC 1929 instead (see socks5.ts).
// Same answer for every credential or whitelist failure: no hint which part was wrong.
const AUTH_REQUIRED = { status: 407, detail: 'proxy authentication required', socks: Reply.NotAllowed };
const FAILURES: Record<Failure, { status: number; detail: string; socks: number }> = {
  bad_credentials: AUTH_REQUIRED,
  account_inactive: AUTH_REQUIRED,
  not_whitelisted: AUTH_REQUIRED,
  over_connection_limit: { status: 429, detail: 'too many concurrent connections for this account', socks: Reply.GeneralFailure },
  admission_error: { status: 503, detail: 'admission temporarily unavailable', socks: Reply.GeneralFailure },
  private_target: { status: 403, detail: 'target address not allowed', socks: Reply.NotAllowed },
  own_listener: { status: 403, detail: 'target is this proxy', socks: Reply.NotAllowed },
  dns_failed: { status: 502, detail: 'target name could not be resolved', socks: Reply.HostUnreachable },
  no_usable_address: { status: 502, detail: 'target has no address reachable from the egress address', socks: Reply.HostUnreachable },
  refused: { status: 502, detail: 'target refused the connection', socks: Reply.ConnectionRefused },
  net_unreachable: { status: 502, detail: 'target unreachable', socks: Reply.NetworkUnreachable },
  host_unreachable: { status: 502, detail: 'target unreachable', socks: Reply.HostUnreachable },
  timeout: { status: 504, detail: 'connecting to the target timed out', socks: Reply.TtlExpired },
};

export function httpFailureReply(f: Failure): string {
  const { status, detail } = FAILURES[f];
  return httpReply(status, detail, status === 407 ? [PROXY_AUTHENTICATE] : []);
}

export function socksFailureReply(f: Failure): Buffer {
  return encodeReply(FAILURES[f].socks);
}
