// What the HTTP side of the daemon (the API and the console alike) is built from; serve.ts makes one per worker.
import type { HealthReport } from '../observe/health.js';
import type { ApiLimits } from '../ratelimit/api-limits.js';
import type { Metrics } from '../observe/metrics.js';
import type { Store, UsagePeriod } from '../store/index.js';
import type { AuditService } from './audit.js';
import type { GatewayFacts } from './gateway-info.js';
import type { WhitelistService } from './whitelist.js';

/** Seals what the daemon keeps of an answer (AES-256-GCM): a kept Idempotency-Key answer may hold a password shown once. */
export interface AnswerSealer {
  seal(plain: string): string;
  /** null: not sealed by this fleet's (or data dir's) secret. */
  open(sealed: string): string | null;
}

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
  /** The node's gateway as customers reach it (GET /openapi/v1/proxy/gateway); filled in once it listens. */
  gateway: GatewayFacts;
  /** The sealer of kept Idempotency-Key answers, keyed from the console's secret (made on first use). */
  answerSealer: () => Promise<AnswerSealer>;
}
