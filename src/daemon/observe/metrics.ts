// Prometheus metrics (prom-client). Labels are routes, codes, reasons and our own egress addresses: never a token, a client IP or a username.
// With --workers N, each worker keeps its own registry and /metrics (served by any worker) asks the
// primary for the sum over all workers (prom-client's AggregatorRegistry), so a scrape sees the daemon.
import cluster from 'node:cluster';
import { AggregatorRegistry, Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { statfs } from 'node:fs/promises';
import type { GatewayStats, SetupTimes } from '../../gateway/types.js';
import type { ViewStatus } from '../admission/view.js';

/** How often the event-loop delay histogram (proxyd_nodejs_eventloop_lag_*) takes a sample. */
export const EVENT_LOOP_SAMPLE_MS = 100;

/**
 * Node's delay histogram records the time between its timer's firings, the sampling interval included (an idle
 * loop reads 0.100 s at a 100 ms interval). The gauges drawn from it report the delay past each due time instead:
 * the interval subtracted, never below 0. (`proxyd_nodejs_eventloop_lag_seconds`, measured at each scrape, and
 * the standard deviation need no such change.)
 */
function lagPastSchedule(registry: Registry): void {
  const interval = EVENT_LOOP_SAMPLE_MS / 1000;
  for (const stat of ['min', 'max', 'mean', 'p50', 'p90', 'p99']) {
    const gauge = registry.getSingleMetric(`proxyd_nodejs_eventloop_lag_${stat}_seconds`);
    if (!gauge) continue;
    const read = gauge.get.bind(gauge);
    gauge.get = async () => {
      const m = await read();
      return { ...m, values: m.values.map((v) => ({ ...v, value: Math.max(0, v.value - interval) })) };
    };
  }
}

type Sample = { labels: Record<string, string | number>; value: number; metricName?: string };

/**
 * A metric whose samples are read at scrape time, in the shape prom-client's own metrics hand the registry (so a
 * cluster primary aggregates the workers' alike), and with no sample while there is nothing to say (prom-client's
 * gauge without labels always says a number: 0 where nothing could be read).
 */
class ReadMetric {
  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'gauge' | 'histogram',
    readonly aggregator: 'sum' | 'max',
    private readonly samples: () => Promise<Sample[]>,
  ) {}

  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Sample[] }> {
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      aggregator: this.aggregator,
      values: await this.samples(),
    };
  }

  reset(): void {}
}

/**
 * A histogram counted elsewhere (the gateway's set-up times, in ms), written in seconds: prom-client's Histogram
 * observes values itself, this hands over the buckets as they are (summed across workers).
 */
function readHistogram(name: string, help: string, read: () => SetupTimes | null): ReadMetric {
  return new ReadMetric(name, help, 'histogram', 'sum', async () => {
    const h = read();
    if (!h) return [];
    const values: Sample[] = [];
    let cumulative = 0;
    h.boundsMs.forEach((bound, i) => {
      cumulative += h.counts[i] ?? 0;
      values.push({ labels: { le: bound / 1000 }, value: cumulative, metricName: `${name}_bucket` });
    });
    cumulative += h.counts[h.boundsMs.length] ?? 0;
    values.push({ labels: { le: '+Inf' }, value: cumulative, metricName: `${name}_bucket` });
    values.push({ labels: {}, value: h.sumMs / 1000, metricName: `${name}_sum` });
    values.push({ labels: {}, value: cumulative, metricName: `${name}_count` });
    return values;
  });
}

/** A promise's value, or `fallback` when it fails or takes longer than `ms` (a scrape never waits on a hung dependency). */
async function within<T>(p: Promise<T>, ms: number, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<T>((resolve) => (timer = setTimeout(resolve, ms, fallback)))]);
  } catch {
    return fallback;
  } finally {
    clearTimeout(timer);
  }
}

export class Metrics {
  readonly registry = new Registry();
  readonly httpRequests: Counter<'route' | 'method' | 'status' | 'code'>;
  readonly httpDuration: Histogram<'route'>;
  readonly rateLimited: Counter<'route' | 'reason'>;
  private gatewayStats: (() => GatewayStats) | null = null;
  private readonly hopRefused: Counter;
  private exitView: (() => Array<{ node: string; healthy: boolean; links: number }>) | null = null;
  private viewStatus: (() => ViewStatus) | null = null;

  countHopRefused(): void {
    this.hopRefused.inc();
  }

