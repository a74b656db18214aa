// One serving process: opens the store, the rate-limit store, the API (+ console) and the gateway, and
// drains them on shutdown. run.ts decides when (lock, signals, ready line); cluster workers run this too.
import type { FastifyInstance } from 'fastify';
import {
  CachingResolver,
  DEFAULT_LIMITS as GATEWAY_DEFAULT_LIMITS,
  ExitDirectory,
  HOP_MAX_UNPROVEN,
  HOP_MAX_UNPROVEN_PER_SOURCE,
  HopDialer,
  startGateway,
} from '../../gateway/index.js';
import type { Gateway, GatewayLimits, HopIdentity } from '../../gateway/types.js';
import { ViewAdmission } from '../admission/gateway-admission.js';
import { StoreAdmissionFeed } from '../admission/feed.js';
import { AdmissionView } from '../admission/view.js';
import { buildApp } from '../api/app.js';
import { consolePlugin } from '../console/index.js';
import { loadSessionSecret, RevealSealer } from '../console/session.js';
import { randomKey } from '../secrets.js';
import type { AnswerSealer, ApiContext } from '../services/context.js';
import { formatHostPort, parseDnsServers, type ServeConfig } from './config.js';
import { checkBindable, checkPrefixBindable, stickyAddressesFor, stickySessionsFor } from './egress-pool.js';
import { subjectUser } from '../../rules/usage-key.js';
import { dependenciesUp, withViewHealth } from '../observe/health.js';
import { openCountryLookup, type CountryLookup } from '../services/geo.js';
import type { DaemonLog } from '../log.js';
import { Metrics } from '../observe/metrics.js';
import { ConnectionLogWriter } from '../observe/connection-log.js';
import { ConnectionLogLines } from '../observe/connection-log-lines.js';
import { ApiLimits, parseLimitOverrides } from '../ratelimit/api-limits.js';
import { MemoryWindowStore, type WindowStore } from '../ratelimit/limiter.js';
import { RedisWindowStore } from '../ratelimit/redis-store.js';
import { DatabaseWindowStore } from '../ratelimit/database-store.js';
import { openStore as openBackend, type Store } from '../store/index.js';
import { PG_CADENCE, UsageMeter } from '../metering/meter.js';
import { WebhookSender } from '../webhooks/sender.js';
import { AuditKeeper } from '../services/audit-keeper.js';
import { PlanEnforcer } from '../metering/plans.js';
import { DedicatedView, offeredAddresses } from '../admission/dedicated.js';
import { EgressUsageWriter } from '../metering/egress-usage.js';
import { DEFAULT_IP_QUARANTINE_DAYS, DEFAULT_IP_REPLACEMENTS } from './serve-options.js';
import { ExitHeartbeat } from '../fleet/exits.js';
import { HopIdentityKeeper } from '../fleet/hop-identity.js';
import { HopSecrets } from '../fleet/hop-secrets.js';
import { WhitelistService, type ServiceLog } from '../services/whitelist.js';
import { AuditService } from '../services/audit.js';
import { NO_GATEWAY, type GatewayFacts } from '../services/gateway-info.js';
import type { ConnectionLogStore, UsagePeriod, UsageStore } from '../store/index.js';
import { DEFAULT_USAGE_RETENTION_MS } from '../store/usage-sql.js';

export const TUNNEL_DRAIN_MS = 10_000;
/** How long start-up waits for a configured dependency (Redis) before it serves degraded. */
const DEPENDENCY_WAIT_MS = 3_000;

/** What run.ts serves: this process, or a cluster primary's workers. */
export interface Serving {
  ready: Ready & { workers?: number };
  shutdown(): Promise<void>;
  /** SIGHUP: files this process writes are opened again (after logrotate moved them), and the admission view reloads in full. */
  hangup(): void;
}

/** The JSON ready line (docs/operations.md). */
export interface Ready {
  event: 'ready';
  api: string;
  httpProxy?: string | null;
  socks5?: string | null;
  /** An exit node's hop listener. */
  hop?: string;
  role?: 'entry' | 'exit';
  pid: number;
}

