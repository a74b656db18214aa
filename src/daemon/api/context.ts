// What the HTTP side of the daemon is built from; serve.ts makes one per worker.
import type { ApiLimits } from '../ratelimit/api-limits.js';
import type { Metrics } from '../metrics.js';
import type { Store } from '../store/index.js';
import type { WhitelistService } from '../whitelist-service.js';

export interface HealthReport {
  ok: boolean;
  down: string[];
  /** With the database down: `degraded` while the gateway admits from its last view, `down` once it refuses. */
  status?: 'degraded' | 'down';
}

export interface ApiContext {
  store: Store;
  whitelist: WhitelistService;
  limits: ApiLimits;
  metrics: Metrics;
  nowMs: () => number;
  health: () => Promise<HealthReport>;
}
