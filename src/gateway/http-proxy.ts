// The HTTP proxy listener's protocol: read one request head, admit the connection, then hand it to
// the CONNECT tunnel or the absolute-form forwarder. One request per connection.
import type { ClientConn, ProtocolHandler } from './conn.js';
import { forwardRequest } from './forward.js';
import { headerValues, parseProxyAuthorization, parseRequestHead, type RequestHead } from './http-head.js';
import { httpFailureReply, httpReply } from './replies.js';
import { openConnectTunnel } from './http-connect.js';

export class HttpProxyHandler implements ProtocolHandler {
  private scanned = 0;

  constructor(private readonly conn: ClientConn) {}

  onBytes(): void {
    const { conn } = this;
    const buf = conn.queue.view();
    const r = parseRequestHead(buf, conn.core.limits.maxHeaderBytes, this.scanned);
    if (r.kind === 'incomplete') {
      this.scanned = buf.length;
      return;
    }
    if (r.kind === 'error') {
      const status = r.error === 'too_large' ? 431 : r.error === 'bad_version' ? 505 : 400;
      conn.endWithReply(httpReply(status, 'malformed request head'));
      return;
    }
    conn.queue.consume(r.consumed);
    this.admitAndRoute(r.value).catch(() => conn.destroy());
  }

  private async admitAndRoute(head: RequestHead): Promise<void> {
    const { conn } = this;
    const { core } = conn;
    const isConnect = head.method === 'CONNECT';
    core.stats.connectionsTotal[isConnect ? 'connect' : 'http']++;
    const creds = parseProxyAuthorization(headerValues(head.headers, 'proxy-authorization'));
    if (creds === 'invalid') {
      core.countFailure('bad_credentials');
      conn.endWithReply(httpFailureReply('bad_credentials'));
      return;
    }
    const failure = await conn.admit(creds);
    if (failure === 'gone') return;
    if (failure) {
      conn.endWithReply(httpFailureReply(failure));
      return;
    }
    if (isConnect) openConnectTunnel(conn, head);
    else forwardRequest(conn, head);
  }
}
