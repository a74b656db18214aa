// Opens proxyd.db: WAL, busy timeout, foreign keys, versioned migrations run at start.
import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { MIGRATIONS } from './migrations.js';
import { pin, pragmaRows, pragmaValue } from './statements.js';

export type Db = Database.Database;

export const DB_FILE = 'proxyd.db';

/** A lock held by another connection or process (SQLITE_BUSY*, SQLITE_LOCKED*): worth retrying, not a fault. */
export function isBusyError(e: unknown): boolean {
  const code = (e as { code?: string }).code ?? '';
  return code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED');
}

interface OpenOptions {
  /** Run migrations (serve and admin do; a read-only tool would not). */
  migrate?: boolean;
  busyTimeoutMs?: number;
  /**
   * Refuse a file this user may not write (the serving path): SQLite opens it read-only without a word, and
   * every write would fail later. A write of the header (the version it has) tells at once.
   */
  mustWrite?: boolean;
}

/** The addon is built at install; an install that skipped scripts has none: say what to run, not a loader trace. */
function newDatabase(file: string, options?: Database.Options): Db {
  try {
    return pin(new Database(file, options));
  } catch (e) {
    const msg = (e as Error).message ?? '';
    if (
      /bindings file|ERR_DLOPEN_FAILED|NODE_MODULE_VERSION|better_sqlite3\.node/.test(
        `${msg} ${(e as { code?: string }).code ?? ''}`,
      )
    ) {
      throw new Error(
        'the SQLite addon (better-sqlite3) is not built for this Node.js; run `npm rebuild better-sqlite3` in the install directory',
      );
    }
    throw e;
  }
}

export function openDatabase(dataDir: string, opts: OpenOptions = {}): Db {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const file = path.join(dataDir, DB_FILE);
  let db: Db | undefined;
  try {
    db = newDatabase(file);
    // exec rather than the pragma method: no throwaway statement objects (see statements.ts).
    db.exec('PRAGMA journal_mode = WAL');
    // NORMAL in WAL mode: a committed transaction survives a process crash (kill -9); only an OS crash may lose the last ones.
    db.exec('PRAGMA synchronous = NORMAL');
    db.exec(`PRAGMA busy_timeout = ${opts.busyTimeoutMs ?? 5000}`);
    db.exec('PRAGMA foreign_keys = ON');
    if (opts.migrate !== false) migrate(db);
    if (opts.mustWrite) db.exec(`PRAGMA user_version = ${schemaVersion(db)}`);
    return db;
  } catch (e) {
    // Opened, then refused (a pragma, a migration): the handle goes too.
    try {
      db?.close();
    } catch {
      /* closing what failed: nothing more to say */
    }
    throw namingFile(e, file);
  }
}

/**
 * SQLite's own words (`file is not a database`, `unable to open database file`, `attempt to write a readonly
 * database`) name no file: the operator is told which one, the error's code kept (busy stays busy).
 */
function namingFile(e: unknown, file: string): unknown {
  const code = (e as { code?: string }).code;
  if (typeof code !== 'string' || !code.startsWith('SQLITE_') || isBusyError(e)) return e;
  const hint = code.startsWith('SQLITE_READONLY')
    ? ' (run proxyd as the user that owns the data dir and its files)'
    : '';
  return Object.assign(new Error(`${file}: ${(e as Error).message}${hint}`), { code });
}

/**
 * proxyd.db read-only, for a reader on another thread (the admission view's reload worker): no migrations, and
 * the file must be there already (the serving process made it).
 */
export function openReadOnly(dataDir: string, busyTimeoutMs = 5000): Db {
  const file = path.join(dataDir, DB_FILE);
  try {
    const db = newDatabase(file, { readonly: true, fileMustExist: true });
    db.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
    return db;
  } catch (e) {
    throw namingFile(e, file);
  }
}

export function schemaVersion(db: Db): number {
  return pragmaValue(db, 'user_version') as number;
}

export function migrate(db: Db): void {
  // IMMEDIATE so two processes starting together do not both run the same migration.
  const step = db.transaction((version: number, sql: string) => {
    if (schemaVersion(db) >= version) return;
    db.exec(withoutExistingColumns(db, sql));
    db.exec(`PRAGMA user_version = ${version}`);
  });
  for (const [i, sql] of MIGRATIONS.entries()) {
    const version = i + 1;
    if (schemaVersion(db) >= version) continue;
    step.immediate(version, sql);
  }
}

// SQLite has no ADD COLUMN IF NOT EXISTS: a column a migration adds is skipped when it is there already, so
// every migration can run again over a newer schema (as CREATE … IF NOT EXISTS lets the others).
const ADD_COLUMN = /ALTER TABLE (\w+) ADD COLUMN (\w+)[^;]*;/g;
function withoutExistingColumns(db: Db, sql: string): string {
  return sql.replace(ADD_COLUMN, (stmt: string, table: string, column: string) =>
    pragmaRows<{ name: string }>(db, `table_info(${table})`).some((c) => c.name === column) ? '' : stmt,
  );
}

/** `PRAGMA quick_check`-style integrity check; returns the problems found (empty when sound). */
export function integrityProblems(db: Db): string[] {
  const rows = pragmaRows<{ integrity_check: string }>(db, 'integrity_check');
  const problems = rows.map((r) => r.integrity_check).filter((r) => r !== 'ok');
  const fk = pragmaRows<unknown>(db, 'foreign_key_check');
  if (fk.length) problems.push(`${fk.length} foreign key violations`);
  return problems;
}