  attachExits(view: () => Array<{ node: string; healthy: boolean; links: number }>): void {
    this.exitView = view;
  }

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    // The event-loop delay histogram samples every 100 ms, not prom-client's 10 ms: its timer woke an idle daemon
    // a hundred times a second (decisions.md#d-038 "Metrics: event-loop delay sampling").
    if (opts.defaultMetrics !== false) {
      collectDefaultMetrics({
        register: this.registry,
        prefix: 'proxyd_',
        eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS,
      });
      lagPastSchedule(this.registry);
    }
    if (cluster.isWorker) this.joinCluster();
    this.httpRequests = new Counter({
      name: 'proxyd_http_requests_total',
      help: 'API requests by route, method, HTTP status and business code',
      labelNames: ['route', 'method', 'status', 'code'],
      registers: [this.registry],
    });
    this.httpDuration = new Histogram({
      name: 'proxyd_http_request_duration_seconds',
      help: 'API request duration by route',
      labelNames: ['route'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [this.registry],
    });
    this.rateLimited = new Counter({
      name: 'proxyd_rate_limit_rejections_total',
      help: 'Requests refused by a rate limit, by route and reason (token, key, source_ip, store_unavailable)',
      labelNames: ['route', 'reason'],
      registers: [this.registry],
    });
    const self = this;
    this.hopRefused = new Counter({
      name: 'proxyd_hop_refused_total',
      help: "Connections to this exit's hop listener that did not prove the fleet secret",
      registers: [this.registry],
    });
    // An entry's view of its exits, one series per label value, read at scrape time (no series on another role).
    const exitGauge = (
      name: string,
      help: string,
      label: string,
      values: (v: Array<{ node: string; healthy: boolean; links: number }>) => Array<[string, number]>,
    ) =>
      new Gauge({
        name,
        help,
        labelNames: [label],
        registers: [this.registry],
        collect() {
          const v = self.exitView?.();
          if (!v) return;
          this.reset();
          for (const [value, n] of values(v)) this.set({ [label]: value }, n);
        },
      });
    exitGauge(
      'proxyd_exit_nodes',
      'Exit nodes this entry knows, by health (healthy: heartbeat fresh and probes answered)',
      'state',
      (v) => [
        ['healthy', v.filter((e) => e.healthy).length],
        ['unhealthy', v.filter((e) => !e.healthy).length],
      ],
    );
    exitGauge(
      'proxyd_hop_links',
      'Hop connections of this entry to each exit, verified, authenticated and taking new tunnels (0: none, the exit unreachable)',
      'exit',
      (v) => v.map((e) => [e.node, e.links]),
    );
    const gatewayGauge = (name: string, help: string, value: (s: GatewayStats) => number) =>
      new Gauge({
        name,
        help,
        registers: [this.registry],
        collect() {
          const s = self.gatewayStats?.();
          if (s) this.set(value(s));
        },
      });
    gatewayGauge('proxyd_gateway_connections_open', 'Gateway connections open now', (s) => s.connectionsOpen);
    // Gateway totals are read from the gateway at scrape time, one labelled counter per breakdown.
    const fromGateway = (
      name: string,
      help: string,
      label: string,
      values: (s: GatewayStats) => Record<string, number>,
    ) =>
      new Counter({
        name,
        help,
        labelNames: [label],
        registers: [this.registry],
        collect() {
          const s = self.gatewayStats?.();
          if (!s) return;
          this.reset();
          for (const [value, n] of Object.entries(values(s))) this.inc({ [label]: value }, n);
        },
      });
    fromGateway(
      'proxyd_gateway_connections_total',
      'Gateway connections accepted, by protocol path',
      'path',
      (s) => s.connectionsTotal,
    );
    fromGateway(
      'proxyd_gateway_admission_failures_total',
      'Gateway connections refused at admission, by reason',
      'reason',
      (s) => s.admissionFailures,
    );
    fromGateway(
      'proxyd_gateway_target_refusals_total',
      'Gateway targets refused, by reason',
      'reason',
      (s) => s.targetRefusals,
    );
    fromGateway(
      'proxyd_gateway_refusals_total',
      "Gateway connections refused, by the connection log's reason (admission_unavailable: the gateway could not decide, an internal failure; no_exit: no healthy exit matched), a login past its failure budget as login_throttled",
      'reason',
      (s) => s.refusals as Record<string, number>,
    );
    this.registry.registerMetric(
      readHistogram(
        'proxyd_gateway_setup_seconds',
        "Time from accepting a gateway connection to relaying it (target reached; the client's own handshake included); its count is the connections opened",
        () => self.gatewayStats?.().setup ?? null,
      ) as never,
    );
    fromGateway(
      'proxyd_gateway_egress_connections_total',
      'Outgoing gateway connections by the egress address they left from (an IPv6 prefix pool: the prefix)',
      'address',
      (s) => s.egressConnections,
    );
    fromGateway(
      'proxyd_gateway_bytes_total',
      'Bytes relayed by the gateway, by direction (up = client to target)',
      'direction',
      (s) => ({
        up: s.bytesUp,
        down: s.bytesDown,
      }),
    );
    fromGateway(
      'proxyd_udp_datagrams_total',
      'SOCKS5 UDP datagrams relayed, by direction (up = client to target)',
      'direction',
      (s) => ({ up: s.udp.datagramsUp, down: s.udp.datagramsDown }),
    );
    fromGateway(
      'proxyd_udp_bytes_total',
      'SOCKS5 UDP payload bytes relayed (without the RFC 1928 header), by direction',
      'direction',
      (s) => ({ up: s.udp.bytesUp, down: s.udp.bytesDown }),
    );
    fromGateway(
      'proxyd_udp_dropped_total',
      'SOCKS5 UDP datagrams dropped, by reason (frag, source, policy, unsolicited, malformed, over_limit)',
      'reason',
      (s) => s.udp.dropped,
    );
    gatewayGauge('proxyd_udp_associations_open', 'SOCKS5 UDP associations open now', (s) => s.udp.associationsOpen);
    // The metered bytes are the same bytes: this node's total under the metering name.
    fromGateway(
      'proxyd_relayed_bytes_total',
      'Bytes relayed between clients and targets on this node, as metered, by direction',
      'direction',
      (s) => ({
        up: s.bytesUp,
        down: s.bytesDown,
      }),
    );
  }

