// CONNECT host:port: resolve, check the address actually dialled, connect from the egress
// address, answer 200, then pump bytes (including any the client sent after its head).
import type net from 'node:net';
import type { ClientConn } from './conn.js';
import { parseAuthority, type RequestHead } from './http-head.js';
import { httpFailureReply, httpReply, type Failure } from './replies.js';
import { splice } from './splice.js';

export type DialOutcome = { ok: true; socket: net.Socket } | { ok: false; failure: Failure };

/** Resolve and dial a target for an admitted connection. `null` if the client went away. */
export async function dialTarget(conn: ClientConn, host: string, port: number): Promise<DialOutcome | null> {
  const { core } = conn;
  if (!conn.to('resolving')) return null;
  const resolved = await core.resolveTarget(host, port);
  if (conn.closed) return null;
  if (!resolved.ok) return { ok: false, failure: resolved.reason };
  if (!conn.to('dialing')) return null;
  return new Promise((resolve) => {
    const socket = core.dial(resolved.address, resolved.family, port, (err) => {
      if (conn.closed) {
        socket.destroy();
        resolve(null);
      } else if (err) {
        conn.upstream = null;
        resolve({ ok: false, failure: err });
      } else resolve({ ok: true, socket });
    });
    conn.upstream = socket;
  });
}

const ESTABLISHED = Buffer.from('HTTP/1.1 200 Connection established\r\n\r\n', 'latin1');

export function openConnectTunnel(conn: ClientConn, head: RequestHead): void {
  const target = parseAuthority(head.target);
  if (!target) {
    conn.endWithReply(httpReply(400, 'CONNECT target must be host:port'));
    return;
  }
  void dialTarget(conn, target.host, target.port).then((out) => {
    if (!out) return;
    if (!out.ok) {
      conn.endWithReply(httpFailureReply(out.failure));
      return;
    }
    const early = conn.handOff('tunnel');
    if (!early) return void out.socket.destroy();
    conn.socket.write(ESTABLISHED);
    splice(conn, out.socket, early);
  }).catch(() => conn.destroy());
}
