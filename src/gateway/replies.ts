// The gateway's own HTTP answers (always final: the connection closes after them).
import type { AdmitFailure } from './types.js';
import type { DialFailure, ResolveOutcome } from './dialer.js';

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

export function admissionReply(reason: AdmitFailure | 'admission_error'): string {
  switch (reason) {
    case 'over_connection_limit':
      return httpReply(429, 'too many concurrent connections for this account');
    case 'admission_error':
      return httpReply(503, 'admission temporarily unavailable');
    default:
      // Same answer for every credential or whitelist failure: no hint which part was wrong.
      return httpReply(407, 'proxy authentication required', [PROXY_AUTHENTICATE]);
  }
}

export function resolveReply(reason: Exclude<ResolveOutcome, { ok: true }>['reason']): string {
  switch (reason) {
    case 'private_target':
      return httpReply(403, 'target address not allowed');
    case 'own_listener':
      return httpReply(403, 'target is this proxy');
    case 'dns_failed':
      return httpReply(502, 'target name could not be resolved');
    case 'no_usable_address':
      return httpReply(502, 'target has no address reachable from the egress address');
  }
}

export function dialReply(err: DialFailure): string {
  if (err === 'timeout') return httpReply(504, 'connecting to the target timed out');
  if (err === 'refused') return httpReply(502, 'target refused the connection');
  return httpReply(502, 'target unreachable');
}
