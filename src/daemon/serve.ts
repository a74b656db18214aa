// `proxyd serve`: opens the store, the API (+ console) and the gateway, prints one ready line, drains on SIGTERM.
import { mkdirSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { DEFAULT_LIMITS as GATEWAY_DEFAULT_LIMITS, startGateway } from '../gateway/index.js';
import type { Gateway, GatewayLimits } from '../gateway/types.js';
import { StoreAdmission } from './admission.js';
import { buildApp, LOG_SERIALIZERS } from './api/app.js';
import { consolePlugin } from './console/index.js';
import type { ApiContext } from './api/context.js';
import { formatHostPort, type ServeConfig } from './config.js';
import { openCountryLookup } from './geo.js';
import { acquireLock, acquireSharedLock, type DataDirLock } from './lock.js';
import { Metrics } from './metrics.js';
import { ApiLimits, parseLimitOverrides } from './ratelimit/api-limits.js';
import { MemoryWindowStore, type WindowStore } from './ratelimit/limiter.js';
import { openStore, type Store } from './store/index.js';
import { TrafficAccumulator } from './traffic.js';
import { WhitelistService } from './whitelist-service.js';

export const TUNNEL_DRAIN_MS = 10_000;

export interface RunningDaemon {
  app: FastifyInstance;
  gateway: Gateway | null;
  store: Store;
  ready: { event: 'ready'; api: string; httpProxy: string | null; socks5: string | null; pid: number };
  shutdown(): Promise<void>;
}

export interface StartOptions {
  /** Window store for the API limits (run.ts `startOptionsFor` picks it); in-process memory when absent. */
  windowStore?: (store: Store) => WindowStore;
  /** Extra health checks (Redis). */
  extraHealth?: () => Promise<string[]>;
  /** Runs after the data-dir lock is taken and before anything serves (start-up integrity check). */
  afterLock?: () => Promise<void>;
  /** The console plugin, mounted under /console/. */
  plugins?: Array<(app: FastifyInstance, ctx: ApiContext) => Promise<void>>;
}

export function loggerOptions(level: string) {
  return {
    level,
    serializers: LOG_SERIALIZERS,
    // Belt and braces: these keys never reach a log line even if someone logs them.
    redact: { paths: ['api_key', '*.api_key', 'token', '*.token', 'password', '*.password', 'secret', '*.secret', '*.authorization', '*["proxy-authorization"]'], censor: '[redacted]' },
    stream: process.stderr,
  };
}

/**
 * Hidden override of the gateway limits (tests, emergencies): env `PROXYD_GATEWAY_LIMITS`, e.g.
 * `headerTimeoutMs=500,maxConnectionsPerAccount=5,maxConnectionsTotal=50`. Unknown keys or
 * non-positive numbers refuse to start.
 */
export function parseGatewayLimitOverrides(s: string | undefined): Partial<GatewayLimits> | undefined {
  if (!s) return undefined;
  const out: Partial<GatewayLimits> = {};
  for (const part of s.split(',').map((x) => x.trim()).filter(Boolean)) {
    const [k = '', v = ''] = part.split('=').map((x) => x.trim());
    if (!Object.hasOwn(GATEWAY_DEFAULT_LIMITS, k)) throw new Error(`PROXYD_GATEWAY_LIMITS: unknown limit "${k}"`);
    const n = Number(v);
    if (!/^\d+$/.test(v) || !Number.isSafeInteger(n) || n < 1) throw new Error(`PROXYD_GATEWAY_LIMITS: bad value in "${part}"`);
    out[k as keyof GatewayLimits] = n;
  }
  return out;
}

/** The store the config names: PostgreSQL with `--database-url`, else SQLite in the data dir. */
export function openStoreFor(cfg: ServeConfig): Promise<Store> {
  return openStore({ dataDir: cfg.dataDir, databaseUrl: cfg.databaseUrl, releaseGraceSec: cfg.releaseGraceSec });
}

/** The data-dir lock: SQLite only (a fleet's nodes share one PostgreSQL and hold no lock). */
export function lockDataDir(cfg: ServeConfig): DataDirLock | null {
  if (cfg.databaseUrl) return null;
  mkdirSync(cfg.dataDir, { recursive: true, mode: 0o700 });
  return cfg.sharedDataDir ? acquireSharedLock(cfg.dataDir) : acquireLock(cfg.dataDir);
}

/** Starts one serving process (the only one, or a cluster worker). The caller holds the data-dir lock. */
export async function startDaemon(cfg: ServeConfig, opts: StartOptions = {}): Promise<RunningDaemon> {
  const gatewayLimits = parseGatewayLimitOverrides(process.env.PROXYD_GATEWAY_LIMITS); // before anything opens
  const store = await openStoreFor(cfg);
  const geo = await openCountryLookup(cfg.geoipDb);
  const metrics = new Metrics();
  const windowStore = opts.windowStore?.(store) ?? new MemoryWindowStore();
  const limits = new ApiLimits(windowStore, parseLimitOverrides(cfg.rateLimits));
  let app: FastifyInstance | null = null;
  const whitelist = new WhitelistService(store, geo, { error: (o, m) => app?.log.error(o, m) });
  const ctx: ApiContext = {
    store,
    whitelist,
    limits,
    metrics,
    nowMs: Date.now,
    health: async () => {
      const down: string[] = [];
      if (!(await store.ping())) down.push('database');
      if (!(await limits.healthy())) down.push(limits.storeKind === 'redis' ? 'redis' : 'rate_limit_store');
      for (const d of (await opts.extraHealth?.()) ?? []) if (!down.includes(d)) down.push(d);
      return { ok: down.length === 0, down };
    },
  };
  app = await buildApp(ctx, {
    trustProxy: cfg.trustProxy,
    logger: loggerOptions(cfg.logLevel),
    plugins: (opts.plugins ?? [consolePlugin]).map((p) => (a: FastifyInstance) => p(a, ctx)),
  });
  await app.listen({ host: cfg.apiListen.host, port: cfg.apiListen.port });
  const apiAddr = app.server.address();
  const apiPort = typeof apiAddr === 'object' && apiAddr ? apiAddr.port : cfg.apiListen.port;
  const apiHostPort = { host: cfg.apiListen.host, port: apiPort };

  const traffic = new TrafficAccumulator(store);
  traffic.start();
  let gateway: Gateway | null = null;
  // A gateway that cannot start (port in use) must not leave the API listening: the process would never exit.
  const gw: Gateway = await startGateway({
    httpProxyListen: cfg.httpProxyListen,
    socksListen: cfg.socksListen,
    egressAddress: cfg.egressAddress,
    allowPrivateTargets: cfg.allowPrivateTargets,
    proxyProtocolFrom: cfg.proxyProtocolFrom,
    ownListeners: () => [apiHostPort, gateway?.httpProxyAddress(), gateway?.socksAddress()].filter((x): x is { host: string; port: number } => !!x),
    admission: new StoreAdmission(store),
    traffic,
    limits: gatewayLimits,
    log: app.log.child({ component: 'gateway' }),
  }).catch(async (err: unknown) => {
    await traffic.stop();
    await app!.close();
    await limits.close();
    await store.close();
    throw err;
  });
  gateway = gw;
  metrics.attachGateway(() => gw.stats());

  const http = gw.httpProxyAddress();
  const socks = gw.socksAddress();
  const ready = {
    event: 'ready' as const,
    api: `http://${formatHostPort(apiHostPort)}`,
    httpProxy: http ? formatHostPort(http) : null,
    socks5: socks ? formatHostPort(socks) : null,
    pid: process.pid,
  };

  let closing: Promise<void> | null = null;
  const shutdown = () =>
    (closing ??= (async () => {
      app!.log.info({ event: 'shutdown' }, 'stopping: no new connections, draining');
      await Promise.all([app!.close(), gateway?.close(TUNNEL_DRAIN_MS)]);
      await traffic.stop();
      await limits.close();
      await store.close();
    })());
  return { app, gateway, store, ready, shutdown };
}

/** `proxyd serve` with one worker: lock, start, ready line, signals. */
export async function serveSingle(cfg: ServeConfig, opts: StartOptions = {}): Promise<void> {
  const lock = lockDataDir(cfg);
  let daemon: RunningDaemon;
  try {
    await opts.afterLock?.();
    daemon = await startDaemon(cfg, opts);
  } catch (e) {
    lock?.release();
    throw e;
  }
  process.stdout.write(`${JSON.stringify(daemon.ready)}\n`);
  const stop = (signal: string) => {
    daemon.app.log.info({ signal }, 'signal received');
    daemon
      .shutdown()
      .then(() => {
        lock?.release();
        process.exit(0);
      })
      .catch((e: Error) => {
        daemon.app.log.error({ err: { message: e.message } }, 'shutdown failed');
        lock?.release();
        process.exit(1);
      });
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}
