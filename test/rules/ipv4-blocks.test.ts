// One list of IANA special-purpose IPv4 blocks for the whitelist (10421) and the gateway's target policy.
import ipaddr from 'ipaddr.js';
import { describe, expect, it } from 'vitest';
import { checkWhitelistIpv4 } from '../../src/contract/ipv4.js';
import { checkTarget, isPublicAddress } from '../../src/gateway/dial/target-policy.js';
import { ipv4ToInt, SPECIAL_PURPOSE_BLOCKS, specialPurposeBlock } from '../../src/rules/ipv4-blocks.js';

const fromInt = (n: number) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
const policy = { allowPrivateTargets: false, ownListeners: () => [] };

describe('special-purpose IPv4 blocks (src/rules/ipv4-blocks.ts)', () => {
  // The IANA registry (iana.org/assignments/iana-ipv4-special-registry), each entry by its own CIDR, plus multicast.
  const IANA = [
    '0.0.0.0/8',
    '0.0.0.0/32',
    '10.0.0.0/8',
    '100.64.0.0/10',
    '127.0.0.0/8',
    '169.254.0.0/16',
    '172.16.0.0/12',
    '192.0.0.0/24',
    '192.0.0.0/29',
    '192.0.0.8/32',
    '192.0.0.9/32',
    '192.0.0.10/32',
    '192.0.0.170/32',
    '192.0.0.171/32',
    '192.0.2.0/24',
    '192.31.196.0/24',
    '192.52.193.0/24',
    '192.88.99.0/24',
    '192.88.99.2/32',
    '192.168.0.0/16',
    '192.175.48.0/24',
    '198.18.0.0/15',
    '198.51.100.0/24',
    '203.0.113.0/24',
    '240.0.0.0/4',
    '255.255.255.255/32',
    '224.0.0.0/4',
  ];

  it.each(IANA)('%s: first and last address refused by the whitelist and the target policy alike', (cidr) => {
    const [net, bits] = ipaddr.parseCIDR(cidr) as [ipaddr.IPv4, number];
    const lo = ipv4ToInt(net.toString());
    for (const ip of [fromInt(lo), fromInt(lo + 2 ** (32 - bits) - 1)]) {
      expect(specialPurposeBlock(ip)).not.toBeNull();
      expect(checkWhitelistIpv4(ip)).toEqual({ ok: false, code: 10421 });
      expect(isPublicAddress(ip)).toBe(false);
      expect(isPublicAddress(`::ffff:${ip}`)).toBe(false);
      expect(checkTarget(ip, 443, policy)).toBe('private_target');
    }
  });

  it('holds nothing the registry does not name', () => {
    const iana = IANA.map((c) => ipaddr.parseCIDR(c) as [ipaddr.IPv4, number]);
    for (const [net, bits] of SPECIAL_PURPOSE_BLOCKS)
      expect(iana.some(([n, b]) => n.toString() === net && b === bits)).toBe(true);
  });

  it('the addresses around each block are public on both sides', () => {
    for (const [net, bits] of SPECIAL_PURPOSE_BLOCKS) {
      const lo = ipv4ToInt(net);
      for (const n of [lo - 1, lo + 2 ** (32 - bits)]) {
        if (n < 0 || n > 0xffffffff) continue;
        const ip = fromInt(n);
        const special = specialPurposeBlock(ip) !== null; // a neighbouring block
        expect(checkWhitelistIpv4(ip).ok).toBe(!special);
        expect(isPublicAddress(ip)).toBe(!special);
        expect(isPublicAddress(`::ffff:${ip}`)).toBe(!special);
      }
    }
  });

  // The gateway used to ask ipaddr.js's range() for IPv4-mapped addresses on top of the list: every range it does
  // not call unicast lies inside the list, so the list alone decides (docs/decisions.md, "One home per rule").
  it("ipaddr.js's non-unicast IPv4 ranges all lie inside the list", () => {
    const ranges = (ipaddr.IPv4.prototype as unknown as { SpecialRanges: Record<string, Array<[ipaddr.IPv4, number]>> })
      .SpecialRanges;
    for (const list of Object.values(ranges)) {
      for (const [net, bits] of list) {
        const lo = ipv4ToInt(net.toString());
        expect(specialPurposeBlock(fromInt(lo))).not.toBeNull();
        expect(specialPurposeBlock(fromInt(lo + 2 ** (32 - bits) - 1))).not.toBeNull();
      }
    }
  });
});