export interface RunningDaemon extends Serving {
  app: FastifyInstance;
  gateway: Gateway | null;
  store: Store;
}

/** The one place the serving path opens the database: PostgreSQL with `--database-url`, else SQLite in the data dir. */
export function openStore(cfg: ServeConfig, asWorker = false): Promise<Store> {
  return openBackend({
    dataDir: cfg.dataDir,
    databaseUrl: cfg.databaseUrl,
    releaseGraceSec: cfg.releaseGraceSec,
    foldWalOnClose: !asWorker,
    mustWrite: true,
  });
}

/** Which window store the API limits use: Redis when given, else the database when several processes serve (always on PostgreSQL), else memory. */
export function windowStoreFor(
  cfg: Pick<ServeConfig, 'redisUrl' | 'databaseUrl' | 'workers' | 'sharedDataDir'>,
  store: Store,
  log: Pick<DaemonLog, 'info' | 'warn'>,
): WindowStore {
  if (cfg.redisUrl) {
    return new RedisWindowStore(cfg.redisUrl, {
      onStateChange: (up, detail) =>
        up
          ? log.info({ event: 'redis_up', component: 'ratelimit', detail }, 'Redis reachable: rate limits served')
          : log.warn(
              { event: 'redis_down', component: 'ratelimit', detail },
              'Redis unreachable: whitelist requests answer 503 until it is back',
            ),
    });
  }
  if (cfg.databaseUrl || cfg.workers > 1 || cfg.sharedDataDir)
    return new DatabaseWindowStore(store.sharedRateHits(), store.backend);
  return new MemoryWindowStore();
}

class IntegrityError extends Error {
  override name = 'IntegrityError';
}

/**
 * Start-up check after an unclean stop: SQLite's own integrity check (a corrupt file refuses to serve),
 * then the whitelist invariant (every live entry has its claim and every held claim its entry), repaired.
 */
export async function checkAndRepair(cfg: ServeConfig, log: DaemonLog): Promise<void> {
  const store = await openStore(cfg);
  try {
    const problems = await store.integrityProblems();
    const corrupt = problems.filter((p) => !/foreign key violations$/.test(p));
    if (corrupt.length) {
      log.error(
        { event: 'integrity_check', ok: false, problems: corrupt.slice(0, 20) },
        'database integrity check failed',
      );
      throw new IntegrityError(
        `database ${store.location} failed its integrity check (${corrupt[0]}); restore it from a backup (see docs/operations.md)`,
      );
    }
    const found = await store.whitelist.inconsistencies();
    let repaired = null;
    if (found.claimsWithoutEntry || found.entriesWithoutClaim) repaired = await store.whitelist.repair();
    log[problems.length || repaired ? 'warn' : 'info'](
      {
        event: 'integrity_check',
        ok: true,
        foreignKeyProblems: problems.length,
        ...found,
        ...(repaired ? { repaired } : {}),
      },
      repaired ? 'database sound; whitelist inconsistencies repaired' : 'database sound',
    );
  } finally {
    await store.close();
  }
}

/**
 * Hidden override of the gateway limits (tests, emergencies): env `PROXYD_GATEWAY_LIMITS`, e.g.
 * `headerTimeoutMs=500,maxConnectionsPerAccount=5,maxConnectionsTotal=50`. Unknown keys or
 * non-positive numbers refuse to start.
 */
export function parseGatewayLimitOverrides(s: string | undefined): Partial<GatewayLimits> | undefined {
  if (!s) return undefined;
  const out: Partial<GatewayLimits> = {};
  for (const part of s
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean)) {
    const [k = '', v = ''] = part.split('=').map((x) => x.trim());
    if (!Object.hasOwn(GATEWAY_DEFAULT_LIMITS, k)) throw new Error(`PROXYD_GATEWAY_LIMITS: unknown limit "${k}"`);
    const n = Number(v);
    if (!/^\d+$/.test(v) || !Number.isSafeInteger(n) || n < 1)
      throw new Error(`PROXYD_GATEWAY_LIMITS: bad value in "${part}"`);
    out[k as keyof GatewayLimits] = n;
  }
  return out;
}

