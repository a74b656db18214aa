// Chooses how to serve: in this process (one worker) or as a cluster primary with workers (--workers N).
// Also what every serving process shares: the rate-limit store it uses and the start-up integrity check.
import cluster from 'node:cluster';
import { hostname } from 'node:os';
import type { ServeConfig } from './config.js';
import { RedisWindowStore } from './ratelimit/redis-store.js';
import { DatabaseWindowStore } from './ratelimit/database-store.js';
import { openStoreFor, serveSingle, type StartOptions } from './serve.js';

const LEVELS = { info: 30, warn: 40, error: 50 } as const;
const THRESHOLDS: Record<string, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60, silent: Infinity };
let threshold = THRESHOLDS.info!;

/** Applies `--log-level` to the lines written by logLine (pino applies it to everything else). */
export function setLogLevel(level: string): void {
  threshold = THRESHOLDS[level] ?? THRESHOLDS.info!;
}

/** One JSON log line on stderr, shaped like the daemon's pino lines, for code that runs outside Fastify. */
export function logLine(level: keyof typeof LEVELS, obj: Record<string, unknown>, msg: string): void {
  if (LEVELS[level] < threshold) return;
  process.stderr.write(`${JSON.stringify({ level: LEVELS[level], time: Date.now(), pid: process.pid, hostname: hostname(), ...obj, msg })}\n`);
}

/** Which window store the API limits use: Redis when given, else the database when several processes serve (always on PostgreSQL), else memory. */
export function startOptionsFor(cfg: ServeConfig): StartOptions {
  if (cfg.redisUrl) {
    const url = cfg.redisUrl;
    return {
      windowStore: () =>
        new RedisWindowStore(url, {
          onStateChange: (up, detail) =>
            logLine(up ? 'info' : 'warn', { event: up ? 'redis_up' : 'redis_down', component: 'ratelimit', detail }, up ? 'Redis reachable: rate limits served' : 'Redis unreachable: whitelist requests answer 503 until it is back'),
        }),
    };
  }
  if (cfg.databaseUrl || cfg.workers > 1 || cfg.sharedDataDir) return { windowStore: (store) => new DatabaseWindowStore(store.sharedRateHits(), store.backend) };
  return {};
}

export class IntegrityError extends Error {
  override name = 'IntegrityError';
}

/**
 * Start-up check after an unclean stop: the backend's integrity check (a corrupt SQLite file refuses to serve),
 * then the whitelist invariant (every live entry has its claim and every held claim its entry), repaired.
 */
export async function checkAndRepair(cfg: ServeConfig): Promise<void> {
  const store = await openStoreFor(cfg);
  try {
    const problems = await store.integrityProblems();
    const corrupt = problems.filter((p) => !/foreign key violations$/.test(p));
    if (corrupt.length) {
      logLine('error', { event: 'integrity_check', ok: false, problems: corrupt.slice(0, 20) }, 'database integrity check failed');
      throw new IntegrityError(`database ${store.location} failed its integrity check (${corrupt[0]}); restore it from a backup (see docs/operations.md)`);
    }
    const found = await store.whitelist.inconsistencies();
    let repaired = null;
    if (found.claimsWithoutEntry || found.entriesWithoutClaim) repaired = await store.whitelist.repair();
    logLine(
      problems.length || repaired ? 'warn' : 'info',
      { event: 'integrity_check', ok: true, foreignKeyProblems: problems.length, ...found, ...(repaired ? { repaired } : {}) },
      repaired ? 'database sound; whitelist inconsistencies repaired' : 'database sound',
    );
  } finally {
    await store.close();
  }
}

export async function runServe(cfg: ServeConfig): Promise<void> {
  setLogLevel(cfg.logLevel);
  if (cluster.isWorker) {
    const { runWorker } = await import('./cluster.js');
    return runWorker(cfg);
  }
  if (cfg.workers > 1) {
    const { runPrimary } = await import('./cluster.js');
    return runPrimary(cfg);
  }
  await serveSingle(cfg, { ...startOptionsFor(cfg), afterLock: () => checkAndRepair(cfg) });
}
