// Stage tls: TLS handshake with the target through the tunnel: SNI, certificate chain and host name
// checked against the default CAs plus `--ca`.
import * as tls from 'node:tls';
import { isIP } from 'node:net';
import { fail, ok, type StageFn } from './stage.js';
import type { TlsReason } from './types.js';

const REASONS: Record<string, { reason: TlsReason; text: string }> = {
  CERT_HAS_EXPIRED: { reason: 'expired', text: 'certificate expired' },
  CERT_NOT_YET_VALID: { reason: 'not_yet_valid', text: 'certificate not yet valid (check the clock)' },
  ERR_TLS_CERT_ALTNAME_INVALID: { reason: 'wrong_host', text: 'certificate is for another host name (wrong host)' },
  DEPTH_ZERO_SELF_SIGNED_CERT: { reason: 'self_signed', text: 'self-signed certificate' },
  SELF_SIGNED_CERT_IN_CHAIN: { reason: 'self_signed', text: 'self-signed certificate in the chain (untrusted root)' },
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: { reason: 'untrusted', text: 'certificate issuer not trusted (unable to verify)' },
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: {
    reason: 'untrusted',
    text: 'certificate issuer not trusted (issuer not in the CA list)',
  },
  UNABLE_TO_GET_ISSUER_CERT: { reason: 'untrusted', text: 'certificate issuer unknown' },
  CERT_UNTRUSTED: { reason: 'untrusted', text: 'certificate not trusted' },
  CERT_REVOKED: { reason: 'revoked', text: 'certificate revoked' },
  CERT_SIGNATURE_FAILURE: { reason: 'untrusted', text: 'certificate signature invalid' },
};

/**
 * OpenSSL's reason ("wrong version number"): Node's `reason`, else the field after the function name in its
 * error-queue line (`…:error:0A00010B:SSL routines:<function>:<reason>:<file>:<line>:`); else the message.
 */
function opensslReason(err: Error & { reason?: unknown }): string {
  if (typeof err.reason === 'string' && err.reason.trim()) return err.reason.trim();
  const queued = /SSL routines:[^:]*:([^:]+)/.exec(err.message);
  return (queued ? queued[1]! : err.message).trim();
}

export function classifyTlsError(
  err: NodeJS.ErrnoException & { cert?: { subjectaltname?: string } },
  host: string,
): { reason: TlsReason; text: string } {
  const code = err.code ?? '';
  const known = REASONS[code];
  if (known?.reason === 'wrong_host') {
    const names = err.cert?.subjectaltname;
    return {
      ...known,
      text: `certificate is for ${names ? names.replace(/, /g, ' ') : 'another host'}, not ${host} (wrong host)`,
    };
  }
  if (known) return known;
  if (code.startsWith('ERR_SSL_') || code === 'ECONNRESET' || code === 'EPROTO') {
    return { reason: 'handshake', text: `handshake failed: ${opensslReason(err) || code}` };
  }
  return { reason: 'other', text: `${code ? `${code}: ` : ''}${err.message}` };
}

function defaultCAs(): readonly string[] {
  const get = (tls as unknown as { getCACertificates?: (kind: string) => string[] }).getCACertificates;
  return get ? get('default') : tls.rootCertificates;
}

const contexts = new Map<string, tls.SecureContext>();

/**
 * The default trust store plus `--ca`, built once per process. Passing `ca: [...defaults, extra]`
 * re-parses every root certificate (~40 ms); adding the extra CA to a copy of the default store
 * costs ~1 ms, so that is tried first (the native `addCACert`, which Node copies-on-write).
 */
export function secureContextFor(ca: string | undefined): tls.SecureContext | undefined {
  if (!ca) return undefined;
  let ctx = contexts.get(ca);
  if (!ctx) {
    ctx = tls.createSecureContext();
    const native = (ctx as unknown as { context?: { addCACert?: (pem: string) => void } }).context;
    if (typeof native?.addCACert === 'function') native.addCACert(ca);
    else ctx = tls.createSecureContext({ ca: [...defaultCAs(), ca] });
    contexts.set(ca, ctx);
  }
  return ctx;
}

function cn(name: unknown): string {
  const n = name as Record<string, string | string[]> | undefined;
  const v = n?.CN ?? n?.O;
  return Array.isArray(v) ? v.join(',') : (v ?? '?');
}

export const tlsStage: StageFn = (ctx, signal) =>
  new Promise((resolve) => {
    const { host } = ctx.target;
    const sock = tls.connect({
      socket: ctx.socket!,
      servername: isIP(host) ? undefined : host, // SNI carries names only
      host,
      secureContext: secureContextFor(ctx.opts.ca),
      rejectUnauthorized: true,
      ALPNProtocols: ['http/1.1'],
    });
    ctx.sockets.add(sock);
    signal.addEventListener('abort', () => sock.destroy(), { once: true });
    sock.once('secureConnect', () => {
      sock.removeAllListeners('error');
      sock.on('error', () => {});
      ctx.tlsSocket = sock;
      const cert = sock.getPeerCertificate();
      const sni = isIP(host) ? 'no SNI (IP target)' : `SNI ${host}`;
      resolve(
        ok(
          `${sock.getProtocol() ?? 'TLS'}, ${sni}, certificate CN=${cn(cert.subject)} by CN=${cn(cert.issuer)}, valid until ${new Date(cert.valid_to).toISOString().slice(0, 10)}`,
        ),
      );
    });
    sock.once('error', (err: NodeJS.ErrnoException) => {
      const c = classifyTlsError(err, host);
      resolve(fail(c.text, { kind: 'tls', code: err.code ?? 'ERROR', reason: c.reason }));
    });
  });