function intFromEnv(name: string, min: number, max: number): number {
  const v = process.env[name] ?? '';
  if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max)
    throw new Error(`${name}: expected an integer ${min}..${max}, got "${v}"`);
  return Number(v);
}

/** Hidden knob (tests, very busy nodes): connection-log records held while the database is slow; default 20,000. */
export function connectionLogBuffer(): number | undefined {
  return process.env.PROXYD_CONNECTION_LOG_BUFFER
    ? intFromEnv('PROXYD_CONNECTION_LOG_BUFFER', 1, 10_000_000)
    : undefined;
}

/**
 * Kept Idempotency-Key answers are sealed with a key of their own derived from the console's secret (the fleet's in
 * PostgreSQL, `console-session.key` beside proxyd.db on SQLite): a create's answer holds the password shown once.
 */
function answerSealerOf(store: Store): () => Promise<AnswerSealer> {
  let made: Promise<AnswerSealer> | null = null;
  return () =>
    (made ??= store
      .fleetSecret('console_session', randomKey())
      .then((secret) => new RevealSealer(secret ?? loadSessionSecret(store.location), 'proxyd idempotent answers v1'))
      .catch((e: unknown) => {
        made = null; // the database away: the next request asks again
        throw e;
      }));
}

/** What the API and console are built from; the in-process tests build theirs here too (their own clock, no view). */
export function apiContext(p: {
  store: Store;
  geo: CountryLookup;
  limits: ApiLimits;
  metrics: Metrics;
  log: ServiceLog;
  nowMs?: () => number;
  view?: Pick<AdmissionView, 'status'>;
  allowPrivateWebhooks?: boolean;
  consoleOrigin?: string | null;
  usageRetentionMs?: Record<UsagePeriod, number>;
  dedicated?: { replacementsPerMonth: number; quarantineDays: number };
  /** Filled in by serve once the gateway listens (the same object). */
  gateway?: GatewayFacts;
}): ApiContext {
  const { store, limits, view } = p;
  return {
    store,
    whitelist: new WhitelistService(store, p.geo, p.log),
    limits,
    metrics: p.metrics,
    nowMs: p.nowMs ?? Date.now,
    allowPrivateWebhooks: p.allowPrivateWebhooks === true,
    consoleOrigin: p.consoleOrigin ?? null,
    audit: new AuditService(store),
    usageRetentionMs: p.usageRetentionMs ?? DEFAULT_USAGE_RETENTION_MS,
    dedicated: p.dedicated ?? {
      replacementsPerMonth: DEFAULT_IP_REPLACEMENTS,
      quarantineDays: DEFAULT_IP_QUARANTINE_DAYS,
    },
    gateway: p.gateway ?? { ...NO_GATEWAY },
    answerSealer: answerSealerOf(store),
    health: async () => {
      const up = await dependenciesUp(store, limits);
      const down = Object.keys(up).filter((name) => !up[name]);
      const report = { ok: down.length === 0, down };
      return view ? withViewHealth(report, view.status().state) : report;
    },
  };
}

/** How a cluster worker serves beside its siblings (cluster.ts); a lone process needs none of it. */
export interface WorkerPart {
  /** Listen on a socket of its own beside the siblings' (SO_REUSEPORT): the kernel spreads connections. */
  reusePort: boolean;
  /** On SQLite: where usage and the connection log go instead of the database (the primary writes for all). */
  sinks: {
    connectionLog: Pick<ConnectionLogStore, 'insert' | 'prune'>;
    usage: Pick<UsageStore, 'addFlush' | 'prune'>;
  } | null;
}

