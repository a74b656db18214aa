// An in-process API app over a real database (SQLite file in a temp dir, or a fresh PostgreSQL database), with an injectable clock.
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/daemon/api/app.js';
import type { ApiContext } from '../../src/daemon/services/context.js';
import { openCountryLookup } from '../../src/daemon/services/geo.js';
import { Metrics } from '../../src/daemon/observe/metrics.js';
import { ApiLimits, DEFAULT_LIMITS, type LimitSettings } from '../../src/daemon/ratelimit/api-limits.js';
import type { WindowStore } from '../../src/daemon/ratelimit/limiter.js';
import type { DaemonLog } from '../../src/daemon/log.js';
import { hashPassword, mintToken } from '../../src/daemon/secrets.js';
import { apiContext, windowStoreFor } from '../../src/daemon/process/serve.js';
import { openStore, type Store } from '../../src/daemon/store/index.js';
import { tempDir } from './daemon.js';
import { SCOPES, type Scope } from '../../src/contract/scopes.js';
import { ApiKeyService } from '../../src/daemon/services/api-keys.js';
import { emptyDatabase, type BackendName } from './postgres.js';

export interface TestApp {
  app: FastifyInstance;
  store: Store;
  ctx: ApiContext;
  clock: { now: number };
  account(email: string, opts?: { verified?: boolean }): Promise<{ accountId: number; token: string }>;
  /** An API key of the account (as the console makes them): `pxk_…`, and its id. */
  key(
    accountId: number,
    scopes: readonly Scope[] | 'all',
    opts?: { expiresAtMs?: number; allowedIps?: string[]; name?: string },
  ): Promise<{ key: string; id: string }>;
  close(): Promise<void>;
}

export async function makeTestApp(
  opts: {
    limits?: Partial<LimitSettings>;
    windowStore?: WindowStore;
    releaseGraceSec?: number;
    trustProxy?: string[];
    backend?: BackendName;
    usageRetentionMs?: Record<'minute' | 'hour' | 'day', number>;
  } = {},
): Promise<TestApp> {
  const clock = { now: Date.UTC(2026, 10, 21, 10, 0, 0) };
  const nowMs = () => clock.now;
  const databaseUrl = opts.backend === 'postgres' ? await emptyDatabase() : undefined;
  const store = await openStore({ dataDir: tempDir(), databaseUrl, nowMs, releaseGraceSec: opts.releaseGraceSec });
  const geo = await openCountryLookup();
  // Chosen as serve chooses: on PostgreSQL the limits live in the database, so the same tests cover its window log.
  const quiet: Pick<DaemonLog, 'info' | 'warn'> = { info: () => {}, warn: () => {} };
  const windowStore =
    opts.windowStore ??
    windowStoreFor({ redisUrl: undefined, databaseUrl, workers: 1, sharedDataDir: false }, store, quiet);
  const limits = new ApiLimits(windowStore, { ...DEFAULT_LIMITS, ...opts.limits }, nowMs);
  const metrics = new Metrics({ defaultMetrics: false });
  const ctx = apiContext({
    store,
    geo,
    limits,
    metrics,
    log: { error: () => {} },
    nowMs,
    ...(opts.usageRetentionMs ? { usageRetentionMs: opts.usageRetentionMs } : {}),
  });
  const app = await buildApp(ctx, { trustProxy: opts.trustProxy ?? [], logger: false });
  const pwHash = await hashPassword('correct horse battery');
  return {
    app,
    store,
    ctx,
    clock,
    async account(email, o = {}) {
      const a = await store.accounts.create(email, pwHash, o.verified !== false);
      if (a === 'exists') throw new Error('exists');
      const t = mintToken();
      await store.tokens.replace(a.id, t.accessKey, t.secretHash);
      return { accountId: a.id, token: t.token };
    },
    async key(accountId, scopes, o = {}) {
      const keys = new ApiKeyService(store, nowMs);
      const ctx = { actor: { type: 'operator' as const, id: 'test' }, sourceIp: null, requestId: null };
      const r = await keys.create(
        accountId,
        {
          name: o.name ?? 'test key',
          scopes: scopes === 'all' ? [...SCOPES] : scopes,
          expiresAtMs: o.expiresAtMs ?? null,
          allowedIps: o.allowedIps ?? [],
        },
        ctx,
      );
      return { key: r.key, id: r.info.id };
    },
    async close() {
      await app.close();
      await limits.close();
      await store.close();
    },
  };
}

/** The header an API key goes in. */
export function bearer(key: string): Record<string, string> {
  return { authorization: `Bearer ${key}` };
}

export function q(token: string): string {
  return `?api_key=${encodeURIComponent(token)}`;
}
