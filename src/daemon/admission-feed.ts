// The admission view's feed on SQLite: the store's change log, woken by a watch on the data dir (every
// commit by any process appends to proxyd.db-wal), the view's short poll as the fallback, and the trim
// that keeps the log bounded. The PostgreSQL feed will wake on LISTEN/NOTIFY instead of the file watch.
import { watch, type FSWatcher } from 'node:fs';
import type { AdmissionFeed } from './admission-view.js';
import { DB_FILE } from './store/db.js';
import type { ChangeLogStore } from './store/change-log.js';

export interface SqliteFeedOptions {
  /** Data dir to watch for commits; none: the view's poll alone. */
  dataDir?: string;
  /** Log rows kept by the trim (a node further behind than this reloads in full). */
  keepRows?: number;
  trimEveryMs?: number;
  log?: { warn(obj: object, msg?: string): void };
}

export const DEFAULT_KEEP_ROWS = 100_000;

export class SqliteAdmissionFeed implements AdmissionFeed {
  private watcher: FSWatcher | null = null;
  private trimTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly changeLog: ChangeLogStore,
    private readonly opts: SqliteFeedOptions = {},
  ) {
    const keep = opts.keepRows ?? DEFAULT_KEEP_ROWS;
    this.trimTimer = setInterval(() => this.trim(keep), opts.trimEveryMs ?? 30_000);
    this.trimTimer.unref();
  }

  async snapshot() {
    return this.changeLog.snapshot();
  }

  async changesSince(seq: number, limit: number) {
    return this.changeLog.changesSince(seq, limit);
  }

  onWake(cb: () => void): void {
    if (!this.opts.dataDir) return;
    try {
      this.watcher = watch(this.opts.dataDir, { persistent: false }, (_event, name) => {
        if (name === null || name.startsWith(DB_FILE)) cb();
      });
      this.watcher.on('error', () => this.stopWatching());
    } catch (err) {
      // No inotify (watch limit, network file system): the poll alone keeps the view current.
      this.opts.log?.warn({ event: 'admission_watch_unavailable', err: (err as Error).message }, 'no file watch on the data dir: admission view follows by polling');
    }
  }

  close(): void {
    if (this.trimTimer) clearInterval(this.trimTimer);
    this.stopWatching();
  }

  private stopWatching(): void {
    this.watcher?.close();
    this.watcher = null;
  }

  private trim(keep: number): void {
    try {
      this.changeLog.trim(keep);
    } catch (err) {
      // Busy or read-only: the next round (or another node) trims.
      this.opts.log?.warn({ event: 'change_log_trim_failed', err: (err as Error).message }, 'change log trim failed');
    }
  }
}
