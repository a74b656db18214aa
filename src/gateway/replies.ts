// The gateway's own answers (always final: the connection closes after them), and the one mapping
// from a failure to its HTTP status and SOCKS5 reply code.
import type { DialFailure, ExitFailure } from './dial/dialer.js';
import { Reply, encodeReply } from './wire/socks5.js';
import type { TargetRefusal } from './dial/target-policy.js';
import type { TargetDenial } from './dial/target-rules.js';
import type { AdmitFailure, LogReason } from './types.js';

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

/**
 * RFC 9209 error types the gateway answers with (the `error` parameter of `Proxy-Status`). A client or
 * support tool can branch on them; the text in `details` is for people.
 */
export type ProxyErrorType =
  | 'http_request_denied'
  | 'http_request_error'
  | 'destination_ip_prohibited'
  | 'destination_ip_unroutable'
  | 'destination_unavailable'
  | 'dns_error'
  | 'dns_timeout'
  | 'connection_refused'
  | 'connection_timeout'
  | 'connection_terminated'
  | 'http_protocol_error'
  | 'http_response_incomplete'
  | 'http_response_timeout'
  | 'proxy_internal_error';

/**
 * A complete HTTP/1.1 response of the gateway's own, with a short plain-text body naming the cause: its
 * `Proxy-Status` (RFC 9209: which error, in words) and the connection's `X-Request-Id`, the key support
 * finds the connection-log record by.
 */
export function httpReply(
  status: number,
  error: ProxyErrorType,
  detail: string,
  requestId: string,
  extraHeaders: string[] = [],
): string {
  const body = `${status} ${REASONS[status] ?? ''}: ${detail}\n`;
  return (
    `HTTP/1.1 ${status} ${REASONS[status] ?? 'Error'}\r\n` +
    extraHeaders.map((h) => `${h}\r\n`).join('') +
    `Proxy-Status: proxyd; error=${error}; details="${detail}"\r\n` +
    `X-Request-Id: ${requestId}\r\n` +
    'Content-Type: text/plain; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    'Connection: close\r\n\r\n' +
    body
  );
}

export const PROXY_AUTHENTICATE = 'Proxy-Authenticate: Basic realm="proxy"';

/** Why a connection gets no tunnel after its handshake: admission, target policy, DNS, or the dial. */
export type Failure =
  | AdmitFailure
  | 'admission_error'
  | TargetRefusal
  | TargetDenial
  | 'dns_failed'
  | 'no_usable_address'
  | DialFailure
  | ExitFailure;

interface FailureAnswer {
  status: number;
  error: ProxyErrorType;
  detail: string;
  socks: number;
  /** What the connection log records (the client never sees it). */
  log: LogReason;
}

// Every failure's answer on both protocols, in one table: HTTP status, RFC 9209 type and text, SOCKS5 reply
// code, and the connection log's reason. SOCKS5 admission failures are refused at method selection or RFC 1929
// instead (see socks5.ts). Same answer for every credential or whitelist failure: no hint which part was wrong
// (the log's reason tells the account owner and support, not the client).
const denied = (log: LogReason): FailureAnswer => ({
  status: 407,
  error: 'http_request_denied',
  detail: 'proxy authentication required',
  socks: Reply.NotAllowed,
  log,
});
const FAILURES: Record<Failure, FailureAnswer> = {
  unknown_user: denied('unknown_user'),
  wrong_password: denied('wrong_password'),
  bad_username_params: denied('bad_username_params'),
  bad_ip_parameter: denied('bad_ip_parameter'),
  // The password was never compared, so the log does not call it wrong: the check was not available.
  login_throttled: denied('admission_unavailable'),
  user_disabled: denied('user_disabled'),
  account_inactive: denied('account_inactive'),
  not_whitelisted: denied('not_whitelisted'),
  whitelist_entry_disabled: denied('whitelist_entry_disabled'),
  connection_limit: {
    status: 429,
    error: 'http_request_denied',
    detail: 'too many concurrent connections',
    socks: Reply.NotAllowed,
    log: 'connection_limit',
  },
  traffic_limit: {
    status: 403,
    error: 'http_request_denied',
    detail: 'the traffic limit for this period is used up',
    socks: Reply.NotAllowed,
    log: 'traffic_limit',
  },
  plan_expired: {
    status: 403,
    error: 'http_request_denied',
    detail: 'the plan has expired',
    socks: Reply.NotAllowed,
    log: 'plan_expired',
  },
  admission_error: {
    status: 503,
    error: 'proxy_internal_error',
    detail: 'admission temporarily unavailable',
    socks: Reply.GeneralFailure,
    log: 'admission_unavailable',
  },
  private_target: {
    status: 403,
    error: 'destination_ip_prohibited',
    detail: 'target address not allowed',
    socks: Reply.NotAllowed,
    log: 'target_forbidden',
  },
  own_listener: {
    status: 403,
    error: 'destination_ip_prohibited',
    detail: 'target is this proxy',
    socks: Reply.NotAllowed,
    log: 'target_forbidden',
  },
  dns_failed: {
    status: 502,
    error: 'dns_error',
    detail: 'target name could not be resolved',
    socks: Reply.HostUnreachable,
    log: 'dns_error',
  },
  no_usable_address: {
    status: 502,
    error: 'destination_ip_unroutable',
    detail: 'target has no address reachable from the egress address',
    socks: Reply.HostUnreachable,
    log: 'dns_error',
  },
  refused: {
    status: 502,
    error: 'connection_refused',
    detail: 'target refused the connection',
    socks: Reply.ConnectionRefused,
    log: 'target_refused',
  },
  net_unreachable: {
    status: 502,
    error: 'destination_ip_unroutable',
    detail: 'target unreachable',
    socks: Reply.NetworkUnreachable,
    log: 'target_refused',
  },
  host_unreachable: {
    status: 502,
    error: 'destination_ip_unroutable',
    detail: 'target unreachable',
    socks: Reply.HostUnreachable,
    log: 'target_refused',
  },
  timeout: {
    status: 504,
    error: 'connection_timeout',
    detail: 'connecting to the target timed out',
    socks: Reply.TtlExpired,
    log: 'target_timeout',
  },
  no_exit: {
    status: 502,
    error: 'destination_unavailable',
    detail: 'no exit matches',
    socks: Reply.NetworkUnreachable,
    log: 'no_exit',
  },
  target_denied: {
    status: 403,
    error: 'http_request_denied',
    detail: 'target denied by account policy',
    socks: Reply.NotAllowed,
    log: 'target_denied',
  },
  target_denied_service: {
    status: 403,
    error: 'http_request_denied',
    detail: 'target denied by service policy',
    socks: Reply.NotAllowed,
    log: 'target_denied_service',
  },
};

export function failureLogReason(f: Failure): LogReason {
  return FAILURES[f].log;
}

/** `detail` replaces the table's text (a `no_exit` names what was asked: `no exit for country us`). */
export function httpFailureReply(f: Failure, requestId: string, detail?: string): string {
  const a = FAILURES[f];
  return httpReply(a.status, a.error, detail ?? a.detail, requestId, a.status === 407 ? [PROXY_AUTHENTICATE] : []);
}

export function socksFailureReply(f: Failure): Buffer {
  return encodeReply(FAILURES[f].socks);
}
