// CONNECT host:port: resolve, check the address actually dialled, connect from the egress
// address, answer 200, then pump bytes (including any the client sent after its head).
import { dialTarget, type ClientConn } from '../conn.js';
import { parseAuthority, type RequestHead } from '../wire/http-head.js';
import { httpReply } from '../replies.js';
import { splice } from '../relay/splice.js';

/** The CONNECT `200`, with its request id (support finds an admitted tunnel's record by it too). */
function established(requestId: string): string {
  return `HTTP/1.1 200 Connection established\r\nVia: 1.1 proxyd\r\nProxy-Status: proxyd\r\nX-Request-Id: ${requestId}\r\n\r\n`;
}

export function openConnectTunnel(conn: ClientConn, head: RequestHead): void {
  const target = parseAuthority(head.target);
  if (!target) {
    conn.refuse('malformed', httpReply(400, 'http_request_error', 'CONNECT target must be host:port', conn.requestId));
    return;
  }
  void dialTarget(conn, target.host, target.port).then((out) => {
    if (!out) return;
    if (!out.ok) {
      conn.failHttp(out.failure, out.detail);
      return;
    }
    const early = conn.handOff('tunnel');
    if (!early) return void out.socket.destroy();
    conn.socket.write(established(conn.requestId), 'latin1');
    splice(conn, out.socket, early);
  }).catch(() => conn.destroy());
}
