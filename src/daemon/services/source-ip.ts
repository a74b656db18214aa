// The caller's address as the API and the console see it (after trusted X-Forwarded-For, which Fastify's trustProxy handles).
import { isIP } from 'node:net';
import type { FastifyRequest } from 'fastify';
import { canonicalIp } from '../../gateway/index.js';
import { splitHostPort } from '../../rules/host-port.js';

/**
 * The address of a forwarded entry as balancers write it: `a.b.c.d`, `a.b.c.d:port` or `[v6]:port` (Azure
 * Application Gateway adds the client's port); null when it names no address.
 */
function addressOf(entry: string): string | null {
  if (isIP(entry)) return entry;
  // HOST:PORT as src/rules/host-port.ts reads it; a bare `[v6]` reads as `[v6]:0`.
  const hp = splitHostPort(entry) ?? splitHostPort(`${entry}:0`);
  return hp && isIP(hp.host) ? hp.host : null;
}

export function sourceIp(request: FastifyRequest): string {
  // An entry naming no address counts as the peer's own (the balancer), as a request without the header does.
  // As the gateway writes addresses (an IPv4-mapped one as IPv4, IPv6 in RFC 5952 form).
  return canonicalIp(addressOf(request.ip) ?? request.socket.remoteAddress ?? request.ip);
}

/**
 * What the per-source limits (the invalid-token lock-out, the console's log-in limits, the failed-login budgets)
 * count by: the gateway's per-source key (an IPv4 address, or the /64 of an IPv6 one).
 */
export { sourceKey as sourceLimitKey } from '../../gateway/index.js';