/** The API (+ console) listening, once the rate-limit store is connected or has been waited for. */
async function listenApi(
  cfg: ServeConfig,
  log: DaemonLog,
  store: Store,
  limits: ApiLimits,
  metrics: Metrics,
  view: AdmissionView,
  reusePort: boolean,
  gateway: GatewayFacts,
): Promise<FastifyInstance> {
  const [geo] = await Promise.all([openCountryLookup(cfg.geoipDb), limits.ready(DEPENDENCY_WAIT_MS)]);
  const ctx = apiContext({
    store,
    geo,
    limits,
    metrics,
    log: { error: (o, m) => log.error(o, m) },
    view,
    allowPrivateWebhooks: cfg.allowPrivateWebhooks,
    consoleOrigin: cfg.consoleOrigin,
    usageRetentionMs: cfg.usageRetentionMs,
    gateway,
    dedicated: { replacementsPerMonth: cfg.ipReplacements, quarantineDays: cfg.ipQuarantineDays },
  });
  const app = await buildApp(ctx, {
    trustProxy: cfg.trustProxy,
    logger: log,
    plugins: [(a: FastifyInstance) => consolePlugin(a, ctx)],
  });
  try {
    // Fastify hands its options to net.Server.listen, whose reusePort its types do not name yet.
    await app.listen({
      host: cfg.apiListen.host,
      port: cfg.apiListen.port,
      ...(reusePort ? { exclusive: true, reusePort: true } : {}),
    } as { host: string; port: number });
  } catch (err) {
    await app.close();
    throw err;
  }
  return app;
}

/**
 * Starts one serving process (the only one, or a cluster worker); the caller holds the data-dir lock.
 * Resolves once it serves: every configured dependency is connected, or waited for and logged as down.
 */
