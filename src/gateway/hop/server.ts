// The exit's end of the hop: a TLS 1.3 listener that may face the internet. Nothing is reachable before a
// completed handshake and a proof of the fleet secret bound to that TLS session; connections that have not
// proved it are bounded (in all, and per source address) and closed 10 s after accept. The exit dials
// through its own dialer (target policy, resolver, egress address or pool, sticky sessions); the entry
// admits, meters and logs, so each connection is counted once.
import { createHash } from 'node:crypto';
import net from 'node:net';
import tls from 'node:tls';
import type { Dialer } from '../dial/dialer.js';
import { sourceKey } from '../dial/target-policy.js';
import type { AddressScreen, TargetDenial } from '../dial/target-rules.js';
import { destroySelf } from '../relay/sockets.js';
import { splice, type SpliceOwner } from '../relay/splice.js';
import type { HopIdentity } from './identity.js';
import { MuxSession } from './mux.js';
import {
  ALPN,
  ALPN_LEGACY,
  encodeHopAnswer,
  parseHopRequest,
  proves,
  readLine,
  sessionBinding,
  type HopRequest,
} from './wire.js';
import { readFrames, writeFrame } from './udp.js';

/** From accept to a proved secret (TCP, TLS handshake and the AUTH line), at most. */
const PROOF_DEADLINE_MS = 10_000;
/** Accepted connections that have not proved the secret yet, at most on an exit (the oldest goes for a new one)… */
export const MAX_UNPROVEN = 1_024;
/** …and at most this many of them from one source (an IPv4 address, an IPv6 /64; more are refused at once). */
export const MAX_UNPROVEN_PER_SOURCE = 64;
/** An authenticated connection that carries nothing and hears nothing (not even its entry's PINGs) is closed after this. */
const READY_IDLE_MS = 120_000;

export type HopRefusal = 'limit' | 'handshake' | 'proof';

export interface HopServerOptions {
  listen: { host: string; port: number };
  /** A socket of its own beside sibling workers' on the same port (SO_REUSEPORT). */
  reusePort?: boolean;
  identity: HopIdentity;
  /** The fleet secrets a proof may be made with now (the new one, and the old one while a rotation's grace lasts). */
  secrets: () => readonly Buffer[];
  /** The exit's own dialer (target policy, egress, sessions): a DIAL's connection, a UDP line's association (`associate`). */
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
  /** UDP associations an entry carries here (through the dialer's `associate`): drops counted. Absent: none is carried. */
  udp?: {
    drop(reason: 'policy' | 'unsolicited' | 'malformed'): void;
    /** This node's relay port range (an entry on the same host relays there): never a target on a local address. */
    relayPorts?: { lo: number; hi: number };
  };
}

export interface HopServer {
  address(): { host: string; port: number };
  /** Connections open now (proving, warm and carrying tunnels). */
  open(): number;
  /** Tunnels and UDP associations carried now. */
  tunnels(): number;
  /** New connections are served with this identity (open ones keep theirs). */
  setIdentity(id: HopIdentity): void;
  /** Stops accepting, closes warm connections at once, lets tunnels finish for up to `drainMs`. */
  close(drainMs?: number): Promise<void>;
}

/** A context per identity: TLS 1.3 only; session tickets keyed from the private key, so every worker of the exit resumes its entries' sessions. */
function contextFor(id: HopIdentity): tls.SecureContext {
  const ctx = tls.createSecureContext({ key: id.key, cert: id.cert, minVersion: 'TLSv1.3', maxVersion: 'TLSv1.3' });
  ctx.context.setTicketKeys(
    createHash('sha512').update('proxyd-hop tickets\0').update(id.key).digest().subarray(0, 48),
  );
  return ctx;
}

