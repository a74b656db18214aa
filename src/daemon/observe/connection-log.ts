// The connection log's writer (docs/operations.md, "Connection log"): the gateway hands it one record per refused attempt and per admitted
// connection at its end; it keeps them in a bounded buffer and appends them to the store in batches, off the
// connection path. A slow or absent database never delays a connection: records wait in the buffer (kept for
// the next flush) and what does not fit is dropped and counted (proxyd_connection_log_dropped_total).
import type { ConnectionLogSink, ConnectionRecord } from '../../gateway/types.js';
import { StoreUnavailableError, type ConnectionLogStore } from '../store/index.js';

export interface ConnectionLogOptions {
  /** Records held at most while the database is slow or away (about 300 bytes each). */
  maxBuffered?: number;
  /** Records per INSERT. */
  batch?: number;
  /** How often the buffer is written (a full batch is written at once). */
  intervalMs?: number;
  /** Records older than this are removed (hourly, by whichever node gets there); 0 keeps them. */
  retentionMs?: number;
  /** The log's size on disk at most (oldest days dropped first, the current one kept); absent: no cap. */
  maxSizeBytes?: number;
  log?: { warn(obj: object, msg?: string): void };
}

const DEFAULTS = { maxBuffered: 20_000, batch: 1_000, intervalMs: 250 };
const PRUNE_EVERY_MS = 600_000;
const SIZE_EVERY_MS = 60_000;
/** Days dropped at most per size check (a backlog of years is worked off over several checks). */
const MAX_DAYS_PER_CHECK = 400;
const yieldTurn = () => new Promise<void>((r) => setImmediate(r));

// Usernames (RFC 1929 bytes, Basic credentials) and SOCKS5 domain names come from unauthenticated clients:
// control characters are escaped before they are stored, so no terminal, CSV or database chokes on them
// (PostgreSQL refuses a NUL in text).
const HAS_CONTROL = /[\x00-\x1f\x7f]/;
const CONTROL = /[\x00-\x1f\x7f]/g;
export const escapeControls = (s: string | null): string | null =>
  s === null || !HAS_CONTROL.test(s)
    ? s
    : s.replace(CONTROL, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);

export class ConnectionLogWriter implements ConnectionLogSink {
  private buffer: ConnectionRecord[] = [];
  private flushing: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private pruneTimer: NodeJS.Timeout | null = null;
  private sizeTimer: NodeJS.Timeout | null = null;
  private capping = false;
  private immediate = false;
  private lastWarn = 0;
  written = 0;
  dropped = 0;
  /** Batches the database did not take at once (another writer held its lock): kept and written again. */
  retried = 0;
  private readonly max: number;
  private readonly batch: number;
  private readonly intervalMs: number;

  constructor(
    /** The database, or (a worker on SQLite) the primary, which writes for every worker. */
    /** The store, or a worker's way to the primary's writer (no size of its own to cap: the primary caps it). */
    private readonly store: Pick<ConnectionLogStore, 'insert' | 'prune'> &
      Partial<Pick<ConnectionLogStore, 'sizeBytes' | 'dropOldestDay' | 'alone'>>,
    /** The node name every record of this process carries. */
    private readonly node: string,
    private readonly opts: ConnectionLogOptions = {},
  ) {
    this.max = opts.maxBuffered ?? DEFAULTS.maxBuffered;
    this.batch = opts.batch ?? DEFAULTS.batch;
    this.intervalMs = opts.intervalMs ?? DEFAULTS.intervalMs;
  }

  get buffered(): number {
    return this.buffer.length;
  }

  /** Whether `n` more records fit in the buffer now. */
  accepts(n: number): boolean {
    return this.buffer.length + n <= this.max;
  }

  record(r: ConnectionRecord): void {
    if (this.buffer.length >= this.max) {
      this.dropped++;
      return;
    }
    if (r.username !== null) r.username = escapeControls(r.username);
    if (r.target !== null) r.target = escapeControls(r.target);
    this.buffer.push(r);
    // A full batch goes now rather than at the next tick (bounded by one flush at a time).
    if (this.buffer.length >= this.batch && !this.immediate && this.timer) {
      this.immediate = true;
      setImmediate(() => {
        this.immediate = false;
        void this.flush();
      });
    }
  }

