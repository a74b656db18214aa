// The admission view's feed: the store's change log (either backend), woken by the backend's own signal (a
// watch on the data dir for SQLite, LISTEN/NOTIFY for PostgreSQL) with the view's short poll as the fallback,
// and the periodic trim that keeps the log bounded.
import type { AdmissionFeed } from './view.js';
import type { AdmissionSnapshotRows, AdmissionUserRow, ChangeLogStore } from '../store/index.js';

interface FeedOptions {
  /** Log rows kept by the trim (a node further behind than this reloads in full). */
  keepRows?: number;
  trimEveryMs?: number;
  /** Follow the backend's wake-ups (off: the view's poll alone). */
  wake?: boolean;
  log?: { warn(obj: object, msg?: string): void };
}

const DEFAULT_KEEP_ROWS = 100_000;

export class StoreAdmissionFeed implements AdmissionFeed {
  private stopWatching: (() => void) | null = null;
  private readonly trimTimer: NodeJS.Timeout;

  constructor(
    private readonly changeLog: ChangeLogStore,
    private readonly opts: FeedOptions = {},
  ) {
    const keep = opts.keepRows ?? DEFAULT_KEEP_ROWS;
    this.trimTimer = setInterval(() => void this.trim(keep), opts.trimEveryMs ?? 30_000);
    this.trimTimer.unref();
  }

  snapshot(onUsers?: (rows: readonly AdmissionUserRow[]) => void | Promise<void>) {
    return this.changeLog.snapshot(onUsers);
  }

  changesSince(seq: number, limit: number) {
    return this.changeLog.changesSince(seq, limit);
  }

  snapshotSource() {
    return this.changeLog.snapshotSource();
  }

  adoptSnapshot(snap: Pick<AdmissionSnapshotRows, 'gaps'>): void {
    this.changeLog.adoptSnapshot(snap);
  }

  onWake(cb: () => void): void {
    if (this.opts.wake === false) return;
    this.stopWatching = this.changeLog.watch(cb, (err) =>
      this.opts.log?.warn(
        { event: 'admission_wake_unavailable', err: err.message },
        'no change notifications: the admission view follows by polling',
      ),
    );
  }

  close(): void {
    clearInterval(this.trimTimer);
    this.stopWatching?.();
    this.stopWatching = null;
  }

  private async trim(keep: number): Promise<void> {
    try {
      await this.changeLog.trim(keep);
    } catch (err) {
      // Busy, read-only or unreachable: the next round (or another node) trims.
      this.opts.log?.warn({ event: 'change_log_trim_failed', err: (err as Error).message }, 'change log trim failed');
    }
  }
}
