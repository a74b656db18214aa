// Which resolved target addresses the gateway may connect to (SSRF guard). Checked on the
// address actually dialled, after name resolution, so DNS rebinding cannot slip past.
import { isIPv4 } from 'node:net';
import { networkInterfaces } from 'node:os';
import ipaddr from 'ipaddr.js';
import { specialPurposeBlock } from '../../rules/ipv4-blocks.js';

export type TargetRefusal = 'private_target' | 'own_listener';

type Cidr = [ipaddr.IPv4 | ipaddr.IPv6, number];

function cidrs(list: string[]): Cidr[] {
  return list.map((c) => ipaddr.parseCIDR(c));
}

// Only global unicast 2000::/3 is public; within it, the special-purpose blocks are not.
const V6_GLOBAL = ipaddr.parseCIDR('2000::/3');
const V6_SPECIAL = cidrs([
  '2001::/23', // IETF protocol assignments (Teredo, benchmarking, ORCHID, AMT, ...)
  '2001:db8::/32', // documentation
  '2002::/16', // 6to4: embeds an IPv4 address
  '3fff::/20', // documentation
]);

/** Public IPv4 for a plain dotted quad: outside every special-purpose block (one list with the whitelist's). */
function isPublicV4(ip: string): boolean {
  return specialPurposeBlock(ip) === null;
}

function inAny(addr: ipaddr.IPv4 | ipaddr.IPv6, list: Cidr[]): boolean {
  for (const [net, bits] of list) {
    if (net.kind() === addr.kind() && addr.match(net, bits)) return true;
  }
  return false;
}

/** Parse an IP literal, unwrapping IPv4-mapped IPv6; null if not an IP literal. */
export function parseIp(ip: string): ipaddr.IPv4 | ipaddr.IPv6 | null {
  if (!ipaddr.isValid(ip)) return null;
  // ipaddr.isValid accepts legacy forms like "1" or "0x7f.1"; require dotted-quad or IPv6 text.
  if (!ip.includes(':') && !ipaddr.IPv4.isValidFourPartDecimal(ip)) return null;
  try {
    return ipaddr.process(ip);
  } catch {
    return null;
  }
}

/** Public (globally routable unicast) address? Unparseable counts as not public. */
export function isPublicAddress(ip: string): boolean {
  if (isIPv4(ip)) return isPublicV4(ip);
  const a = parseIp(ip);
  if (!a) return false;
  if (a.kind() === 'ipv4') return isPublicV4(a.toString());
  const v6 = a as ipaddr.IPv6;
  return v6.match(V6_GLOBAL) && !inAny(v6, V6_SPECIAL);
}

/** Canonical text of an IP (IPv4-mapped IPv6 becomes IPv4), or the input if not an IP. */
export function canonicalIp(ip: string): string {
  // Node's isIPv4 takes only plain decimal dotted quads (no leading zeros): already canonical.
  if (isIPv4(ip)) return ip;
  return parseIp(ip)?.toString() ?? ip;
}

/**
 * What a per-source limit counts by: an IPv4 address, or the /64 of an IPv6 one (a host holds a whole /64: by
 * address it had 2^64 fresh counters). The hop's unproven connections, the gateway's handshakes, and (through the
 * gateway's face) the daemon's failed-login budgets, API lock-out and console log-in limits.
 */
export function sourceKey(address: string): string {
  const a = parseIp(address); // an IPv4-mapped address comes back as IPv4
  if (!a) return address;
  if (a.kind() === 'ipv4') return a.toString();
  return `${(a as ipaddr.IPv6).parts
    .slice(0, 4)
    .map((p) => p.toString(16))
    .join(':')}::/64`;
}

function isUnspecified(a: ipaddr.IPv4 | ipaddr.IPv6): boolean {
  return a.range() === 'unspecified';
}

/** Whether `address` (an IP literal) reaches this host: unspecified, loopback, or one of its interfaces' addresses. */
export function isLocalAddress(address: string): boolean {
  const a = parseIp(address);
  return a !== null && isLocal(a);
}

function isLocal(a: ipaddr.IPv4 | ipaddr.IPv6): boolean {
  return isUnspecified(a) || a.range() === 'loopback' || localAddresses().has(a.toString());
}

function localAddresses(): Set<string> {
  const out = new Set<string>();
  for (const list of Object.values(networkInterfaces())) {
    for (const i of list ?? []) out.add(canonicalIp(i.address));
  }
  return out;
}

export interface TargetPolicyOptions {
  allowPrivateTargets: boolean;
  ownListeners: () => Array<{ host: string; port: number }>;
}

/**
 * Whether a plain dotted quad on `port` is one of our listeners, when every listener on that port is a plain
 * IPv4 address other than 0.0.0.0 ('unknown' otherwise: the general check decides).
 */
function ownListenerV4(
  address: string,
  port: number,
  listeners: Array<{ host: string; port: number }>,
): boolean | 'unknown' {
  let own = false;
  for (const l of listeners) {
    if (l.port !== port) continue;
    if (!isIPv4(l.host) || l.host === '0.0.0.0' || address === '0.0.0.0') return 'unknown';
    if (l.host === address) own = true;
  }
  return own;
}

/** null: the gateway may dial `address:port`; else why not. `address` must be an IP literal. */
export function checkTarget(address: string, port: number, opts: TargetPolicyOptions): TargetRefusal | null {
  if (isIPv4(address)) {
    const own = ownListenerV4(address, port, opts.ownListeners());
    if (own !== 'unknown') {
      if (own) return 'own_listener';
      return !opts.allowPrivateTargets && !isPublicV4(address) ? 'private_target' : null;
    }
  }
  const a = parseIp(address);
  if (!a) return 'private_target';
  if (reachesOwnListener(a, port, opts.ownListeners())) return 'own_listener';
  if (!opts.allowPrivateTargets && !isPublicAddress(a.toString())) return 'private_target';
  return null;
}

/** Whether `a:port` reaches one of `listeners` (a wildcard listener takes loopback, 0.0.0.0 and every local address). */
function reachesOwnListener(
  a: ipaddr.IPv4 | ipaddr.IPv6,
  port: number,
  listeners: Array<{ host: string; port: number }>,
): boolean {
  const text = a.toString();
  for (const l of listeners) {
    if (l.port !== port) continue;
    const la = parseIp(l.host);
    // Unknown host text, a wildcard listener, or a wildcard target: any local address reaches it.
    if (!la || isUnspecified(la) || isUnspecified(a)) {
      if (isLocal(a)) return true;
      continue;
    }
    if (la.toString() === text) return true;
  }
  return false;
}

/** `localhost` or a name under it (RFC 6761), in any case, with or without its final dot: this host's loopback. */
export function isLocalhostName(host: string): boolean {
  const name = host.toLowerCase().replace(/\.$/, '');
  return name === 'localhost' || name.endsWith('.localhost');
}

/**
 * Whether `host:port` reaches one of `listeners` (sockets of ours, matched as checkTarget matches the daemon's):
 * `host` an IP literal, or `localhost`; a name to resolve reaches none here. An entry asks it before a target goes
 * to an exit (dialer.ts, OwnListenerGuard), the UDP relay of a datagram's target and sender (udp-out.ts).
 */
export function reachesListener(host: string, port: number, listeners: Array<{ host: string; port: number }>): boolean {
  if (isLocalhostName(host))
    return (
      reachesOwnListener(ipaddr.parse('127.0.0.1'), port, listeners) ||
      reachesOwnListener(ipaddr.parse('::1'), port, listeners)
    );
  const a = parseIp(host);
  return a !== null && reachesOwnListener(a, port, listeners);
}
