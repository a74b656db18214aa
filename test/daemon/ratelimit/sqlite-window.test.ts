// The SQLite window store used by several workers: exact, and a lock held by another process is waited
// out without blocking this process's event loop (the connection has no busy timeout; hits are retried).
import { afterEach, describe, expect, it } from 'vitest';
import { LimiterUnavailableError } from '../../../src/daemon/ratelimit/limiter.js';
import { DatabaseWindowStore } from '../../../src/daemon/ratelimit/database-store.js';
import { SqliteStore } from '../../../src/daemon/store/sqlite/index.js';
import { inspectDb, tempDir } from '../../helpers/daemon.js';
import { sleep } from '../../helpers/wait.js';

const open: Array<{ close(): void | Promise<void> }> = [];
afterEach(async () => {
  for (const o of open.splice(0)) await o.close();
});

async function setup() {
  const dir = tempDir();
  const store = SqliteStore.open(dir);
  const window = new DatabaseWindowStore(store.sharedRateHits());
  const other = await inspectDb(dir, { write: true });
  open.push(window, store, other);
  return { window, other };
}

describe('SqliteWindowStore', () => {
  it('waits out another connection holding the write lock, without blocking the event loop', async () => {
    const { window, other } = await setup();
    other.run('BEGIN IMMEDIATE');
    let ticks = 0;
    // 15 ticks due while the lock is held; a blocked loop would see none. A third of them is the bar, so
    // a loaded machine (CI beside a soak) that delays timers does not fail the test.
    const ticker = setInterval(() => ticks++, 10);
    const pending = window.consume('k', 10, 60_000, Date.now());
    await sleep(150);
    other.run('COMMIT');
    const d = await pending;
    clearInterval(ticker);
    expect(d.allowed).toBe(true);
    expect(ticks).toBeGreaterThanOrEqual(5); // timers kept firing while the hit waited
  });

  it('reports the store unavailable when the lock is never released', async () => {
    const { window, other } = await setup();
    other.run('BEGIN IMMEDIATE');
    await expect(window.consume('k', 10, 60_000, Date.now())).rejects.toBeInstanceOf(LimiterUnavailableError);
    other.run('ROLLBACK');
  });

  it('is exact: the eleventh hit of a ten-per-window key is refused', async () => {
    const { window } = await setup();
    const now = Date.now();
    const results = await Promise.all(Array.from({ length: 11 }, () => window.consume('k', 10, 60_000, now)));
    expect(results.filter((r) => r.allowed)).toHaveLength(10);
  });
});