  /** The usage meter: flushes written, flushes the database did not take (sent again), and how long usage has waited. */
  attachMeter(read: () => { flushed: number; failed: number; lagMs: number }): void {
    this.counters(read, [
      ['proxyd_usage_flushes_total', 'Usage flushes written to the database', 'flushed'],
      ['proxyd_usage_flush_failures_total', 'Usage flushes the database did not take (kept and sent again)', 'failed'],
    ]);
    new Gauge({
      name: 'proxyd_usage_flush_lag_seconds',
      help: 'How long the oldest usage collected and not yet written to the database has waited (0: all written)',
      aggregator: 'max',
      registers: [this.registry],
      collect() {
        this.set(read().lagMs / 1000);
      },
    });
  }

  /**
   * What /healthz depends on, 1 up or 0 down: `database`, and the rate-limit store (`redis`, or `rate_limit_store`
   * for the database's or memory's). Across workers the worst (min).
   */
  attachDependencies(read: () => Promise<Record<string, boolean>>): void {
    new Gauge({
      name: 'proxyd_dependency_up',
      help: 'Whether a dependency answers: database, redis (with --redis-url) or rate_limit_store; 1 up, 0 down',
      labelNames: ['dependency'],
      aggregator: 'min',
      registers: [this.registry],
      async collect() {
        const up = await within(read(), 3_000, null);
        this.reset();
        if (up) for (const [dependency, ok] of Object.entries(up)) this.set({ dependency }, ok ? 1 : 0);
        else this.set({ dependency: 'database' }, 0);
      },
    });
  }

  /**
   * The data dir's file system: free and total bytes (the SQLite database, its WAL, the hop identity live there). No
   * sample when it cannot be read: a node on PostgreSQL that keeps nothing there has no data dir at all.
   */
  attachDataDir(dir: string): void {
    const read = () =>
      within(
        statfs(dir).then((s) => ({ free: s.bavail * s.bsize, size: s.blocks * s.bsize })),
        2_000,
        null,
      );
    const gauge = (name: string, help: string, pick: (s: { free: number; size: number }) => number) =>
      this.registry.registerMetric(
        new ReadMetric(name, help, 'gauge', 'max', async () => {
          const s = await read();
          return s ? [{ labels: {}, value: pick(s) }] : [];
        }) as never,
      );
    gauge('proxyd_data_dir_free_bytes', "Bytes free to this daemon on the data dir's file system", (s) => s.free);
    gauge('proxyd_data_dir_size_bytes', "Size of the data dir's file system in bytes", (s) => s.size);
  }

