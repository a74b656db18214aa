// Metrics read at scrape time rather than counted by prom-client: the gateway's set-up histogram (cumulative buckets,
// in seconds, its count the connections opened) and the data dir's disk (no sample, not 0, where there is none).
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Metrics } from '../../../src/daemon/observe/metrics.js';
import type { GatewayStats } from '../../../src/gateway/types.js';
import { tempDir } from '../../helpers/daemon.js';

const sample = (text: string, name: string) =>
  new RegExp(`^${name.replace(/[{}"+.]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1];

describe('metrics read at scrape time', () => {
  it('the set-up histogram: cumulative buckets in seconds, its sum, its count', async () => {
    const m = new Metrics({ defaultMetrics: false });
    const stats: GatewayStats = {
      connectionsOpen: 0,
      connectionsTotal: { http: 0, connect: 3, socks5: 0 },
      admissionFailures: {},
      targetRefusals: {},
      refusals: {},
      // 1 ms or less: 2; over 1 ms up to 5 ms: 1; over every bound: 1.
      setup: { boundsMs: [1, 5], counts: [2, 1, 1], sumMs: 20_004 },
      bytesUp: 0,
      bytesDown: 0,
      egressConnections: {},
      udp: { associationsOpen: 0, datagramsUp: 0, datagramsDown: 0, bytesUp: 0, bytesDown: 0, dropped: {} },
    };
    m.attachGateway(() => stats);
    const text = await m.registry.metrics();
    expect(text).toContain('# TYPE proxyd_gateway_setup_seconds histogram');
    expect(
      ['0.001', '0.005', '+Inf'].map((le) => sample(text, `proxyd_gateway_setup_seconds_bucket{le="${le}"}`)),
    ).toEqual(['2', '3', '4']);
    expect([
      sample(text, 'proxyd_gateway_setup_seconds_sum'),
      sample(text, 'proxyd_gateway_setup_seconds_count'),
    ]).toEqual(['20.004', '4']);
  });

  it("the data dir's disk: free and total bytes of its file system; no sample (not 0) where there is no data dir, as on PostgreSQL", async () => {
    const here = new Metrics({ defaultMetrics: false });
    here.attachDataDir(tempDir());
    const text = await here.registry.metrics();
    const [free, size] = [
      Number(sample(text, 'proxyd_data_dir_free_bytes')),
      Number(sample(text, 'proxyd_data_dir_size_bytes')),
    ];
    expect(free).toBeGreaterThan(0);
    expect(size).toBeGreaterThanOrEqual(free);
    const none = new Metrics({ defaultMetrics: false });
    none.attachDataDir(path.join(tempDir(), 'never-made'));
    const absent = await none.registry.metrics();
    expect(absent).toContain('# TYPE proxyd_data_dir_free_bytes gauge');
    expect(sample(absent, 'proxyd_data_dir_free_bytes')).toBeUndefined();
    expect(sample(absent, 'proxyd_data_dir_size_bytes')).toBeUndefined();
  });
});
