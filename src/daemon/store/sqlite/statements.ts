// Prepared statements are cached per database and databases are pinned for the life of the process.
// Why: with Node 24's node_object_wrap.h, ~ObjectWrap calls RemoveEnvironmentCleanupHook(Isolate::GetCurrent()),
// which aborts ("Assertion failed: (env) != nullptr") when V8 collects a better-sqlite3 Statement or Database
// outside a context. Objects that never become garbage are only destroyed by Node's own cleanup at exit, which is safe.
// So: no `db.prepare()` or `db.pragma()` outside this module; use `stmt()`, `pragmaValue()` and `exec()`.
import type Database from 'better-sqlite3';

type Db = Database.Database;
type AnyStatement = Database.Statement<unknown[], unknown>;

const pinned = new Set<Db>();
const caches = new Map<Db, Map<string, AnyStatement>>();

/** Keeps a database object reachable forever (see above). */
export function pin(db: Db): Db {
  pinned.add(db);
  return db;
}

export function stmt<P extends unknown[] = unknown[], R = unknown>(db: Db, sql: string): Database.Statement<P, R> {
  let cache = caches.get(db);
  if (!cache) {
    cache = new Map();
    caches.set(db, cache);
    pin(db);
  }
  let s = cache.get(sql);
  if (!s) {
    s = db.prepare(sql) as AnyStatement;
    cache.set(sql, s);
  }
  return s as unknown as Database.Statement<P, R>;
}

/** First column of the first row of a read-only PRAGMA (`user_version`, `journal_mode`). */
export function pragmaValue(db: Db, pragma: string): unknown {
  const row = stmt<[], Record<string, unknown>>(db, `PRAGMA ${pragma}`).get();
  return row ? Object.values(row)[0] : undefined;
}

export function pragmaRows<R>(db: Db, pragma: string): R[] {
  return stmt<[], R>(db, `PRAGMA ${pragma}`).all();
}
