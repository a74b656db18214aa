import type { GatewayLimits } from './types.js';

export const DEFAULT_LIMITS: GatewayLimits = {
  headerTimeoutMs: 10_000,
  connectTimeoutMs: 10_000,
  idleTimeoutMs: 5 * 60_000,
  maxHeaderBytes: 16 * 1024,
  maxConnectionsPerAccount: 256,
  maxConnectionsTotal: 10_000,
  // As many as one account may hold open: past it, a source holding idle handshakes is refused, not everyone.
  maxHandshakesPerSource: 256,
};

export function resolveLimits(partial: Partial<GatewayLimits> | undefined): GatewayLimits {
  const out = { ...DEFAULT_LIMITS };
  for (const key of Object.keys(DEFAULT_LIMITS) as Array<keyof GatewayLimits>) {
    const v = partial?.[key];
    if (v !== undefined) {
      if (!Number.isFinite(v) || v <= 0) throw new RangeError(`gateway limit ${key} must be a positive number`);
      out[key] = v;
    }
  }
  // Not set: as many as one account may hold open (an operator who raises that cap raises this one with it).
  if (partial?.maxHandshakesPerSource === undefined)
    out.maxHandshakesPerSource = Math.max(DEFAULT_LIMITS.maxHandshakesPerSource, out.maxConnectionsPerAccount);
  return out;
}
