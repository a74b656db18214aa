// The exit's end of the hop: a TLS 1.3 listener that may face the internet. Nothing is reachable before a
// completed handshake and a proof of the fleet secret bound to that TLS session; connections that have not
// proved it are bounded (in all, and per source address) and closed 10 s after accept. The exit dials
// through its own dialer (target policy, resolver, egress address or pool, sticky sessions); the entry
// admits, meters and logs, so each connection is counted once.
import { createHash } from 'node:crypto';
import net from 'node:net';
import tls from 'node:tls';
import type { Dialer, EgressSession, ResolveOutcome } from '../dial/dialer.js';
import { UdpOut } from '../dial/udp-out.js';
import { parseIp } from '../dial/target-policy.js';
import type ipaddr from 'ipaddr.js';
import type { AddressScreen, TargetDenial } from '../dial/target-rules.js';
import { destroySelf } from '../relay/sockets.js';
import { splice, type SpliceOwner } from '../relay/splice.js';
import type { HopIdentity } from './identity.js';
import { ALPN, proofAccepted, readLine, sessionBinding } from './wire.js';
import { readFrames, writeFrame } from './udp.js';

/** From accept to a proved secret (TCP, TLS handshake and the AUTH line), at most. */
const PROOF_DEADLINE_MS = 10_000;
/** Accepted connections that have not proved the secret yet, at most on an exit (the oldest goes for a new one)… */
export const MAX_UNPROVEN = 1_024;
/** …and at most this many of them from one source (an IPv4 address, an IPv6 /64; more are refused at once). */
export const MAX_UNPROVEN_PER_SOURCE = 64;
/** An authenticated connection waiting for its DIAL (a warm one in an entry's pool) is closed after this. */
const READY_IDLE_MS = 120_000;

export type HopRefusal = 'limit' | 'handshake' | 'proof';

export interface HopServerOptions {
  listen: { host: string; port: number };
  /** A socket of its own beside sibling workers' on the same port (SO_REUSEPORT). */
  reusePort?: boolean;
  identity: HopIdentity;
  /** The fleet secrets a proof may be made with now (the new one, and the old one while a rotation's grace lasts). */
  secrets: () => readonly Buffer[];
  /** The exit's own dialer (target policy, egress, sessions). */
  dialer: Dialer;
  /** The gateway's open tunnels (their idle sweep) and limits: a hop's tunnel runs in the same pump. */
  core: SpliceOwner['core'];
  /** A connection refused before it proved the secret (counted; never logged per attempt). */
  onRefused?: (why: HopRefusal) => void;
  /** From accept to a proved secret, at most (default 10 s; tests shorten it). */
  proofDeadlineMs?: number;
  /** This process's share of the exit's bounds on unproven connections (workers split them); default: all of them. */
  unproven?: { total: number; perSource: number };
  /** The target rules of an account for a target as asked: a refusal, a screen for its resolved addresses, or null. */
  screen?: (accountId: number, host: string) => { denied: TargetDenial } | AddressScreen | null;
  /** UDP associations an entry carries here: resolve and check targets (the account's rules too), the egress for a session, drops counted. */
  udp?: {
    resolve(host: string, port: number, accountId: number): Promise<ResolveOutcome>;
    egress(session: EgressSession | null): Promise<string | undefined>;
    drop(reason: 'policy' | 'unsolicited'): void;
  };
}

export interface HopServer {
  address(): { host: string; port: number };
  /** Connections open now (proving, warm and carrying tunnels). */
  open(): number;
  /** New connections are served with this identity (open ones keep theirs). */
  setIdentity(id: HopIdentity): void;
  /** Stops accepting, closes warm connections at once, lets tunnels finish for up to `drainMs`. */
  close(drainMs?: number): Promise<void>;
}

/** Where unproven connections are counted: an IPv4 address, or the /64 of an IPv6 one (a host holds a whole /64). */
export function sourceKey(address: string): string {
  const a = parseIp(address); // an IPv4-mapped address comes back as IPv4
  if (!a) return address;
  if (a.kind() === 'ipv4') return a.toString();
  return `${(a as ipaddr.IPv6).parts.slice(0, 4).map((p) => p.toString(16)).join(':')}::/64`;
}

