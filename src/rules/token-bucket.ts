// A token bucket's refill, the one rule of the gateway's rate budgets (bytes per second, src/gateway/relay/
// rate-budget.ts) and the daemon's failed-login budgets (attempts per second, src/daemon/admission/failure-budget.ts).

/**
 * The tokens a bucket holds after `elapsedMs` at `perSec`, never past `capacity`. Time that runs backwards (a wall
 * clock stepped back) or not at all adds nothing and takes nothing. An infinite rate fills the bucket.
 */
export function refilled(tokens: number, elapsedMs: number, perSec: number, capacity: number): number {
  if (!(elapsedMs > 0)) return tokens;
  const t = tokens + (elapsedMs * perSec) / 1000;
  return t < capacity ? t : capacity;
}
