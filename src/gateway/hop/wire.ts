// The hop's wire, both ends (docs/decisions.md#d-030 "The hop"). Every hop connection is TLS 1.3 (ALPN
// `proxyd-hop/3`); first two lines:
//   entry → `AUTH <proof>[ <proof>]`   a proof: hex HMAC-SHA256(fleet secret, LABEL ‖ the session's exported
//                                       keying material), one per secret the entry holds (old and new while
//                                       a rotation settles); useless in any other TLS session
//   exit  → `OK`                        (no accepted proof: the connection closes, nothing said)
// then frames (mux.ts): every tunnel is a stream whose OPEN carries one line and whose REPLY answers it:
//   `DIAL <host> <port> <session key, URI-encoded, or -> <minutes> [<account id> [<dedicated address>]]` (the
//   account: for the exit to apply its target rules to the addresses it resolves and to leave from the account's
//   dedicated addresses; the address: the username's `-ip-`) → `OK <egress address> <port>`, and the stream carries the
//   tunnel's bytes both ways (half-close too), or `ERR <failure>` and the stream is over;
//   `UDP <session key or -> <minutes> [<account id> [<dedicated address>]]` → `OK udp [<egress address>]`, then datagrams in frames both ways (hop/udp.ts)
//   until the entry ends the stream.
// The release before spoke `proxyd-hop/2`: the same two lines, then `PING` → `PONG` lines and at most one DIAL or
// UDP line per connection, whose bytes followed on the connection itself. An exit still serves it, so exits
// can be upgraded before entries.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type net from 'node:net';
import type tls from 'node:tls';

/** The ALPN name of this wire (a client speaking anything else gets no application data through). */
export const ALPN = 'proxyd-hop/3';
/** The release before's wire (one tunnel per connection), still served by exits. */
export const ALPN_LEGACY = 'proxyd-hop/2';
const EKM_LABEL = 'EXPORTER-proxyd-hop-proof';
export const MAX_LINE = 1024;

/** RFC 5705 / RFC 8446 7.5: keying material only this TLS session has, on both of its ends. */
export function sessionBinding(s: tls.TLSSocket): Buffer {
  return s.exportKeyingMaterial(32, EKM_LABEL, Buffer.alloc(0));
}

export function hopProof(secret: Buffer, binding: Buffer): string {
  return createHmac('sha256', secret).update('proxyd-hop/2:').update(binding).digest('hex');
}

/** Whether one of `given` proves `secret` for this session (constant time per comparison). */
export function proves(given: readonly string[], secret: Buffer, binding: Buffer): boolean {
  const want = Buffer.from(hopProof(secret, binding), 'latin1');
  let ok = false;
  for (const g of given) {
    const b = Buffer.from(g, 'latin1');
    if (b.length === want.length && timingSafeEqual(b, want)) ok = true;
  }
  return ok;
}

/** Reads one `\n`-terminated line (at most MAX_LINE bytes); what came after it is put back on the socket. */
export function readLine(socket: net.Socket, timeoutMs: number): Promise<string | null> {
  if (socket.destroyed || socket.readableEnded) return Promise.resolve(null);
  return new Promise((resolve) => {
    let buf: Buffer = Buffer.alloc(0);
    const done = (line: string | null): void => {
      clearTimeout(timer);
      socket.removeListener('data', onData);
      socket.removeListener('close', onClose);
      socket.removeListener('end', onClose);
      socket.pause();
      resolve(line);
    };
    const onData = (c: Buffer): void => {
      buf = buf.length === 0 ? c : Buffer.concat([buf, c]);
      const nl = buf.indexOf(10);
      if (nl < 0) {
        if (buf.length > MAX_LINE) done(null);
        return;
      }
      const rest = buf.subarray(nl + 1);
      done(buf.subarray(0, nl).toString('latin1'));
      if (rest.length > 0) socket.unshift(rest);
    };
    const onClose = (): void => done(null);
    const timer = setTimeout(() => done(null), timeoutMs);
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.once('end', onClose);
    socket.resume();
  });
}