  /** Webhook deliveries: this process's attempts by outcome, and the events still to deliver (fleet-wide, from the database). */
  attachWebhooks(attempts: () => Record<string, number>, pending: () => Promise<number>): void {
    new Counter({
      name: 'proxyd_webhook_attempts_total',
      help: 'Webhook delivery attempts by outcome: delivered, failed (tried again later), given_up (after 24 h of retries)',
      labelNames: ['outcome'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [outcome, n] of Object.entries(attempts())) this.inc({ outcome }, n);
      },
    });
    new Gauge({
      name: 'proxyd_webhooks_pending',
      help: 'Webhook events still to be delivered, first attempts and retries, of every account (read from the database: the same on every node)',
      aggregator: 'max',
      registers: [this.registry],
      async collect() {
        const n = await within(pending(), 2_000, null);
        if (n !== null) this.set(n);
      },
    });
  }

  /**
   * The admission view's gauges. Across workers (each holds its own view) the oldest age, the lowest
   * sequence and the worst state are what an alert needs, so they aggregate by max/min, not sum.
   */
  /** This node's dedicated egress addresses by state (docs/operations.md, "Dedicated addresses"). */
  attachEgressAddresses(counts: () => Record<'assigned' | 'quarantined' | 'free', number>): void {
    new Gauge({
      name: 'proxyd_egress_addresses',
      help: "This node's egress addresses by dedicated state: assigned to an account, quarantined, or free (in the shared rotation)",
      labelNames: ['state'],
      aggregator: 'max',
      registers: [this.registry],
      collect() {
        const c = counts();
        for (const state of ['assigned', 'quarantined', 'free'] as const) this.set({ state }, c[state]);
      },
    });
  }

  attachAdmissionView(status: () => ViewStatus): void {
    this.viewStatus = status;
    const self = this;
    const gauge = (name: string, help: string, aggregator: 'max' | 'min', value: (v: ViewStatus) => number) =>
      new Gauge({
        name,
        help,
        aggregator,
        registers: [this.registry],
        collect() {
          const v = self.viewStatus?.();
          if (v) this.set(value(v));
        },
      });
    gauge(
      'proxyd_admission_view_age_seconds',
      'Seconds since the admission view last heard from the change feed',
      'max',
      (v) => v.ageMs / 1000,
    );
    gauge(
      'proxyd_admission_view_sequence',
      'Change-log sequence the admission view is current to',
      'min',
      (v) => v.seq,
    );
    gauge(
      'proxyd_admission_view_stale',
      'Admission view state: 0 current, 1 stale (admitting from the last view), 2 expired (refusing)',
      'max',
      (v) => (v.state === 'current' ? 0 : v.state === 'stale' ? 1 : 2),
    );
    gauge('proxyd_admission_view_proxy_users', 'Proxy users in the admission view', 'max', (v) => v.users);
    gauge(
      'proxyd_admission_view_whitelist_ips',
      'Whitelisted IPs (held, live entries) in the admission view',
      'max',
      (v) => v.ips,
    );
    gauge(
      'proxyd_admission_view_reloads',
      'Full loads of the admission view since start (the first load, then each time it found itself behind)',
      'max',
      (v) => v.reloads,
    );
    this.counters(
      () => ({ reloads: Math.max(0, (self.viewStatus?.().reloads ?? 1) - 1) }),
      [
        [
          'proxyd_admission_reloads_total',
          'Full reloads of the admission view after its first load (it fell behind the change log, or SIGHUP)',
          'reloads',
        ],
      ],
    );
  }

  attachGateway(stats: () => GatewayStats): void {
    this.gatewayStats = stats;
  }

  /** Proxy logins refused by the failure budget without a password check (src/daemon/admission/failure-budget.ts). */
  attachLoginBudget(refused: () => number): void {
    new Counter({
      name: 'proxyd_gateway_login_checks_skipped_total',
      help: 'Proxy logins answered 407 without a password check: a source, username or node past its failure budget',
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(refused());
      },
    });
  }

  /** The connection log's writer: records written, dropped (buffer full while the database was slow), waiting. */
  attachConnectionLog(read: () => { written: number; dropped: number; buffered: number; retried: number }): void {
    this.counters(read, [
      ['proxyd_connection_log_records_total', 'Connection-log records written to the database', 'written'],
      [
        'proxyd_connection_log_write_retries_total',
        'Connection-log batches the database did not take at once (its lock held elsewhere): kept, written again',
        'retried',
      ],
      [
        'proxyd_connection_log_dropped_total',
        'Connection-log records dropped because the write buffer was full (database slow or away)',
        'dropped',
      ],
    ]);
    new Gauge({
      name: 'proxyd_connection_log_buffered',
      help: 'Connection-log records waiting to be written',
      registers: [this.registry],
      collect() {
        this.set(read().buffered);
      },
    });
  }

  /** Counters read at scrape time from a totals object. */
  private counters<K extends string>(
    read: () => Record<K, number>,
    list: ReadonlyArray<readonly [string, string, K]>,
  ): void {
    for (const [name, help, key] of list) {
      new Counter({
        name,
        help,
        registers: [this.registry],
        collect() {
          this.reset();
          this.inc(read()[key]);
        },
      });
    }
  }

  /** Exposition text: this process's registry, or in a cluster worker the whole cluster's. */
  async render(): Promise<{ contentType: string; text: string }> {
    if (cluster.isWorker && process.send) {
      try {
        return { contentType: this.registry.contentType, text: await askPrimaryForMetrics() };
      } catch {
        /* primary busy or gone: this worker's own numbers are better than none */
      }
    }
    return { contentType: this.registry.contentType, text: await this.registry.metrics() };
  }

  /** In a cluster worker: answer the primary's requests for this registry (it sums every worker's). */
  joinCluster(): void {
    if (!cluster.isWorker) return;
    workerRegistry = this.registry;
    installWorkerListeners();
  }
}

