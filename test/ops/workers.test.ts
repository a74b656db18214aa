// --workers 2: limits exact across workers (the database's window store), a killed worker is replaced,
// SIGTERM drains everything and exits 0 leaving a sound database and no lock. On each store backend.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inspectData, makeAccount, startDaemon, type Daemon, ADD, LIST } from '../helpers/daemon.js';
import { BACKENDS } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';
import { api, childPids, pub } from './helpers.js';

describe.each(BACKENDS)('proxyd serve --workers 2 on %s', (backend) => {
  let d: Daemon;
  beforeAll(async () => {
    d = await startDaemon({ backend, args: ['--workers', '2'] });
  });
  afterAll(async () => {
    await d?.stop('SIGKILL');
  });

  it('runs two workers behind one ready line', async () => {
    expect(childPids(d.proc.pid!)).toHaveLength(2);
    expect(await (await fetch(`${d.api}/healthz`)).json()).toEqual({ status: 'ok' });
  });

  it('holds limits exactly across workers under parallel requests', async () => {
    const { token } = await makeAccount(d.dataDir, 'workers@example.com');
    const adds = await Promise.all(
      Array.from({ length: 30 }, (_, i) => api(d.api, ADD, token, { items: [{ ip: pub(i) }] })),
    );
    expect(adds.filter((r) => r.json.code === 200)).toHaveLength(10);
    expect(adds.filter((r) => r.status === 429)).toHaveLength(20);
    const lists = await Promise.all(Array.from({ length: 80 }, () => api(d.api, LIST, token)));
    expect(lists.filter((r) => r.status === 200)).toHaveLength(60);
    expect(lists.filter((r) => r.status === 429)).toHaveLength(20);
  });

  it('aggregates metrics over workers, with no token or IP in any label', async () => {
    const { token } = await makeAccount(d.dataDir, 'metrics@example.com');
    await Promise.all(Array.from({ length: 6 }, () => api(d.api, LIST, token)));
    const text = await (await fetch(`${d.api}/metrics`)).text();
    const listed = text
      .split('\n')
      .filter(
        (l) =>
          l.startsWith('proxyd_http_requests_total{') && l.includes(`route="${LIST}"`) && l.includes('status="200"'),
      )
      .map((l) => Number(l.split(' ').pop()));
    expect(listed.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(66); // 60 above + 6 here, from both workers
    expect(text).toMatch(/proxyd_cluster_workers 2/);
    expect(text).toMatch(/proxyd_rate_limit_rejections_total\{route="[^"]+",reason="[a-z_]+"\} \d+/);
    expect(text).not.toContain(token.split('.')[0]!);
    expect(text).not.toContain(token);
    expect(text).not.toMatch(/8\.8\.\d+\.\d+/);
  });

  it('replaces a killed worker and keeps serving', async () => {
    const before = childPids(d.proc.pid!);
    process.kill(before[0]!, 'SIGKILL');
    const after = await waitFor('a replacement worker', () => {
      const now = childPids(d.proc.pid!);
      return now.length === 2 && !now.includes(before[0]!) ? now : null;
    });
    expect(after).toContain(before[1]);
    // A request may still land on the dying worker's socket: a failed fetch is "not yet", not a failure.
    await waitFor(
      'serving',
      async () =>
        (await fetch(`${d.api}/healthz`, { headers: { connection: 'close' } }).catch(() => null))?.status === 200,
    );
    const text = await (await fetch(`${d.api}/metrics`)).text();
    expect(text).toMatch(/proxyd_cluster_worker_restarts_total 1/);
    expect(d.logs.some((l) => l.includes('"event":"worker_exit"'))).toBe(true);
  });

  it('SIGTERM drains every worker and exits 0 with the database intact', async () => {
    const workers = childPids(d.proc.pid!);
    const code = await d.stop('SIGTERM');
    expect(code).toBe(0);
    for (const pid of workers) expect(() => process.kill(pid, 0)).toThrow();
    expect(existsSync(path.join(d.dataDir, 'proxyd.lock'))).toBe(false);
    const db = await inspectData(d.dataDir);
    try {
      expect(await db.integrity()).toBe('ok');
      expect(
        (await db.get<{ n: number }>('SELECT COUNT(*) AS n FROM whitelist_entries WHERE deleted_at IS NULL')).n,
      ).toBe(10);
    } finally {
      await db.close();
    }
  });
});
