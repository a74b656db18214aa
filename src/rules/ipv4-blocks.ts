// The IANA IPv4 Special-Purpose Address Registry (RFC 6890 and updates) plus multicast (224.0.0.0/4, from the IPv4
// address space registry): one list for the whitelist (contract/ipv4.ts, code 10421) and the gateway's target
// policy (gateway/dial/target-policy.ts, `private_target`). Blocks the registry marks globally reachable
// (192.0.0.9/32, 192.0.0.10/32, 192.31.196.0/24, 192.52.193.0/24, 192.175.48.0/24) are in too: none is a customer's
// egress address nor a target a proxy user may reach. Its sub-blocks (0.0.0.0/32, 192.0.0.0/29, 192.0.0.8/32,
// 192.0.0.170/32, 192.0.0.171/32, 192.88.99.2/32) lie inside the /24s and /8 below.
// Matched on integers: a plain dotted quad is checked without building objects.

export const SPECIAL_PURPOSE_BLOCKS: ReadonlyArray<readonly [net: string, bits: number, name: string]> = [
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

/** A canonical dotted quad (Node's isIPv4: four decimal octets, no leading zeros) as an unsigned 32-bit integer. */
export function ipv4ToInt(ip: string): number {
  let n = 0;
  let octet = 0;
  for (let i = 0; i < ip.length; i++) {
    const c = ip.charCodeAt(i);
    if (c === 46) {
      n = n * 256 + octet;
      octet = 0;
    } else octet = octet * 10 + (c - 48);
  }
  return n * 256 + octet;
}

const RANGES = SPECIAL_PURPOSE_BLOCKS.map(([net, bits, name]) => {
  const lo = ipv4ToInt(net);
  return [lo, lo + 2 ** (32 - bits) - 1, name] as const;
});

/** The name of the special-purpose block a canonical dotted quad lies in, or null for a public unicast address. */
export function specialPurposeBlock(ip: string): string | null {
  const n = ipv4ToInt(ip);
  for (const [lo, hi, name] of RANGES) if (n >= lo && n <= hi) return name;
  return null;
}