export const METRICS_REQ = 'proxyd:metrics-req';
export const METRICS_RES = 'proxyd:metrics-res';
const COLLECT_REQ = 'proxyd:metrics-collect';
const COLLECT_RES = 'proxyd:metrics-json';

type MetricJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;

let workerRegistry: Registry | null = null;
let nextMetricsRequest = 0;
const pendingMetrics = new Map<
  number,
  { resolve: (t: string) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }
>();
let workerListeners = false;

function installWorkerListeners(): void {
  if (workerListeners) return;
  workerListeners = true;
  process.on('message', (m: { type?: string; id?: number; text?: string; error?: string }) => {
    if (m?.type === COLLECT_REQ && typeof m.id === 'number') {
      const id = m.id;
      void (workerRegistry?.getMetricsAsJSON() ?? Promise.resolve([])).then(
        (metrics) => process.send?.({ type: COLLECT_RES, id, metrics }),
        () => process.send?.({ type: COLLECT_RES, id, metrics: [] }),
      );
      return;
    }
    if (m?.type !== METRICS_RES || typeof m.id !== 'number') return;
    const p = pendingMetrics.get(m.id);
    if (!p) return;
    pendingMetrics.delete(m.id);
    clearTimeout(p.timer);
    if (typeof m.text === 'string') p.resolve(m.text);
    else p.reject(new Error(m.error ?? 'no metrics'));
  });
}

function askPrimaryForMetrics(timeoutMs = 3000): Promise<string> {
  installWorkerListeners();
  const id = nextMetricsRequest++;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      pendingMetrics.delete(id);
      reject(new Error('metrics timeout'));
    }, timeoutMs);
    pendingMetrics.set(id, { resolve, reject, timer });
    process.send!({ type: METRICS_REQ, id });
  });
}

/**
 * The primary's side: its own counters plus the sum over the workers that are serving (a worker still
 * starting is not asked, so a restart never stalls a scrape). Summed with prom-client's aggregator.
 */
export class ClusterMetrics {
  readonly registry = new Registry();
  readonly workers: Gauge;
  readonly restarts: Counter;
  private nextId = 0;
  private readonly pending = new Map<number, { got: MetricJson[]; left: number; done: () => void }>();

  constructor() {
    this.workers = new Gauge({
      name: 'proxyd_cluster_workers',
      help: 'Worker processes serving now',
      registers: [this.registry],
    });
    this.restarts = new Counter({
      name: 'proxyd_cluster_worker_restarts_total',
      help: 'Workers replaced after an unexpected exit',
      registers: [this.registry],
    });
  }

  /** Feed every worker message here. */
  onWorkerMessage(m: { type?: string; id?: number; metrics?: MetricJson }): void {
    if (m?.type !== COLLECT_RES || typeof m.id !== 'number') return;
    const p = this.pending.get(m.id);
    if (!p) return;
    if (Array.isArray(m.metrics)) p.got.push(m.metrics);
    if (--p.left === 0) p.done();
  }

  async text(serving: Array<{ send(m: unknown): boolean; isConnected(): boolean }>, timeoutMs = 2000): Promise<string> {
    const id = this.nextId++;
    const targets = serving.filter((w) => w.isConnected());
    const got: MetricJson[] = [];
    if (targets.length) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, timeoutMs);
        this.pending.set(id, {
          got,
          left: targets.length,
          done: () => {
            clearTimeout(timer);
            resolve();
          },
        });
        for (const w of targets) w.send({ type: COLLECT_REQ, id });
      });
      this.pending.delete(id);
    }
    const workers = got.length ? await AggregatorRegistry.aggregate(got as never).metrics() : '';
    const own = await this.registry.metrics();
    return `${workers}${workers && !workers.endsWith('\n') ? '\n' : ''}${own}`;
  }
}
