// Times in `proxyd admin` output are written as the API writes them: ISO 8601 UTC, whole seconds unless the instant
// has milliseconds, never `.000Z` (plan show, usage rows, connection records alike).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../../src/daemon/store/index.js';
import { adminUsage } from '../../../src/daemon/admin/usage.js';
import { planSet } from '../../../src/daemon/admin/plans.js';
import { connectionJson } from '../../../src/daemon/services/connection-log.js';
import { tempDir } from '../../helpers/daemon.js';

describe('times in proxyd admin output', () => {
  let store: Store;
  const now = Date.UTC(2026, 11, 7, 10, 30, 0);
  beforeAll(async () => {
    store = await openStore({ dataDir: tempDir(), nowMs: () => now });
    const a = (await store.accounts.create('times@example.com', 'x', true)) as { id: number };
    expect(
      await store.usage.addFlush('n1', 'f1', now - 3_600_000, [
        { accountId: a.id, subject: 'user:alice', target: 'example.com', bytesUp: 1, bytesDown: 2, connections: 1 },
      ]),
    ).toBe('ok');
  });
  afterAll(async () => {
    await store?.close();
  });

  it('plan show and plan set: period_start and expires_at without .000Z', async () => {
    const p = await planSet(store, { email: 'times@example.com', period: 'month', expires: '2027-01-31T23:00:00Z' });
    expect(p.expires_at).toBe('2027-01-31T23:00:00Z');
    expect(p.period_start).toMatch(/^\d{4}-\d{2}-\d{2}T00:00:00Z$/);
  });

  it('usage rows by hour: whole hours', async () => {
    const r = await adminUsage(store, { email: 'times@example.com', by: 'hour' }, now);
    expect(r.rows.map((x) => (x as { time: string }).time)).toEqual(['2026-12-07T09:00:00Z']);
  });

  it('a connection record: milliseconds kept when it has them, none written when it has none', () => {
    const row = {
      id: 1,
      node: 'n',
      accountEmail: null,
      startedAt: now,
      requestId: 'r',
      protocol: 'connect',
      sourceIp: '127.0.0.1',
      username: null,
      accountId: -1,
      target: null,
      reason: 'malformed',
      bytesUp: 0,
      bytesDown: 0,
      durationMs: 1,
    };
    expect(connectionJson(row).time).toBe('2026-12-07T10:30:00Z');
    expect(connectionJson({ ...row, startedAt: now + 112 }).time).toBe('2026-12-07T10:30:00.112Z');
  });
});
