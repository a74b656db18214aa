// startGateway: opens the HTTP proxy and SOCKS5 listeners (docs/gateway.md) over an Admitter the
// daemon provides. Plain `net` servers with hand-written parsers, so a PROXY header can precede
// either protocol and every byte after a handshake reaches the tunnel.
import net from 'node:net';
import { ClientConn, type ListenerKind } from './conn.js';
import { GatewayCore } from './core.js';
import { httpReply } from './replies.js';
import { canonicalIp, sourceKey } from './dial/target-policy.js';
import { HttpProxyHandler } from './listen/http-proxy.js';
import { Socks5Handler } from './listen/socks5.js';
import { UDP_DEFAULTS } from '../rules/udp-defaults.js';
import { startHopServer, type HopServer } from './hop/server.js';
import type { Gateway, GatewayOptions, GatewayStats } from './types.js';

export type * from './types.js';
export { DEFAULT_LIMITS } from './limits.js';
export { ByteBudget } from './relay/byte-budget.js';
export { RateBucket } from './relay/rate-budget.js';
export type { RateBudget } from './relay/rate-budget.js';
export { EgressPrefix } from './dial/egress-prefix.js';
export { canonicalIp, isPublicAddress, sourceKey } from './dial/target-policy.js';
export { AddressSessionTable, SessionTable } from './dial/sticky-sessions.js';
export type {
  ExpiringSessions,
  HeldAddress,
  StickyAddresses,
  StickyAssignment,
  StickySessions,
} from './dial/sticky-sessions.js';
export { CachingResolver } from './dial/resolver.js';
export { TargetRuleSet, parseRuleList, MAX_RULE_ITEMS } from './dial/target-rules.js';
export { ExitDirectory, EXIT_STALE_MS } from './hop/directory.js';
export { HopDialer } from './hop/dialer.js';
export {
  MAX_UNPROVEN as HOP_MAX_UNPROVEN,
  MAX_UNPROVEN_PER_SOURCE as HOP_MAX_UNPROVEN_PER_SOURCE,
} from './hop/server.js';
export { makeHopIdentity, readHopIdentity, FINGERPRINT } from './hop/identity.js';

function listen(server: net.Server, host: string, port: number, reusePort: boolean): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    // exclusive: a cluster worker's own socket, not a handle shared through the primary.
    server.listen({ host, port, backlog: 4096, ...(reusePort ? { exclusive: true, reusePort: true } : {}) }, () => {
      server.removeListener('error', onError);
      resolve();
    });
  });
}

function boundAddress(server: net.Server | null): { host: string; port: number } | null {
  const a = server?.address();
  if (!a || typeof a === 'string') return null;
  return { host: a.address, port: a.port };
}

