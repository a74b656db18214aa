// Versioned migrations: a database made by an older proxyd is brought up to date on open, once.
import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../../src/daemon/store/sqlite/migrations.js';
import { SqliteStore } from '../../../src/daemon/store/sqlite/index.js';
import { inspectDb, tempDir } from '../../helpers/daemon.js';

describe('migrations', () => {
  it('upgrades a version-1 database and keeps its rows', async () => {
    const dir = tempDir();
    const s = SqliteStore.open(dir);
    const a = await s.accounts.create('old@example.com', 'hash', true);
    if (a === 'exists') throw new Error('unexpected');
    await s.whitelist.claimIp(a.id, '8.8.8.8', 'kept');
    await s.close();
    // Roll the file back to what migration 1 alone made.
    const w = await inspectDb(dir, { write: true });
    w.run('DROP INDEX whitelist_account_newest');
    w.run('PRAGMA user_version = 1');
    w.close();

    await SqliteStore.open(dir).close();
    const r = await inspectDb(dir);
    expect(r.get<{ user_version: number }>('PRAGMA user_version').user_version).toBe(MIGRATIONS.length);
    expect(
      r.get<{ n: number }>(
        "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'index' AND name = 'whitelist_account_newest'",
      ).n,
    ).toBe(1);
    expect(r.get<{ remark: string }>("SELECT remark FROM whitelist_entries WHERE ip = '8.8.8.8'").remark).toBe('kept');
    r.close();
  });

  it('lists pages from the newest-first index, without sorting every entry', async () => {
    const dir = tempDir();
    await SqliteStore.open(dir).close();
    const r = await inspectDb(dir);
    const plan = r
      .all<{ detail: string }>(
        'EXPLAIN QUERY PLAN SELECT id FROM whitelist_entries WHERE account_id = 1 AND deleted_at IS NULL ORDER BY created_at DESC, id DESC LIMIT 20',
      )
      .map((p) => p.detail)
      .join(' | ');
    r.close();
    expect(plan).toContain('whitelist_account_newest');
    expect(plan).not.toContain('TEMP B-TREE');
  });
});
