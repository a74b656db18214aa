// Prometheus metrics (prom-client). Labels are routes, codes and reasons: never a token, an IP or a username.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { GatewayStats } from '../gateway/types.js';

export class Metrics {
  readonly registry = new Registry();
  readonly httpRequests: Counter<'route' | 'method' | 'status' | 'code'>;
  readonly httpDuration: Histogram<'route'>;
  readonly rateLimited: Counter<'route' | 'reason'>;
  private gatewayStats: (() => GatewayStats) | null = null;

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: 'proxyd_' });
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
      help: 'Requests refused by a rate limit, by route and reason (token, source_ip, store_unavailable)',
      labelNames: ['route', 'reason'],
      registers: [this.registry],
    });
    const self = this;
    new Gauge({
      name: 'proxyd_gateway_connections_open',
      help: 'Gateway connections open now',
      registers: [this.registry],
      collect() {
        const s = self.gatewayStats?.();
        if (s) this.set(s.connectionsOpen);
      },
    });
    new Counter({
      name: 'proxyd_gateway_connections_total',
      help: 'Gateway connections accepted, by protocol path',
      labelNames: ['path'],
      registers: [this.registry],
      collect() {
        const s = self.gatewayStats?.();
        if (!s) return;
        this.reset();
        for (const [path, n] of Object.entries(s.connectionsTotal)) this.inc({ path }, n);
      },
    });
    new Counter({
      name: 'proxyd_gateway_admission_failures_total',
      help: 'Gateway connections refused at admission, by reason',
      labelNames: ['reason'],
      registers: [this.registry],
      collect() {
        const s = self.gatewayStats?.();
        if (!s) return;
        this.reset();
        for (const [reason, n] of Object.entries(s.admissionFailures)) this.inc({ reason }, n);
      },
    });
    new Counter({
      name: 'proxyd_gateway_target_refusals_total',
      help: 'Gateway targets refused, by reason',
      labelNames: ['reason'],
      registers: [this.registry],
      collect() {
        const s = self.gatewayStats?.();
        if (!s) return;
        this.reset();
        for (const [reason, n] of Object.entries(s.targetRefusals)) this.inc({ reason }, n);
      },
    });
    new Counter({
      name: 'proxyd_gateway_bytes_total',
      help: 'Bytes relayed by the gateway, by direction (up = client to target)',
      labelNames: ['direction'],
      registers: [this.registry],
      collect() {
        const s = self.gatewayStats?.();
        if (!s) return;
        this.reset();
        this.inc({ direction: 'up' }, s.bytesUp);
        this.inc({ direction: 'down' }, s.bytesDown);
      },
    });
  }

  attachGateway(stats: () => GatewayStats): void {
    this.gatewayStats = stats;
  }
}
