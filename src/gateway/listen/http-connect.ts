// CONNECT host:port: resolve, check the address actually dialled, connect from the egress
// address, answer 200, then pump bytes (including any the client sent after its head).
import { dialTarget, type ClientConn } from '../conn.js';
import type { Authority } from '../wire/http-head.js';
import { httpReply } from '../replies.js';
import { splice } from '../relay/splice.js';

const ESTABLISHED_HEAD =
  'HTTP/1.1 200 Connection established\r\nVia: 1.1 proxyd\r\nProxy-Status: proxyd\r\nX-Request-Id: ';
const PREPARED = Buffer.from(ESTABLISHED_HEAD, 'latin1');
const HEAD_BYTES = PREPARED.length;

/**
 * The CONNECT `200`, with its request id (support finds an admitted tunnel's record by it too): the fixed
 * part copied from a prepared buffer, the id written after it (no string built and encoded per tunnel).
 */
export function established(requestId: string): Buffer {
  const out = Buffer.allocUnsafe(HEAD_BYTES + requestId.length + 4);
  PREPARED.copy(out, 0);
  const end = HEAD_BYTES + out.write(requestId, HEAD_BYTES, 'latin1');
  out.writeUInt32BE(0x0d0a0d0a, end);
  return out;
}

/** `target`: the request's authority as parsed (null: it was not host:port). */
export function openConnectTunnel(conn: ClientConn, target: Authority | null): void {
  if (!target) {
    conn.refuse('malformed', httpReply(400, 'http_request_error', 'CONNECT target must be host:port', conn.requestId));
    return;
  }
  void dialTarget(conn, target.host, target.port)
    .then((out) => {
      if (!out) return;
      if (!out.ok) {
        conn.failHttp(out.failure, out.detail);
        return;
      }
      const early = conn.handOff('tunnel');
      if (!early) return void out.socket.destroy();
      conn.socket.write(established(conn.requestId));
      splice(conn, out.socket, early);
    })
    .catch(() => conn.destroy());
}
