// CONNECT host:port: resolve, check the address actually dialled, connect from the egress
// address, answer 200, then pump bytes (including any the client sent after its head).
import type { ClientConn } from './conn.js';
import type { DialFailure, DialOutcome, ResolveOutcome } from './dialer.js';
import { parseAuthority, type RequestHead } from './http-head.js';
import { dialReply, httpReply, resolveReply } from './replies.js';
import { splice } from './splice.js';

export type { DialOutcome, TargetFailure } from './dialer.js';

/** The HTTP answer for a target that could not be resolved, was refused by policy, or could not be reached. */
export function targetFailureReply(out: Extract<DialOutcome, { ok: false }>): string {
  return out.stage === 'resolve'
    ? resolveReply(out.failure as Exclude<ResolveOutcome, { ok: true }>['reason'])
    : dialReply(out.failure as DialFailure);
}

/** Resolve and dial a target for an admitted connection, through the gateway's dialer. Resolves `null` if the client went away. */
export function dialTarget(conn: ClientConn, host: string, port: number): Promise<DialOutcome> {
  return conn.core.dialer.dial({
    host,
    port,
    session: conn.egressSession,
    wanted: () => !conn.closed,
    connecting: (socket) => {
      // From here the connect timeout governs; the header deadline no longer applies.
      conn.clearHeaderTimer();
      conn.upstream = socket;
    },
  }).then((out) => {
    if (out && !out.ok) conn.upstream = null;
    return out;
  });
}

const ESTABLISHED = Buffer.from('HTTP/1.1 200 Connection established\r\nVia: 1.1 proxyd\r\n\r\n', 'latin1');

export function openConnectTunnel(conn: ClientConn, head: RequestHead): void {
  const target = parseAuthority(head.target);
  if (!target) {
    conn.endWithReply(httpReply(400, 'CONNECT target must be host:port'));
    return;
  }
  void dialTarget(conn, target.host, target.port).then((out) => {
    if (!out) return;
    if (!out.ok) {
      conn.endWithReply(targetFailureReply(out));
      return;
    }
    const early = conn.handOff();
    conn.socket.write(ESTABLISHED);
    splice(conn, out.socket, early);
  }).catch(() => conn.destroy());
}