  start(): void {
    this.timer = setInterval(() => void this.flush(), this.intervalMs);
    this.timer.unref();
    const retention = this.opts.retentionMs ?? 0;
    if (retention > 0) {
      const prune = () => void this.store.prune(Date.now() - retention).catch(() => {});
      prune();
      this.pruneTimer = setInterval(prune, PRUNE_EVERY_MS);
      this.pruneTimer.unref();
    }
    if (this.opts.maxSizeBytes !== undefined) {
      void this.capSize();
      this.sizeTimer = setInterval(() => void this.capSize(), SIZE_EVERY_MS);
      this.sizeTimer.unref();
    }
  }

  /** Drops the oldest days while the log is larger than --connection-log-max-size; the current day stays. */
  async capSize(now = Date.now()): Promise<number> {
    const max = this.opts.maxSizeBytes;
    if (max === undefined || this.capping) return 0;
    this.capping = true;
    let dropped = 0;
    try {
      const { sizeBytes, dropOldestDay } = this.store;
      if (!sizeBytes || !dropOldestDay) return 0;
      const check = async () => {
        while (dropped < MAX_DAYS_PER_CHECK && (await sizeBytes.call(this.store)) > max) {
          if (!(await dropOldestDay.call(this.store, now))) {
            this.warnOnce(
              'connection_log_over_max_size',
              "today's records alone are over --connection-log-max-size (kept)",
            );
            break;
          }
          dropped++;
        }
      };
      // In a fleet one node checks at a time (the others' checks are skipped: the log is the fleet's).
      if (this.store.alone) await this.store.alone(check);
      else await check();
    } catch (e) {
      this.warnOnce('connection_log_size_check_failed', e instanceof Error ? e.message : String(e));
    } finally {
      this.capping = false;
    }
    return dropped;
  }

  private warnOnce(event: string, detail: string): void {
    const now = Date.now();
    if (now - this.lastWarn < 10_000) return;
    this.lastWarn = now;
    this.opts.log?.warn({ event, detail }, 'connection log');
  }

  /** Writes what is buffered, a batch at a time; a failed batch goes back to the front and waits for the next tick. */
  flush(): Promise<void> {
    return (this.flushing ??= this.drain().finally(() => {
      this.flushing = null;
    }));
  }

  private async drain(): Promise<void> {
    while (this.buffer.length > 0) {
      const batch = this.buffer.splice(0, this.batch);
      let ok: boolean;
      let why = 'busy';
      try {
        ok = (await this.store.insert(this.node, batch)) === 'ok';
      } catch (e) {
        ok = false;
        why = e instanceof Error ? e.message : String(e);
        // Not the database being away or slow: something in the batch it will never take. Record by
        // record, so one bad record costs itself, not the log.
        if (!(e instanceof StoreUnavailableError)) {
          await this.oneByOne(batch);
          continue;
        }
      }
      if (!ok) this.retried++;
      if (ok) {
        this.written += batch.length;
        // A synchronous backend (SQLite) writes a batch in one turn: let the sockets run between batches.
        await yieldTurn();
        continue;
      }
      // Kept, oldest first; what arrived meanwhile beyond the bound is dropped (counted).
      const room = this.max - batch.length;
      if (this.buffer.length > room) {
        this.dropped += this.buffer.length - Math.max(room, 0);
        this.buffer.length = Math.max(room, 0);
      }
      this.buffer = batch.slice(0, this.max).concat(this.buffer);
      const now = Date.now();
      if (now - this.lastWarn >= 10_000) {
        this.lastWarn = now;
        this.opts.log?.warn(
          { event: 'connection_log_write_failed', detail: why, buffered: this.buffer.length },
          'connection log: records kept until the database answers',
        );
      }
      return;
    }
  }

  private async oneByOne(batch: ConnectionRecord[]): Promise<void> {
    for (const r of batch) {
      try {
        if ((await this.store.insert(this.node, [r])) === 'ok') this.written++;
        else this.dropped++;
      } catch (e) {
        this.dropped++;
        const now = Date.now();
        if (now - this.lastWarn >= 10_000) {
          this.lastWarn = now;
          this.opts.log?.warn(
            { event: 'connection_log_record_refused', detail: e instanceof Error ? e.message : String(e) },
            'connection log: a record the database refused was dropped',
          );
        }
      }
    }
  }

  /** Stops the timers and writes what is left, for at most `deadlineMs`. */
  async stop(deadlineMs = 2_000): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    if (this.pruneTimer) clearInterval(this.pruneTimer);
    if (this.sizeTimer) clearInterval(this.sizeTimer);
    this.sizeTimer = null;
    this.timer = null;
    this.pruneTimer = null;
    await Promise.race([this.flush(), new Promise((r) => setTimeout(r, deadlineMs).unref())]);
  }
}
