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
// Both lines and their answers are written and read here only (encodeHopRequest, parseHopRequest, encodeHopAnswer,
// parseHopAnswer): link.ts on the entry, server.ts on the exit.
// The release before spoke `proxyd-hop/2`: the same two lines, then `PING` → `PONG` lines and at most one DIAL or
// UDP line per connection, whose bytes followed on the connection itself. An exit still serves it, so exits
// can be upgraded before entries.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type net from 'node:net';
import type tls from 'node:tls';
import { isStrictIPv4 } from '../../rules/ipv4-syntax.js';

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

/** A sticky session as the lines carry it (its key URI-encoded, `-` for none). */
export interface HopSession {
  key: string;
  minutes: number;
}

/**
 * What an entry asks on a new stream (the line of its OPEN): a tunnel to `host:port` (DIAL) or a UDP association
 * (UDP). The account (-1 or absent: none) and the dedicated address the username named go with either.
 */
export type HopRequest =
  | { kind: 'dial'; host: string; port: number; session: HopSession | null; accountId?: number; pin?: string | null }
  | { kind: 'udp'; session: HopSession | null; accountId?: number; pin?: string | null };

/** The exit's answer: a DIAL's tunnel (its egress address and port), a UDP association (its egress address), or a failure. */
export type HopAnswer =
  | { kind: 'dial'; egress: string | undefined; port: number | undefined }
  | { kind: 'udp'; egress: string | undefined }
  | { kind: 'err'; failure: string };

/** `DIAL <host> <port> <session> <minutes>[ <account>[ <pin>]]` or `UDP <session> <minutes>[ <account>[ <pin>]]`. */
export function encodeHopRequest(r: HopRequest): string {
  const key = r.session ? encodeURIComponent(r.session.key) : '-';
  const minutes = r.session?.minutes ?? 0;
  const tail = r.accountId !== undefined && r.accountId >= 0 ? ` ${r.accountId}${r.pin ? ` ${r.pin}` : ''}` : '';
  return r.kind === 'dial' ? `DIAL ${r.host} ${r.port} ${key} ${minutes}${tail}` : `UDP ${key} ${minutes}${tail}`;
}

// The pin is a token here, an IPv4 address only as isStrictIPv4 says (src/rules/ipv4-syntax.ts).
const UDP_LINE = /^UDP (\S+) (\d{1,4})(?: (\d{1,10})(?: (\S+))?)?$/;
const DIAL_LINE = /^DIAL (\S+) (\d{1,5}) (\S+) (\d{1,4})(?: (\d{1,10})(?: (\S+))?)?$/;

/** An OPEN's line as encodeHopRequest makes it; null for a line no entry makes (a bad port, a bad encoding). */
export function parseHopRequest(line: string): HopRequest | null {
  const u = UDP_LINE.exec(line);
  const m = u ? null : DIAL_LINE.exec(line);
  if (!u && (!m || Number(m[2]) > 65535)) return null;
  const [key, minutes, account, pin] = u ? [u[1]!, u[2]!, u[3], u[4]] : [m![3]!, m![4]!, m![5], m![6]];
  if (pin !== undefined && !isStrictIPv4(pin)) return null;
  let session: HopSession | null = null;
  try {
    session = key === '-' ? null : { key: decodeURIComponent(key), minutes: Number(minutes) };
  } catch {
    return null;
  }
  const accountId = account === undefined ? -1 : Number(account);
  if (u) return { kind: 'udp', session, accountId, pin: pin ?? null };
  return { kind: 'dial', host: m![1]!, port: Number(m![2]), session, accountId, pin: pin ?? null };
}

/** `OK <egress address> <port>` (`OK -` when it has none), `OK udp[ <egress address>]`, `ERR <failure>`. */
export function encodeHopAnswer(a: HopAnswer): string {
  if (a.kind === 'err') return `ERR ${a.failure}`;
  if (a.kind === 'udp') return a.egress === undefined ? 'OK udp' : `OK udp ${a.egress}`;
  return `OK ${a.egress ?? '-'}${a.egress && a.port ? ` ${a.port}` : ''}`;
}

const OK_EGRESS = /^OK (?:udp )?(\S+)(?: |$)/;

/** An answer as the entry reads it: OK, with the IPv4 egress address it names (usage by dedicated address), or the failure. */
export function parseHopAnswer(
  line: string,
): { ok: true; egress: string | undefined } | { ok: false; failure: string } {
  if (line.startsWith('OK')) {
    const egress = OK_EGRESS.exec(line)?.[1];
    return { ok: true, egress: isStrictIPv4(egress) ? egress : undefined };
  }
  return { ok: false, failure: line.slice(4) };
}