export async function startHopServer(o: HopServerOptions): Promise<HopServer> {
  const sockets = new Set<net.Socket>();
  /** Connections of the release before carrying a tunnel (the rest are warm, or still proving the secret). */
  const relaying = new Set<net.Socket>();
  /** Proved connections carrying streams. */
  const muxes = new Set<MuxSession>();
  /** Stopping: no new stream; a connection closes once its last one ends. */
  const drain = (mux: MuxSession): void => {
    mux.goAway();
    if (mux.streams.size === 0) mux.end();
  };
  // An entry's connections are probed every second: one silent for long (its entry gone without a FIN) is closed.
  const sweep = setInterval(() => {
    const old = Date.now() - READY_IDLE_MS;
    for (const mux of muxes) if (mux.streams.size === 0 && mux.lastHeard < old) mux.destroy();
  }, 10_000);
  sweep.unref();
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
    const s = new tls.TLSSocket(raw, { isServer: true, secureContext: context, ALPNProtocols: [ALPN, ALPN_LEGACY] });
    sockets.add(s);
    // Not TLS, not TLS 1.3, a truncated handshake: refused (counted) before anything of ours is said.
    s.on('error', () => (pending ? settle('handshake') : s.destroy()));
    s.once('close', () => {
      sockets.delete(s);
      relaying.delete(s);
      raw.destroy();
    });
    s.once('secure', () => {
      if (s.alpnProtocol !== ALPN && s.alpnProtocol !== ALPN_LEGACY) return settle('handshake');
      const hooks: ServeHooks = {
        proved: () => settle(null),
        refused: () => settle('proof'),
        tunnel: (t) => relaying.add(t),
        streams: (mux) => {
          muxes.add(mux);
          s.once('close', () => muxes.delete(mux));
          if (closing) drain(mux);
        },
      };
      void serveHop(s, o, hooks).catch(() => s.destroy());
    });
  });
  // An accept error (EMFILE, …) is the OS's to retry; it must not end the process.
  server.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(
      { host: o.listen.host, port: o.listen.port, ...(o.reusePort ? { exclusive: true, reusePort: true } : {}) },
      () => {
        server.removeListener('error', reject);
        resolve();
      },
    );
  });
  const a = server.address() as net.AddressInfo;
  return {
    address: () => ({ host: a.address, port: a.port }),
    open: () => sockets.size,
    tunnels: () => relaying.size + [...muxes].reduce((n, m) => n + m.streams.size, 0),
    setIdentity(id: HopIdentity): void {
      context = contextFor(id);
    },
    async close(drainMs = 0): Promise<void> {
      closing = true;
      clearInterval(sweep);
      const closed = new Promise<void>((r) => server.close(() => r()));
      // Connections without a tunnel go now (their entries see it at once and send nothing more here); the
      // others take no new stream and close with their last tunnel.
      for (const mux of muxes) drain(mux);
      const carrying = new Set<net.Socket>([...relaying, ...[...muxes].map((m) => m.socket)]);
      for (const s of sockets) if (!carrying.has(s)) s.destroy();
      const deadline = Date.now() + drainMs;
      while ((relaying.size > 0 || [...muxes].some((m) => m.streams.size > 0)) && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 25));
      // Their last tunnels ended: each connection closes after its last frames have gone, within the deadline.
      for (const mux of muxes) mux.end();
      while (muxes.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}

async function serveHop(s: tls.TLSSocket, o: HopServerOptions, hooks: ServeHooks): Promise<void> {
  const binding = sessionBinding(s);
  const auth = await readLine(s, o.proofDeadlineMs ?? PROOF_DEADLINE_MS);
  const given = auth?.startsWith('AUTH ') ? auth.slice(5).split(' ', 4) : [];
  // The secrets the proof matched (each HMAC made once): none refuses; a connection of streams keeps them.
  const proved = o.secrets().filter((secret) => proves(given, secret, binding));
  if (proved.length === 0) return hooks.refused();
  hooks.proved();
  s.write('OK\n');
  if (s.alpnProtocol === ALPN) return serveStreams(s, o, hooks, proved);
  // An entry of the release before (one tunnel per connection, line by line): served until every entry is upgraded.
  for (;;) {
    const line = await readLine(s, READY_IDLE_MS);
    if (line === null) return void s.destroy();
    if (line === 'PING') {
      s.write('PONG\n');
      continue;
    }
    hooks.tunnel(s);
    const carrier: Carrier = {
      socket: s,
      reply: (answer) => (answer.startsWith('ERR') ? s.end(`${answer}\n`, () => s.destroy()) : s.write(`${answer}\n`)),
      malformed: () => s.destroy(),
    };
    return openTunnel(carrier, line, o);
  }
}

/** What serveHop tells the listener: proved, refused, and the sockets or streams that carry tunnels. */
interface ServeHooks {
  proved(): void;
  refused(): void;
  /** A legacy connection became a tunnel (it is no longer a warm one). */
  tunnel(s: tls.TLSSocket): void;
  /** A connection of streams (drained and closed when the exit stops). */
  streams(mux: MuxSession): void;
}

/** What a tunnel is carried on: a stream of a connection (this release), or a whole connection (the release before). */
interface Carrier {
  socket: net.Socket;
  /** The answer to the OPEN (or DIAL line): `OK …` or `ERR <failure>` (which ends it). */
  reply(answer: string): void;
  /** A line no entry makes. */
  malformed(): void;
}

/** A connection of streams: each OPEN is a tunnel of its own; PINGs answered; a secret past its grace takes no new stream. */
function serveStreams(s: tls.TLSSocket, o: HopServerOptions, hooks: ServeHooks, proved: readonly Buffer[]): void {
  const mux: MuxSession = new MuxSession(s, {
    measureRtt: true,
    // Stopping (GOAWAY sent): the connection closes with its last tunnel.
    onIdle: () => mux.draining && mux.end(),
    onOpen: (stream, line) => {
      // Proved with a secret the exit no longer accepts (a rotation's grace ended): no new tunnel on it; the
      // entry opens a new connection with the current secret (tunnels open on this one go on).
      const current = o.secrets();
      if (!proved.some((p) => current.some((c) => c.equals(p)))) {
        stream.reply(encodeHopAnswer({ kind: 'err', failure: 'proof_expired' }));
        mux.goAway();
        return;
      }
      const carrier: Carrier = {
        socket: stream.asSocket(),
        reply: (answer) => stream.reply(answer),
        malformed: () => stream.reply(encodeHopAnswer({ kind: 'err', failure: 'host_unreachable' })),
      };
      void openTunnel(carrier, line, o).catch(() => stream.destroy());
    },
  });
  hooks.streams(mux);
}

/** One DIAL or UDP request, on whatever carries it. */
async function openTunnel(c: Carrier, line: string, o: HopServerOptions): Promise<void> {
  const s = c.socket;
  const r = parseHopRequest(line);
  if (r === null) return c.malformed();
  if (r.kind === 'udp') {
    await carryUdp(c, o, r).catch(() => s.destroy());
    return;
  }
  const accountId = r.accountId ?? -1;
  // The account's (and the service's) target rules on what the name resolves to here: the entry judged the
  // target as asked, but only this exit resolves it.
  const judged = accountId >= 0 && o.screen ? o.screen(accountId, r.host) : null;
  if (judged && 'denied' in judged) return c.reply(encodeHopAnswer({ kind: 'err', failure: judged.denied }));
  let upstream: net.Socket | null = null;
  const out = await o.dialer.dial({
    host: r.host,
    port: r.port,
    screen: judged,
    session: r.session,
    accountId,
    pin: r.pin ?? null,
    stillWanted: () => !s.destroyed,
    connecting: (u) => (upstream = u),
  });
  if (out === null) {
    (upstream as net.Socket | null)?.destroy();
    return;
  }
  // The answer, then (an ERR) the carrier goes whole: a half-closed socket never read again would stay in
  // CLOSE_WAIT, one per failed dial.
  if (!out.ok) return c.reply(encodeHopAnswer({ kind: 'err', failure: out.failure }));
  // Its egress address and port: what the entry's SOCKS5 reply names as BND (the hop's own would leak the entry's side).
  const { localAddress, localPort } = out.socket;
  c.reply(encodeHopAnswer({ kind: 'dial', egress: localAddress, port: localPort }));
  // The gateway's own pump (splice.ts): no budget, rate or metering here (the entry counts), the idle sweep alike.
  splice(
    { socket: s, upstream: null, budget: null, rate: null, bytesUp: 0, bytesDown: 0, core: o.core },
    out.socket,
    Buffer.alloc(0),
  );
}

/**
 * An entry's UDP association on this carrier: a carrier from the exit's own dialer (its egress for the session,
 * each target resolved and judged here, the account's rules too), datagrams in from frames, answers back in frames.
 */
async function carryUdp(c: Carrier, o: HopServerOptions, r: Extract<HopRequest, { kind: 'udp' }>): Promise<void> {
  const s = c.socket;
  const udp = o.udp;
  if (!udp || !o.dialer.associate) return c.reply(encodeHopAnswer({ kind: 'err', failure: 'host_unreachable' }));
  const accountId = r.accountId ?? -1;
  const screen = o.screen;
  const out = await o.dialer.associate({
    session: r.session,
    accountId,
    pin: r.pin ?? null,
    stillWanted: () => !s.destroyed,
    ...(screen ? { judge: (host: string) => screen(accountId, host) } : {}),
    ...(udp.relayPorts ? { relayPorts: udp.relayPorts } : {}),
    drop: (reason) => udp.drop(reason),
  });
  if (out === null) return;
  if (!out.ok) return c.reply(encodeHopAnswer({ kind: 'err', failure: 'no_exit' }));
  const carrier = out.carrier;
  // Its egress address changing hands (dedicated addresses) ends the stream, and the entry's association with it.
  carrier.receive(
    (from, data) => void writeFrame(s, { host: from.address, port: from.port }, data),
    () => s.destroy(),
  );
  s.once('close', () => carrier.close());
  s.on('end', () => s.end());
  // The address it leaves from, when bound to one: the entry counts usage by dedicated address.
  c.reply(encodeHopAnswer({ kind: 'udp', egress: out.egress }));
  readFrames(s, (f) => void carrier.send(f.host, f.port, f.data));
}
