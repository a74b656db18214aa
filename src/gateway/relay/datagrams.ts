// A UDP association's metering, beside the tunnel's (splice.ts): the same byte budget (byte-budget.ts) and rate
// buckets (rate-budget.ts) a connection's pump takes from, for datagrams. A datagram cannot wait as a tunnel's read
// does, so where the pump parks a reader, a datagram with no room is dropped (counted `over_limit` by the caller);
// one goes whole while there is room (a datagram larger than a second of a low rate still passes).
import type { ByteBudget } from './byte-budget.js';
import type { RateBudget } from './rate-budget.js';

/** The connection a datagram is metered on (a SOCKS5 UDP association's control connection). */
export interface DatagramOwner {
  /** Under a traffic limit: every datagram's payload is taken from it; null: none. */
  budget: ByteBudget | null;
  /** Under a rate limit: every datagram's payload is taken from its direction's bucket; null: none. */
  rate: RateBudget | null;
  bytesUp: number;
  bytesDown: number;
  datagramsUp: number;
  datagramsDown: number;
  readonly core: {
    readonly stats: {
      readonly udp: { datagramsUp: number; datagramsDown: number; bytesUp: number; bytesDown: number };
    };
  };
}

/** Up: client to target; down: an answer, target to client. */
export type Way = 'up' | 'down';

/**
 * Whether a datagram of `n` payload bytes may pass now. Up, the byte budget must hold it whole (a client's datagram
 * is not sent past the limit); an answer, already here, is taken from the budget but not refused by it. Either
 * way the direction's rate bucket must have room.
 */
export function datagramMayPass(owner: DatagramOwner, way: Way, n: number): boolean {
  if (way === 'up') {
    const budget = owner.budget;
    if (budget !== null && budget.available() < n) return false;
  }
  const rate = owner.rate;
  return rate === null || (way === 'up' ? rate.up : rate.down).available() > 0;
}

/** A datagram of `n` payload bytes passed: taken from the budget and the rate, counted on the connection and the gateway. */
export function countDatagram(owner: DatagramOwner, way: Way, n: number): void {
  owner.budget?.take(n);
  const u = owner.core.stats.udp;
  if (way === 'up') {
    owner.rate?.up.take(n);
    owner.bytesUp += n;
    owner.datagramsUp++;
    u.datagramsUp++;
    u.bytesUp += n;
  } else {
    owner.rate?.down.take(n);
    owner.bytesDown += n;
    owner.datagramsDown++;
    u.datagramsDown++;
    u.bytesDown += n;
  }
}
