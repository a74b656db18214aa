// CONNECT host:port: resolve, check the address actually dialled, connect from the egress
// address, answer 200, then pump bytes (including any the client sent after its head).
import type net from 'node:net';
import type { ClientConn } from './conn.js';
import type { DialFailure, ResolveOutcome } from './core.js';
import { parseAuthority, type RequestHead } from './http-head.js';
import { dialReply, httpReply, resolveReply } from './replies.js';
import { splice } from './splice.js';

export type TargetFailure = Exclude<ResolveOutcome, { ok: true }>['reason'] | DialFailure;

export type DialOutcome = { ok: true; socket: net.Socket } | { ok: false; failure: TargetFailure; stage: 'resolve' | 'dial' };

/** The HTTP answer for a target that could not be resolved, was refused by policy, or could not be reached. */
export function targetFailureReply(out: Extract<DialOutcome, { ok: false }>): string {
  return out.stage === 'resolve'
    ? resolveReply(out.failure as Exclude<ResolveOutcome, { ok: true }>['reason'])
    : dialReply(out.failure as DialFailure);
}

/** Resolve and dial a target for an admitted connection. Resolves `null` if the client went away. */
export async function dialTarget(conn: ClientConn, host: string, port: number): Promise<DialOutcome | null> {
  const { core } = conn;
  const resolved = await core.resolveTarget(host, port);
  if (conn.closed) return null;
  if (!resolved.ok) return { ok: false, failure: resolved.reason, stage: 'resolve' };
  // From here the connect timeout governs; the header deadline no longer applies.
  conn.clearHeaderTimer();
  return new Promise((resolve) => {
    const socket = core.dial(resolved.address, resolved.family, port, (err) => {
      if (conn.closed) {
        socket.destroy();
        resolve(null);
      } else if (err) {
        conn.upstream = null;
        resolve({ ok: false, failure: err, stage: 'dial' });
      } else resolve({ ok: true, socket });
    });
    conn.upstream = socket;
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
