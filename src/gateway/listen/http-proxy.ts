// The HTTP proxy listener's protocol: read one request head, admit the connection, then hand it to
// the CONNECT tunnel or the absolute-form forwarder. One request per connection.
import { afterAdmission, type ClientConn, type ProtocolHandler } from '../conn.js';
import { forwardRequest } from './forward.js';
import { formatHostPort } from '../../rules/host-port.js';
import {
  headerValues,
  parseAbsoluteHttpUrl,
  parseAuthority,
  parseProxyAuthorization,
  parseRequestHead,
  type RequestHead,
} from '../wire/http-head.js';
import { httpFailureReply, httpReply } from '../replies.js';
import { openConnectTunnel } from './http-connect.js';

const MAX_LOGGED_USERNAME = 255;

export class HttpProxyHandler implements ProtocolHandler {
  private scanned = 0;
  /** Bytes of empty lines skipped before the request line (at most four lines in all). */
  private blank = 0;

  constructor(private readonly conn: ClientConn) {}

  onBytes(): void {
    const { conn } = this;
    let buf = conn.queue.view();
    // Empty lines before the request line are ignored (RFC 9112 2.2), up to four of them.
    if (buf[0] === 0x0d && this.scanned === 0) {
      let i = 0;
      while (this.blank + i < 8 && buf[i] === 0x0d && buf[i + 1] === 0x0a) i += 2;
      if (i > 0) {
        this.blank += i;
        conn.queue.consume(i);
        buf = conn.queue.view();
      }
      if (buf.length === 1 && buf[0] === 0x0d) return; // the rest of a line break is still to come
    }
    const r = parseRequestHead(buf, conn.core.limits.maxHeaderBytes, this.scanned);
    if (r.kind === 'incomplete') {
      this.scanned = buf.length;
      return;
    }
    if (r.kind === 'error') {
      const [status, detail] =
        r.error === 'too_large'
          ? [431, 'request head too large']
          : r.error === 'bad_version'
            ? [505, 'HTTP version not supported (1.0 and 1.1 are)']
            : [400, 'malformed request head'];
      conn.refuse('malformed', httpReply(status, 'http_request_error', detail, conn.requestId));
      return;
    }
    conn.queue.consume(r.consumed);
    try {
      // The empty lines skipped before it were sent too: the forwarder meters them with the head.
      this.admitAndRoute(r.value, this.blank + r.consumed);
    } catch {
      conn.destroy();
    }
  }

  /** Admission, then the tunnel or the forwarder: in this turn when admission answers at once (conn.afterAdmission). */
  /** `headBytes`: the head's size on the wire (the forwarder meters it). */
  private admitAndRoute(head: RequestHead, headBytes: number): void {
    const { conn } = this;
    const { core } = conn;
    const isConnect = head.method === 'CONNECT';
    core.stats.connectionsTotal[isConnect ? 'connect' : 'http']++;
    conn.protocol = isConnect ? 'connect' : 'http';
    // Parsed once: for the log here, and for the dial (CONNECT's authority) below.
    const authority = isConnect ? parseAuthority(head.target) : null;
    conn.target = isConnect
      ? authority
        ? formatHostPort(authority.host, authority.port)
        : null
      : logTarget(head.target);
    const creds = parseProxyAuthorization(headerValues(head.headers, 'proxy-authorization'));
    if (creds === 'invalid') {
      // Not Basic, bad base64, no colon: the same 407 as wrong credentials; the log says what it was.
      core.countFailure('malformed');
      conn.refuse('malformed', httpFailureReply('unknown_user', conn.requestId));
      return;
    }
    // For the log: as presented, but no longer than 255 characters (as long as RFC 1929 lets a SOCKS5 one be; a
    // head may hold a username of kilobytes), never cut inside a surrogate pair.
    if (creds)
      conn.username = creds.username.length > MAX_LOGGED_USERNAME ? cutUsername(creds.username) : creds.username;
    afterAdmission(
      conn,
      () => conn.admit(creds),
      (failure) => {
        if (failure === 'gone') return;
        if (failure) return conn.failHttp(failure);
        if (isConnect) openConnectTunnel(conn, authority);
        else forwardRequest(conn, head, headBytes);
      },
    );
  }
}

function cutUsername(u: string): string {
  const end =
    (u.charCodeAt(MAX_LOGGED_USERNAME - 1) & 0xfc00) === 0xd800 ? MAX_LOGGED_USERNAME - 1 : MAX_LOGGED_USERNAME;
  return u.slice(0, end);
}

/** `host:port` an absolute-form request names, for the log: never the path or query (they can carry a customer's secrets). */
function logTarget(target: string): string | null {
  const t = parseAbsoluteHttpUrl(target);
  return t ? formatHostPort(t.host, t.port) : null;
}
