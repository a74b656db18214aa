// Closing a SQLite store folds the WAL into the main file, except from a cluster worker: there the checkpoint
// waited (busy_timeout, 5 s) for a reader on an older snapshot while holding the write lock, and the primary's
// no-wait writes for the other workers (their last usage flushes at shutdown) were refused as busy meanwhile.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteStore } from '../../../src/daemon/store/sqlite/index.js';
import { inspectDb } from '../../helpers/daemon.js';
import { patient } from '../../helpers/patience.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const flush = (store: SqliteStore, id: string) =>
  store.usage.addFlush('node-a', id, Date.now(), [
    { accountId: 1, subject: 'alice', bytesUp: 10, bytesDown: 20, connections: 1 },
  ]);

describe('closing a SQLite store', () => {
  it('a worker leaves the WAL to the primary: its close neither waits for readers nor holds the write lock', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'sqlite-close-'));
    dirs.push(dir);
    const primary = SqliteStore.open(dir);
    expect(await flush(primary, 'f1')).toBe('ok');
    // A reader (another worker's admission view, say) on a snapshot older than the WAL's last frame.
    const reader = await inspectDb(dir);
    reader.run('BEGIN');
    reader.get('SELECT count(*) AS n FROM accounts');
    expect(await flush(primary, 'f2')).toBe('ok');

    const worker = SqliteStore.open(dir, { foldWalOnClose: false });
    const t0 = Date.now();
    await worker.close();
    expect(Date.now() - t0).toBeLessThan(patient(1000)); // folding, it waited out the 5 s busy timeout
    expect(await flush(primary, 'f3')).toBe('ok');

    reader.run('COMMIT');
    reader.close();
    // The primary, closing last, still folds the WAL into the main file.
    await primary.close();
    expect(statSync(path.join(dir, 'proxyd.db-wal'), { throwIfNoEntry: false })?.size ?? 0).toBe(0);
  });
});
