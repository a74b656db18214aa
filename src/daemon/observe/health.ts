// What GET /healthz reports, and how the admission view's state shapes it.
import type { ViewStatus } from '../admission/view.js';

export interface HealthReport {
  ok: boolean;
  down: string[];
  /** With the database down: `degraded` while the gateway admits from its last view, `down` once it refuses. */
  status?: 'degraded' | 'down';
}

/**
 * What /healthz says about the view. Its feed is a database read, so a failing feed names `database` as
 * down (for this node); `degraded` while the gateway still admits from its last view, `down` once it refuses.
 */
export function withViewHealth(report: HealthReport, state: ViewStatus['state']): HealthReport {
  if (state === 'current') return report;
  const down = report.down.includes('database') ? report.down : [...report.down, 'database'];
  return { ok: false, down, status: state === 'stale' ? 'degraded' : 'down' };
}

/**
 * What /healthz and /metrics ask of the dependencies, up or down by name: `database`, and the API's rate-limit
 * store as `redis` (with --redis-url) or `rate_limit_store` (the database's or memory's).
 */
export async function dependenciesUp(
  store: { ping(): Promise<boolean> },
  limits: { healthy(): Promise<boolean>; readonly storeKind: string },
): Promise<Record<string, boolean>> {
  const [database, limitsUp] = await Promise.all([store.ping(), limits.healthy()]);
  return { database, [limits.storeKind === 'redis' ? 'redis' : 'rate_limit_store']: limitsUp };
}
