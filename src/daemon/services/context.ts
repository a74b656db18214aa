// What the HTTP side of the daemon (the API and the console alike) is built from; serve.ts makes one per worker.
import type { HealthReport } from '../observe/health.js';
import type { ApiLimits } from '../ratelimit/api-limits.js';
import type { Metrics } from '../observe/metrics.js';
import type { Store, UsagePeriod } from '../store/index.js';
import type { AuditService } from './audit.js';
import type { WhitelistService } from './whitelist.js';

export interface ApiContext {
  store: Store;
  whitelist: WhitelistService;
  limits: ApiLimits;
  metrics: Metrics;
  nowMs: () => number;
  /** `--allow-private-webhooks`: the console lets owners set http:// and private receivers. */
  allowPrivateWebhooks: boolean;
  /** `--console-origin`: the passkeys' relying party; null: the host each browser reached. */
  consoleOrigin: string | null;
  /** An account's audit records (the console's Activity page; the customer API's audit endpoint). */
  audit: AuditService;
  /** `--usage-retention`: which buckets a usage report can still read. */
  usageRetentionMs: Record<UsagePeriod, number>;
  health: () => Promise<HealthReport>;
  /** Dedicated addresses (`--ip-replacements`, `--ip-quarantine`): replacements per account and calendar month, days a replaced address is quarantined. */
  dedicated: { replacementsPerMonth: number; quarantineDays: number };
}
