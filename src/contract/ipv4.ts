// Whitelist IPv4 policy: strict dotted-decimal syntax, then the IANA special-purpose registry.
import ipaddr from 'ipaddr.js';
import { isStrictIPv4 } from './ipv4-syntax.js';

export { isStrictIPv4 };

/**
 * IANA IPv4 Special-Purpose Address Registry (RFC 6890 and updates) plus multicast.
 * Every block is refused for the whitelist, including the few marked globally reachable
 * (192.0.0.9/32, 192.0.0.10/32, 192.31.196.0/24, 192.52.193.0/24, 192.175.48.0/24):
 * none can be a customer's egress address.
 */
const SPECIAL_PURPOSE_BLOCKS: ReadonlyArray<readonly [string, number, string]> = [
  ['0.0.0.0', 8, 'this network'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'shared address space (CGNAT)'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link local'],
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'IETF protocol assignments'],
  ['192.0.2.0', 24, 'documentation (TEST-NET-1)'],
  ['192.31.196.0', 24, 'AS112-v4'],
  ['192.52.193.0', 24, 'AMT'],
  ['192.88.99.0', 24, 'deprecated 6to4 relay anycast'],
  ['192.168.0.0', 16, 'private'],
  ['192.175.48.0', 24, 'direct delegation AS112 service'],
  ['198.18.0.0', 15, 'benchmarking'],
  ['198.51.100.0', 24, 'documentation (TEST-NET-2)'],
  ['203.0.113.0', 24, 'documentation (TEST-NET-3)'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved'],
  ['255.255.255.255', 32, 'limited broadcast'],
];

const PARSED_BLOCKS = SPECIAL_PURPOSE_BLOCKS.map(
  ([net, bits, name]) => [ipaddr.IPv4.parse(net), bits, name] as const,
);

/** The name of the special-purpose block an address lies in, or null for a public unicast address. */
export function specialPurposeBlock(ip: string): string | null {
  const addr = ipaddr.IPv4.parse(ip);
  for (const [net, bits, name] of PARSED_BLOCKS) {
    if (addr.match(net, bits)) return name;
  }
  return null;
}

type Ipv4Verdict = { ok: true } | { ok: false; code: 10420 | 10421 };

/** Syntax and public-address checks; the mainland-China rule needs the country database and lives in the daemon. */
export function checkWhitelistIpv4(s: unknown): Ipv4Verdict {
  if (!isStrictIPv4(s)) return { ok: false, code: 10420 };
  if (specialPurposeBlock(s) !== null) return { ok: false, code: 10421 };
  return { ok: true };
}

/** Unicode code points, not UTF-16 units. */
export function codePointLength(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

export const MAX_REMARK_CODE_POINTS = 255;