export async function startDaemon(
  cfg: ServeConfig,
  log: DaemonLog,
  worker: WorkerPart = { reusePort: false, sinks: null },
): Promise<RunningDaemon> {
  const gatewayLimits = parseGatewayLimitOverrides(process.env.PROXYD_GATEWAY_LIMITS); // before anything opens
  const dnsServers = parseDnsServers(process.env.PROXYD_DNS_SERVERS);
  if (cfg.egressPool) await checkBindable(cfg.egressPool);
  // An address this host does not own would start, then fail every connection as if the target were unreachable.
  if (cfg.egressAddress) await checkBindable([cfg.egressAddress], '--egress-address');
  if (cfg.egressPrefix) await checkPrefixBindable(cfg.egressPrefix);
  // A cluster worker (it shares the ports) leaves folding the WAL to the primary.
  const store = await openStore(cfg, worker.reusePort);
  const limits = new ApiLimits(windowStoreFor(cfg, store, log), {
    ...parseLimitOverrides(cfg.rateLimits),
    keyReads: cfg.keyLimits.reads,
    keyWrites: cfg.keyLimits.writes,
  });
  const metrics = new Metrics();
  // Gateway admission reads this in-memory view, kept current from the change log (docs/operations.md, fleet).
  const view = new AdmissionView(new StoreAdmissionFeed(store.changeLog, { log }), {
    staleAdmissionSec: cfg.staleAdmissionSec,
    log,
  });
  // The gateway as customers reach it (GET /openapi/v1/proxy/gateway): its addresses once it listens.
  const gatewayFacts: GatewayFacts = {
    role: cfg.role,
    publicHost: cfg.publicHost,
    http: null,
    socks5: null,
    location: cfg.location,
  };
  // Whatever fails before the API listens must not leave a Redis client reconnecting: the process would never exit.
  const app = await view
    .start()
    .then(() => listenApi(cfg, log, store, limits, metrics, view, worker.reusePort, gatewayFacts))
    .catch(async (err: unknown) => {
      view.close();
      await limits.close();
      await store.close();
      throw err;
    });
  const apiAddr = app.server.address();
  const apiPort = typeof apiAddr === 'object' && apiAddr ? apiAddr.port : cfg.apiListen.port;
  const apiHostPort = { host: cfg.apiListen.host, port: apiPort };

  const sink = cfg.connectionLogSink;
  const connLog =
    sink.kind === 'off' || cfg.connectionLogRetentionMs === 0
      ? null
      : sink.kind === 'db'
        ? new ConnectionLogWriter(worker.sinks?.connectionLog ?? store.connectionLog, cfg.nodeName, {
            retentionMs: cfg.connectionLogRetentionMs,
            // A worker's records go to the primary's writer, which caps the size for all of them.
            maxSizeBytes: worker.sinks ? undefined : cfg.connectionLogMaxSize,
            maxBuffered: connectionLogBuffer(),
            log,
          })
        : new ConnectionLogLines(sink.kind === 'file' ? sink : { kind: 'stdout' }, cfg.nodeName, store.accounts, log);
  try {
    connLog?.start();
  } catch (e) {
    await app.close();
    await store.close();
    throw e;
  }
  let gateway: Gateway | null = null;
  // A gateway that cannot start (port in use) must not leave the API listening: the process would never exit.
  const admission = new ViewAdmission(view);
  // Usage: collected from the gateway every second (docs/operations.md, Metering). On PostgreSQL the database's
  // metering work grows with active users (docs/decisions.md#d-027, "Usage writes"): accounts under a traffic limit are
  // flushed every second, the others every 4 s, per-domain usage every minute; SQLite writes it all every second.
  const pacedWrites = store.backend === 'postgres' && !worker.sinks;
  // Usage by dedicated address: metered with the rest, written beside it (metering/egress-usage.ts).
  const egressUsage = new EgressUsageWriter(store, {
    retentionMs: cfg.usageRetentionMs.day,
    flushMs: process.env.PROXYD_EGRESS_USAGE_FLUSH_MS
      ? intFromEnv('PROXYD_EGRESS_USAGE_FLUSH_MS', 100, 3_600_000)
      : undefined,
    log,
  });
  const collect = () => {
    const usage = gateway?.collectUsage() ?? [];
    egressUsage.add(gateway?.collectEgressUsage() ?? []);
    return usage;
  };
  const meter = new UsageMeter(worker.sinks?.usage ?? store.usage, collect, {
    retentionMs: cfg.usageRetentionMs,
    log,
    ...(pacedWrites ? { ...PG_CADENCE, urgent: (accountId: number) => plans.limitsTraffic(accountId) } : {}),
  });
  // Plans: the tables read again when their version moves, enforced at admission and by closing what is over;
  // byte budgets and connection slots leased from the store hold the limits fleet-wide (metering/plans.ts).
  const plans = new PlanEnforcer(store, {
    flushAccounts: (ids) => meter.flushAccounts(ids),
    openConnections: (accountId, subject) => gateway?.openConnections(accountId, subject) ?? 0,
    close: (match) => gateway?.closeWhere(match) ?? 0,
    rebudget: (budgetFor) => gateway?.rebudget(budgetFor),
    rerate: (rateFor) => gateway?.rerate(rateFor),
    grantBytes: process.env.PROXYD_GRANT_BYTES ? intFromEnv('PROXYD_GRANT_BYTES', 1, 4 * 2 ** 20) : undefined,
    log,
  });
  await plans.start();
  // Dedicated egress addresses: this node's offer registered (a both or exit node), the fleet's table in memory.
  const dedicated = new DedicatedView(store, {
    node: cfg.nodeName,
    close: (match) => gateway?.closeEgressWhere(match) ?? 0,
    log,
  });
  try {
    if (cfg.role !== 'entry' && !cfg.egressPrefix) {
      const offer = offeredAddresses(cfg.egressPool ?? null, cfg.egressAddress);
      await store.egress.register(
        cfg.nodeName,
        offer.addresses,
        { country: cfg.location?.country ?? null, city: cfg.location?.city ?? null },
        { prune: offer.named },
      );
    }
    await dedicated.start();
  } catch (e) {
    await plans.stop();
    await connLog?.stop();
    await app.close();
    await limits.close();
    await store.close();
    throw e;
  }
  const ownApi = [apiHostPort];
  // Entry and exit nodes: an entry reaches every target through an exit's hop (TLS 1.3, the exit pinned by the
  // fingerprint it registers, the entry proving the fleet secret); an exit listens for its entries only. The
  // hop's secret is the fleet's, made by whichever node starts first.
  let exits: ExitDirectory | null = null;
  let secrets: HopSecrets | null = null;
  // A start that fails from here closes what is open, so the process exits.
  const abandon = async (err: unknown): Promise<never> => {
    exits?.stop();
    secrets?.stop();
    dedicated.stop();
    view.close();
    await plans.stop();
    await connLog?.stop();
    await app.close();
    await limits.close();
    await store.close();
    throw err;
  };
  if (cfg.role !== 'both') {
    if (!store.exits) await abandon(new Error('entry and exit roles need a fleet database (--database-url)'));
    secrets = new HopSecrets(store.exits!, { graceMs: cfg.hopGraceMs, log: log.child({ component: 'exits' }) });
    await secrets.start().catch(abandon);
  }
  if (cfg.role === 'entry') {
    exits = new ExitDirectory(store.exits!, { secrets: secrets!.offered, log: log.child({ component: 'exits' }) });
    await exits.start().catch(abandon);
  }
  // An exit's certificate, from its data dir (made at its first start); a new one is served as it is announced.
  let gatewayRef: Gateway | null = null;
  const identity =
    cfg.role === 'exit'
      ? new HopIdentityKeeper(cfg.dataDir, {
          lifetimeMs: cfg.hopCertLifetimeMs,
          onChange: (id) => gatewayRef?.setHopIdentity(id),
          log: log.child({ component: 'hop' }),
        })
      : null;
  let hopIdentity: HopIdentity | null = null;
  try {
    hopIdentity = identity?.load() ?? null;
  } catch (e) {
    await abandon(e);
  }
  const gw: Gateway = await startGateway({
    httpProxyListen: cfg.role === 'exit' ? null : cfg.httpProxyListen,
    reusePort: worker.reusePort,
    socksListen: cfg.role === 'exit' ? null : cfg.socksListen,
    location: cfg.location,
    exitDialer: exits ? new HopDialer(exits, log.child({ component: 'exits' })) : undefined,
    hop: identity
      ? {
          listen: cfg.hopListen,
          identity: hopIdentity!,
          secrets: secrets!.accepted,
          onRefused: () => metrics.countHopRefused(),
          // The exit's bounds on unproven hop connections, shared out among its workers.
          unproven: {
            total: Math.ceil(HOP_MAX_UNPROVEN / cfg.workers),
            perSource: Math.ceil(HOP_MAX_UNPROVEN_PER_SOURCE / cfg.workers),
          },
        }
      : undefined,
    egressAddress: cfg.egressAddress,
    egressPool: cfg.egressPool && { addresses: cfg.egressPool, sessions: stickySessionsFor(cfg.egressPool.length) },
    egressPrefix: cfg.egressPrefix && { prefix: cfg.egressPrefix, sessions: stickyAddressesFor(cfg.egressPrefix) },
    allowPrivateTargets: cfg.allowPrivateTargets,
    proxyProtocolFrom: cfg.proxyProtocolFrom,
    // The API's address; the gateway adds its own listeners' (read once when bound: a getsockname per dial cost ~6 % of set-up CPU).
    ownListeners: () => ownApi,
    admission,
    // Target rules from the same view: a change reaches new connections as fast as any admission change.
    // A proxy user's own rules come with its limits (the plan tables, re-read when they change).
    targetRules: { forAccount: (id) => view.targetRules(id), forUser: (id, subject) => plans.userRules(id, subject) },
    dedicated,
    connectionLog: connLog ?? undefined,
    plans,
    limits: gatewayLimits,
    // A node's cap on UDP associations, shared out among its workers (each counts its own).
    udp: { ...cfg.udp, maxAssociations: Math.max(1, Math.ceil(cfg.udp.maxAssociations / cfg.workers)) },
    lookup: dnsServers ? new CachingResolver({ servers: dnsServers }).lookup : undefined,
    log: log.child({ component: 'gateway' }),
  }).catch(abandon);
  gateway = gw;
  gatewayRef = gw;
  // A proxy user disabled or deleted (by any node) loses its open connections here as soon as the view hears of it.
  view.onUsersRevoked = (names) => {
    const n = gw.closeWhere((_accountId, subject) => (names.has(subjectUser(subject) ?? '') ? 'user_disabled' : null));
    if (n > 0)
      log.info(
        { event: 'proxy_user_connections_closed', users: names.size, connections: n },
        'closed the open connections of disabled or deleted proxy users',
      );
  };
  meter.start();
  egressUsage.start();
  // Every process sends: a claim in the database decides which one sends each event.
  const webhooks = new WebhookSender(store, {
    node: `${cfg.nodeName}:${process.pid}`,
    allowPrivate: cfg.allowPrivateWebhooks,
    log,
  });
  webhooks.start();
  // The service's own audit records (plan expiry) and the log's retention.
  const auditKeeper = new AuditKeeper(store, { node: cfg.nodeName, retentionMs: cfg.auditRetentionMs, log });
  auditKeeper.start();
  metrics.attachGateway(() => gw.stats());
  metrics.attachMeter(() => ({ flushed: meter.flushed, failed: meter.failedFlushes, lagMs: meter.lagMs() }));
  metrics.attachDependencies(() => dependenciesUp(store, limits));
  metrics.attachDataDir(cfg.dataDir);
  metrics.attachWebhooks(
    () => webhooks.attempts,
    () => store.webhooks.pendingCount(),
  );
  metrics.attachAdmissionView(() => view.status());
  metrics.attachEgressAddresses(() => dedicated.counts());
  metrics.attachLoginBudget(() => admission.budget.refused);
  const directory = exits as ExitDirectory | null;
  if (directory) metrics.attachExits(() => directory.view());
  if (connLog)
    metrics.attachConnectionLog(() => ({
      written: connLog.written,
      dropped: connLog.dropped,
      buffered: connLog.buffered,
      retried: connLog.retried,
    }));

  const http = gw.httpProxyAddress();
  const socks = gw.socksAddress();
  const hop = gw.hopAddress();
  Object.assign(gatewayFacts, { http, socks5: socks });
  // An exit is in the registry before it says ready: entries may send it traffic from the next read on.
  const heartbeat =
    hop && store.exits && identity
      ? new ExitHeartbeat(
          store.exits,
          {
            node: cfg.nodeName,
            hop: formatHostPort((cfg.hopAdvertise ?? hop).host, (cfg.hopAdvertise ?? hop).port),
            country: cfg.location?.country ?? null,
            city: cfg.location?.city ?? null,
          },
          identity,
          log,
        )
      : null;
  const ready: Ready = {
    event: 'ready' as const,
    api: `http://${formatHostPort(apiHostPort.host, apiHostPort.port)}`,
    // An exit opens no customer listener: its ready line names its hop instead.
    ...(cfg.role === 'exit'
      ? { hop: formatHostPort(hop!.host, hop!.port) }
      : {
          httpProxy: http ? formatHostPort(http.host, http.port) : null,
          socks5: socks ? formatHostPort(socks.host, socks.port) : null,
        }),
    ...(cfg.role === 'both' ? {} : { role: cfg.role }),
    pid: process.pid,
  };

  let closing: Promise<void> | null = null;
  const shutdown = () =>
    (closing ??= (async () => {
      await heartbeat?.stop(); // out of the registry first: entries stop sending new connections here
      await Promise.all([app.close(), gateway?.close(TUNNEL_DRAIN_MS)]);
      exits?.stop();
      secrets?.stop();
      dedicated.stop();
      view.close();
      await meter.stop();
      await egressUsage.stop();
      await webhooks.stop();
      await auditKeeper.stop();
      await plans.stop();
      await connLog?.stop();
      await limits.close();
      await store.close();
    })());
  try {
    await heartbeat?.start();
  } catch (err) {
    await shutdown();
    throw err;
  }
  const hangup = (): void => {
    if (connLog instanceof ConnectionLogLines) connLog.reopen();
    void view.reloadNow();
  };
  return { app, gateway, store, ready, shutdown, hangup };
}
