// An IPv6 egress prefix (`--egress-pool 2001:db8:1::/64`): each outgoing connection leaves from
// a random address inside it (host bits from the CSPRNG, never all zero: that is the subnet-router anycast
// address). The host routes the prefix locally and binds non-local addresses (docs/operations.md).
import { randomFillSync } from 'node:crypto';
import ipaddr from 'ipaddr.js';

/** Prefix lengths accepted: /48 (a site) to /112 (65,535 addresses). */
export const MIN_PREFIX_BITS = 48;
export const MAX_PREFIX_BITS = 112;

/** Address ranges (ipaddr.js names) that cannot be an egress prefix. */
const REFUSED_RANGES = new Set(['unspecified', 'loopback', 'linkLocal', 'multicast', 'ipv4Mapped']);

/** Random bytes drawn in batches: one CSPRNG call per 256 addresses, not per connection. */
const RANDOM_BATCH = 16 * 256;

export class EgressPrefix {
  /** The network's 16 bytes (host bits zero). */
  private readonly network: Uint8Array;
  private readonly random = Buffer.alloc(RANDOM_BATCH);
  private used = RANDOM_BATCH;
  /** `2001:db8:1::/64` (RFC 5952 form): the pool's name in errors, logs and metrics. */
  readonly text: string;

  private constructor(
    network: number[],
    /** Prefix length, MIN_PREFIX_BITS … MAX_PREFIX_BITS. */
    readonly bits: number,
  ) {
    this.network = Uint8Array.from(network);
    this.text = `${ipaddr.fromByteArray(network).toString()}/${bits}`;
  }

  toString(): string {
    return this.text;
  }

  /** `2001:db8:1::/64`; host bits given are cleared (as an IPv4 CIDR block's are). An error names the item. */
  static parse(item: string): EgressPrefix | { error: string } {
    const m = /^([0-9A-Fa-f:.]+)\/(\d{1,3})$/.exec(item);
    if (!m || !ipaddr.IPv6.isValid(m[1]!)) return { error: `"${item}" is not an IPv6 prefix such as 2001:db8:1::/64` };
    const bits = Number(m[2]);
    if (bits < MIN_PREFIX_BITS || bits > MAX_PREFIX_BITS) {
      return { error: `"${item}": an IPv6 prefix must be /${MIN_PREFIX_BITS} to /${MAX_PREFIX_BITS} (got /${bits})` };
    }
    const addr = ipaddr.IPv6.parse(m[1]!);
    const range = addr.range();
    if (REFUSED_RANGES.has(range)) return { error: `"${item}": a ${range} prefix cannot be an egress pool` };
    const bytes = addr.toByteArray();
    for (let i = 0; i < 16; i++) bytes[i]! &= maskByte(bits, i);
    return new EgressPrefix(bytes, bits);
  }

  /** Whether an address (any IPv6 text form) is inside the prefix. */
  contains(address: string): boolean {
    if (!ipaddr.IPv6.isValid(address)) return false;
    const b = ipaddr.IPv6.parse(address).toByteArray();
    for (let i = 0; i < 16; i++) if ((b[i]! & maskByte(this.bits, i)) !== this.network[i]) return false;
    return true;
  }

  /** A random address of the prefix: random host bits, never all zero. */
  randomAddress(): string {
    const out = new Array<number>(16);
    for (;;) {
      if (this.used + 16 > RANDOM_BATCH) {
        randomFillSync(this.random);
        this.used = 0;
      }
      let host = 0;
      for (let i = 0; i < 16; i++) {
        const mask = maskByte(this.bits, i);
        const h = this.random[this.used + i]! & ~mask & 0xff;
        host |= h;
        out[i] = this.network[i]! | h;
      }
      this.used += 16;
      if (host !== 0) return ipaddr.fromByteArray(out).toString();
    }
  }
}

/** The network part's mask of byte i of an address under a /bits prefix. */
function maskByte(bits: number, i: number): number {
  const n = bits - i * 8;
  if (n >= 8) return 0xff;
  if (n <= 0) return 0;
  return (0xff << (8 - n)) & 0xff;
}