export async function startGateway(opts: GatewayOptions): Promise<Gateway> {
  const core = new GatewayCore(opts);
  const { limits } = core;

  const accept = (kind: ListenerKind) => (socket: net.Socket) => {
    const peer = canonicalIp(socket.remoteAddress ?? '');
    const trusted = core.isTrustedPeer(peer);
    const source = trusted ? null : peer.includes(':') ? sourceKey(peer) : peer; // canonical: an IPv4 address has no ':'
    if (
      core.conns.size >= limits.maxConnectionsTotal ||
      (source !== null && (core.handshaking.get(source) ?? 0) >= limits.maxHandshakesPerSource)
    ) {
      socket.on('error', () => {});
      // A refused attempt like any other: its record (no account; `connection_limit`) under the id the 503 gives.
      const requestId = core.nextRequestId();
      opts.connectionLog?.record({
        startedAt: Date.now(),
        requestId,
        protocol: kind === 'http' ? 'http' : 'socks5',
        sourceIp: peer,
        username: null,
        accountId: -1,
        target: null,
        reason: 'connection_limit',
        bytesUp: 0,
        bytesDown: 0,
        durationMs: 0,
        exit: undefined,
        exitMovedFrom: undefined,
        datagramsUp: undefined,
        datagramsDown: undefined,
      });
      if (kind === 'http') socket.end(httpReply(503, 'proxy_internal_error', 'too many connections', requestId));
      else socket.destroy();
      setTimeout(() => socket.destroy(), 1000).unref();
      return;
    }
    const conn = new ClientConn(core, socket, kind, peer, trusted, source);
    conn.handler = kind === 'http' ? new HttpProxyHandler(conn) : new Socks5Handler(conn);
  };

  const servers: net.Server[] = [];
  const make = async (kind: ListenerKind, where: { host: string; port: number } | null): Promise<net.Server | null> => {
    if (!where) return null;
    // allowHalfOpen: a client's FIN must not close our side while the target is still answering.
    const server = net.createServer({ allowHalfOpen: true, pauseOnConnect: false, noDelay: true }, accept(kind));
    server.on('error', (err) => opts.log?.warn({ err: err.message, listener: kind }, 'gateway listener error'));
    await listen(server, where.host, where.port, opts.reusePort ?? false);
    servers.push(server);
    return server;
  };

  let httpServer: net.Server | null = null;
  let socksServer: net.Server | null = null;
  let hopServer: HopServer | null = null;
  try {
    httpServer = await make('http', opts.httpProxyListen);
    socksServer = await make('socks5', opts.socksListen);
    // An exit node: entries reach it on the hop listener (TLS, the fleet's secret), and it dials with its own dialer.
    if (opts.hop) {
      hopServer = await startHopServer({
        listen: opts.hop.listen,
        identity: opts.hop.identity,
        secrets: opts.hop.secrets,
        dialer: core.localDialer,
        core,
        onRefused: opts.hop.onRefused,
        unproven: opts.hop.unproven,
        screen: (accountId, host) => core.judgeTarget(accountId, host),
        udp: {
          drop: (reason) => core.countUdpDrop(reason),
          relayPorts: (opts.udp ?? UDP_DEFAULTS).ports,
        },
        reusePort: opts.reusePort ?? false,
      });
    }
  } catch (err) {
    for (const s of servers) s.close();
    throw err;
  }
  core.ownAddresses = [boundAddress(httpServer), boundAddress(socksServer), hopServer?.address() ?? null].filter(
    (a) => a !== null,
  );

  let closing: Promise<void> | null = null;
  return {
    httpProxyAddress: () => boundAddress(httpServer),
    socksAddress: () => boundAddress(socksServer),
    hopAddress: () => hopServer?.address() ?? null,
    setHopIdentity: (id) => hopServer?.setIdentity(id),
    stats(): GatewayStats {
      const s = core.stats;
      let bytesUp = s.bytesUp;
      let bytesDown = s.bytesDown;
      for (const c of core.conns) {
        bytesUp += c.bytesUp;
        bytesDown += c.bytesDown;
      }
      return {
        connectionsOpen: s.connectionsOpen,
        connectionsTotal: { ...s.connectionsTotal },
        admissionFailures: { ...s.admissionFailures },
        targetRefusals: { ...s.targetRefusals },
        refusals: { ...s.refusals },
        setup: { boundsMs: s.setup.boundsMs, counts: [...s.setup.counts], sumMs: s.setup.sumMs },
        bytesUp,
        bytesDown,
        egressConnections: { ...s.egressConnections },
        udp: { ...s.udp, dropped: { ...s.udp.dropped } },
      };
    },
    collectUsage: () => core.collectUsage(),
    closeWhere: (match) => core.closeWhere(match),
    closeEgressWhere: (match) => core.closeEgressWhere(match),
    collectEgressUsage: () => core.collectEgressUsage(),
    rebudget: (budgetFor) => core.rebudget(budgetFor),
    rerate: (rateFor) => core.rerate(rateFor),
    openConnections: (accountId, subject) => core.openConnections(accountId, subject),
    close(drainMs: number): Promise<void> {
      closing ??= (async () => {
        await Promise.all(
          servers
            .map((s) => new Promise<void>((r) => s.close(() => r())))
            .concat(drain(drainMs), hopServer?.close(drainMs) ?? []),
        );
      })();
      return closing;
    },
  };

  async function drain(drainMs: number): Promise<void> {
    // Handshakes in progress will not become tunnels any more: cut them now.
    for (const c of core.conns)
      if (c.state !== 'tunnel' && c.state !== 'forward' && c.state !== 'dialing' && c.state !== 'udp') c.destroy();
    const deadline = Date.now() + drainMs;
    while (core.conns.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
    for (const c of core.conns) c.destroy();
    while (core.conns.size > 0) await new Promise((r) => setTimeout(r, 5));
  }
}
