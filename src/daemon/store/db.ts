// Opens proxyd.db: WAL, busy timeout, foreign keys, versioned migrations run at start.
import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { MIGRATIONS } from './migrations.js';

export type Db = Database.Database;

export const DB_FILE = 'proxyd.db';

export interface OpenOptions {
  /** Run migrations (serve and admin do; a read-only tool would not). */
  migrate?: boolean;
  busyTimeoutMs?: number;
}

export function openDatabase(dataDir: string, opts: OpenOptions = {}): Db {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const db = new Database(path.join(dataDir, DB_FILE));
  db.pragma('journal_mode = WAL');
  // NORMAL in WAL mode: a committed transaction survives a process crash (kill -9); only an OS crash may lose the last ones.
  db.pragma('synchronous = NORMAL');
  db.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? 5000}`);
  db.pragma('foreign_keys = ON');
  if (opts.migrate !== false) migrate(db);
  return db;
}

export function schemaVersion(db: Db): number {
  return db.pragma('user_version', { simple: true }) as number;
}

export function migrate(db: Db): void {
  // IMMEDIATE so two processes starting together do not both run the same migration.
  const step = db.transaction((version: number, sql: string) => {
    if (schemaVersion(db) >= version) return;
    db.exec(sql);
    db.pragma(`user_version = ${version}`);
  });
  for (const [i, sql] of MIGRATIONS.entries()) {
    const version = i + 1;
    if (schemaVersion(db) >= version) continue;
    step.immediate(version, sql);
  }
}

/** `PRAGMA quick_check`-style integrity check; returns the problems found (empty when sound). */
export function integrityProblems(db: Db): string[] {
  const rows = db.pragma('integrity_check') as Array<{ integrity_check: string }>;
  const problems = rows.map((r) => r.integrity_check).filter((r) => r !== 'ok');
  const fk = db.pragma('foreign_key_check') as unknown[];
  if (fk.length) problems.push(`${fk.length} foreign key violations`);
  return problems;
}
