// How long the suite waits, on a machine other work may load. A deadline is the time a thing takes on an idle
// machine (a daemon's ready line, a change reaching the gateway, the contract's "within 1 s"), scaled by the load
// per core: at load 10 on 2 cores a daemon takes five times as long to start, and a deadline that does not grow
// with it fails tests that would pass. Waits poll and return as soon as their condition holds, so a longer
// deadline costs nothing unless something is wrong.
import os from 'node:os';

/** Set by vitest.config.ts to the factor measured when the run started, for every worker. */
export const PATIENCE_ENV = 'PROXYD_TEST_PATIENCE';
const MAX_FACTOR = 10;

/**
 * The load factor now: the 1-minute load average per core, at least the one measured when the run started
 * (PROXYD_TEST_PATIENCE; set it yourself to force one), between 1 and 10.
 */
export function loadFactor(env: NodeJS.ProcessEnv = process.env): number {
  const atStart = Number(env[PATIENCE_ENV]);
  const now = os.loadavg()[0]! / os.availableParallelism();
  return Math.min(MAX_FACTOR, Math.max(1, Number.isFinite(atStart) ? atStart : 1, now));
}

/** `ms`, the time something takes on an idle machine, scaled by the load factor now: a deadline or a timing check. */
export function patient(ms: number): number {
  return Math.round(ms * loadFactor());
}