/** A context per identity: TLS 1.3 only; session tickets keyed from the private key, so every worker of the exit resumes its entries' sessions. */
function contextFor(id: HopIdentity): tls.SecureContext {
  const ctx = tls.createSecureContext({ key: id.key, cert: id.cert, minVersion: 'TLSv1.3', maxVersion: 'TLSv1.3' });
  ctx.context.setTicketKeys(createHash('sha512').update('proxyd-hop tickets\0').update(id.key).digest().subarray(0, 48));
  return ctx;
}

export async function startHopServer(o: HopServerOptions): Promise<HopServer> {
  const sockets = new Set<net.Socket>();
  /** The ones carrying a tunnel (the rest are warm, or still proving the secret). */
  const relaying = new Set<net.Socket>();
  let closing = false;
  const maxTotal = o.unproven?.total ?? MAX_UNPROVEN;
  const maxPerSource = o.unproven?.perSource ?? MAX_UNPROVEN_PER_SOURCE;
  /** Connections that have not proved the secret yet, oldest first (a Set keeps insertion order). */
  const unproven = new Set<net.Socket>();
  const unprovenFrom = new Map<string, number>();
  let context = contextFor(o.identity);
  const server = net.createServer({ allowHalfOpen: true, noDelay: true, keepAlive: true }, (raw) => {
    const source = sourceKey(raw.remoteAddress ?? '');
    const fromSource = unprovenFrom.get(source) ?? 0;
    if (closing || fromSource >= maxPerSource) {
      o.onRefused?.('limit');
      return void raw.destroy();
    }
    // Full: the oldest unproven connection makes room (a flood churns itself; an entry proves in milliseconds).
    if (unproven.size >= maxTotal) {
      const oldest = unproven.values().next().value as net.Socket;
      o.onRefused?.('limit');
      oldest.destroy();
    }
    unproven.add(raw);
    unprovenFrom.set(source, fromSource + 1);
    let pending = true;
    /** Settled once: proved, refused or closed, whichever comes first (so each connection counts once). */
    const settle = (why: HopRefusal | null): void => {
      if (!pending) return;
      pending = false;
      clearTimeout(deadline);
      unproven.delete(raw);
      const n = (unprovenFrom.get(source) ?? 1) - 1;
      if (n > 0) unprovenFrom.set(source, n);
      else unprovenFrom.delete(source);
      if (why !== null) {
        o.onRefused?.(why);
        raw.destroy();
      }
    };
    const deadline = setTimeout(() => settle('handshake'), o.proofDeadlineMs ?? PROOF_DEADLINE_MS);
    raw.on('error', destroySelf);
    raw.once('close', () => settle(null));
    const s = new tls.TLSSocket(raw, { isServer: true, secureContext: context, ALPNProtocols: [ALPN] });
    sockets.add(s);
    // Not TLS, not TLS 1.3, a truncated handshake: refused (counted) before anything of ours is said.
    s.on('error', () => (pending ? settle('handshake') : s.destroy()));
    s.once('close', () => {
      sockets.delete(s);
      relaying.delete(s);
      raw.destroy();
    });
    s.once('secure', () => {
      if (s.alpnProtocol !== ALPN) return settle('handshake');
      void serveHop(s, o, () => relaying.add(s), () => settle(null), () => settle('proof')).catch(() => s.destroy());
    });
  });
  // An accept error (EMFILE, …) is the OS's to retry; it must not end the process.
  server.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: o.listen.host, port: o.listen.port, ...(o.reusePort ? { exclusive: true, reusePort: true } : {}) }, () => {
      server.removeListener('error', reject);
      resolve();
    });
  });
  const a = server.address() as net.AddressInfo;
  return {
    address: () => ({ host: a.address, port: a.port }),
    open: () => sockets.size,
    setIdentity(id: HopIdentity): void {
      context = contextFor(id);
    },
    async close(drainMs = 0): Promise<void> {
      closing = true;
      const closed = new Promise<void>((r) => server.close(() => r()));
      // Warm connections go now: their entries see it at once and send nothing more here.
      for (const s of sockets) if (!relaying.has(s)) s.destroy();
      const deadline = Date.now() + drainMs;
      while (relaying.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}

async function serveHop(s: tls.TLSSocket, o: HopServerOptions, onTunnel: () => void, onProved: () => void, onRefused: () => void): Promise<void> {
  const binding = sessionBinding(s);
  const auth = await readLine(s, o.proofDeadlineMs ?? PROOF_DEADLINE_MS);
  if (!auth?.startsWith('AUTH ') || !proofAccepted(auth.slice(5).split(' ', 4), o.secrets(), binding)) return onRefused();
  onProved();
  s.write('OK\n');
  for (;;) {
    const line = await readLine(s, READY_IDLE_MS);
    if (line === null) return void s.destroy();
    if (line === 'PING') {
      s.write('PONG\n');
      continue;
    }
    const u = /^UDP (\S+) (\d{1,4})(?: (\d{1,10}))?$/.exec(line);
    if (u) return void carryUdp(s, o, u[1]!, Number(u[2]), u[3] === undefined ? -1 : Number(u[3]), onTunnel).catch(() => s.destroy());
    const m = /^DIAL (\S+) (\d{1,5}) (\S+) (\d{1,4})(?: (\d{1,10}))?$/.exec(line);
    if (!m || Number(m[2]) > 65535) return void s.destroy();
    // The account's (and the service's) target rules on what the name resolves to here: the entry judged the
    // target as asked, but only this exit resolves it.
    const judged = m[5] !== undefined && o.screen ? o.screen(Number(m[5]), m[1]!) : null;
    if (judged && 'denied' in judged) {
      onTunnel();
      s.end(`ERR ${judged.denied}\n`, () => s.destroy());
      return;
    }
    onTunnel();
    let session: { key: string; minutes: number } | null = null;
    try {
      session = m[3] === '-' ? null : { key: decodeURIComponent(m[3]!), minutes: Number(m[4]) };
    } catch {
      return void s.destroy(); // not an encoding an entry makes
    }
    let upstream: net.Socket | null = null;
    const out = await o.dialer.dial({
      host: m[1]!,
      port: Number(m[2]),
      screen: judged,
      session,
      wanted: () => !s.destroyed,
      connecting: (u) => (upstream = u),
    });
    if (out === null) return void (upstream as net.Socket | null)?.destroy();
    if (!out.ok) {
      // The answer, then the connection goes whole (a half-closed socket never read again would stay in
      // CLOSE_WAIT, one per failed dial).
      s.end(`ERR ${out.failure}\n`, () => s.destroy());
      return;
    }
    s.write(`OK ${out.socket.localAddress ?? '-'}\n`);
    // The gateway's own pump (splice.ts): no budget, rate or metering here (the entry counts), the idle sweep alike.
    splice({ socket: s, upstream: null, budget: null, rate: null, bytesUp: 0, bytesDown: 0, core: o.core }, out.socket, Buffer.alloc(0));
    return;
  }
}

/** An entry's UDP association on this hop connection: its datagrams out from this exit, answers back in frames. */
async function carryUdp(s: tls.TLSSocket, o: HopServerOptions, key: string, minutes: number, accountId: number, onTunnel: () => void): Promise<void> {
  if (!o.udp) return void s.end('ERR host_unreachable\n', () => s.destroy());
  onTunnel();
  let session: EgressSession | null = null;
  try {
    session = key === '-' ? null : { key: decodeURIComponent(key), minutes };
  } catch {
    return void s.destroy(); // not an encoding an entry makes
  }
  const udp = o.udp;
  const out = new UdpOut({
    resolve: (host, port) => udp.resolve(host, port, accountId),
    egressAddress: await udp.egress(session),
    drop: (reason) => udp.drop(reason),
    onAnswer: (from, data) => void writeFrame(s, { host: from.address, port: from.port }, data),
  });
  s.once('close', () => out.close());
  s.on('end', () => s.end());
  s.write('OK udp\n');
  readFrames(s, (f) => void out.send(f.host, f.port, f.data));
}
