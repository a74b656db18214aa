// The connection log as JSON lines (`--connection-log-sink jsonl:PATH|stdout`): one line per record, in the
// shape `proxyd admin connections` prints, for a log pipeline instead of the database. Records are buffered
// off the connection path and written every 250 ms (so within 2 s), each batch in one write: several workers
// appending to one file (O_APPEND) never interleave inside a line. A file sink reopens its path on SIGHUP
// (`reopen()`), after logrotate has moved the old file away.
import { closeSync, openSync, writeSync } from 'node:fs';
import type { ConnectionLogSink, ConnectionRecord } from '../../gateway/types.js';
import { connectionJson } from '../services/connection-log.js';
import type { AccountStore } from '../store/index.js';
import { escapeControls } from './connection-log.js';

const FLUSH_EVERY_MS = 250;
const MAX_BUFFERED = 20_000;
/** Account emails remembered (the records name the account by email, as the database's do). */
const MAX_EMAILS = 100_000;

/** Whole lines in writes of at most PIPE_BUF bytes: atomic on a pipe that several workers share. */
function pipeChunks(text: string): string[] {
  const out: string[] = [];
  let start = 0;
  while (start < text.length) {
    let end = start;
    for (
      let nl = text.indexOf('\n', end);
      nl >= 0 && Buffer.byteLength(text.slice(start, nl + 1)) <= 4096;
      nl = text.indexOf('\n', end)
    )
      end = nl + 1;
    if (end === start) end = text.indexOf('\n', start) + 1; // one line longer than PIPE_BUF: alone
    out.push(text.slice(start, end));
    start = end;
  }
  return out;
}

/** Writes the chunks in order; settles when stdout has taken the last one, or with the first write's error. */
function writeStdout(chunks: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    chunks.forEach((chunk, i) =>
      process.stdout.write(chunk, (e) => (e ? reject(e) : i === chunks.length - 1 && resolve())),
    );
  });
}

export type LineTarget = { kind: 'stdout' } | { kind: 'file'; path: string };

export class ConnectionLogLines implements ConnectionLogSink {
  private buffer: ConnectionRecord[] = [];
  private timer: NodeJS.Timeout | null = null;
  private fd: number | null = null;
  private flushing: Promise<void> | null = null;
  private readonly emails = new Map<number, string | null>();
  private lastWarn = 0;
  /** Why stdout cannot be written any more (its reader went away: EPIPE): later batches are dropped and counted. */
  private stdoutGone: Error | null = null;
  written = 0;
  dropped = 0;
  /** Writes sent again (a database's; a file is written once or the batch is dropped). */
  readonly retried = 0;

  constructor(
    private readonly target: LineTarget,
    private readonly node: string,
    private readonly accounts: Pick<AccountStore, 'get'>,
    private readonly log?: { warn(obj: object, msg?: string): void },
  ) {}

  get buffered(): number {
    return this.buffer.length;
  }

  /** Opens the file (appending, created mode 0640); throws a plain message when it cannot. */
  start(): void {
    if (this.target.kind === 'file') this.fd = this.open(this.target.path);
    // A write to a pipe whose reader went away fails as an 'error' event, not a throw: unheard, it ended the
    // daemon and every tunnel with it. The records are dropped (counted) and the gateway goes on.
    if (this.target.kind === 'stdout') process.stdout.on('error', (e: Error) => (this.stdoutGone ??= e));
    this.timer = setInterval(() => void this.flush(), FLUSH_EVERY_MS);
    this.timer.unref();
  }

  private open(path: string): number {
    try {
      return openSync(path, 'a', 0o640);
    } catch (e) {
      throw new Error(
        `--connection-log-sink jsonl:${path}: cannot open it for appending (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
      );
    }
  }

  /** After logrotate moved the file: write to a new one at the same path (what was buffered goes there). */
  reopen(): void {
    if (this.target.kind !== 'file' || this.fd === null) return;
    let fresh: number;
    try {
      fresh = openSync(this.target.path, 'a', 0o640);
    } catch (e) {
      this.warn('connection_log_reopen_failed', e);
      return; // keep writing to the old file rather than lose records
    }
    const old = this.fd;
    this.fd = fresh;
    closeSync(old);
  }

  record(r: ConnectionRecord): void {
    if (this.buffer.length >= MAX_BUFFERED) {
      this.dropped++;
      return;
    }
    if (r.username !== null) r.username = escapeControls(r.username);
    if (r.target !== null) r.target = escapeControls(r.target);
    this.buffer.push(r);
  }

  flush(): Promise<void> {
    return (this.flushing ??= this.drain().finally(() => (this.flushing = null)));
  }

  private async drain(): Promise<void> {
    if (this.buffer.length === 0) return;
    const batch = this.buffer;
    this.buffer = [];
    await this.learnEmails(batch);
    let text = '';
    for (const r of batch) {
      const email = r.accountId > 0 ? (this.emails.get(r.accountId) ?? null) : null;
      text += `${JSON.stringify(connectionJson({ ...r, id: 0, node: this.node, accountEmail: email }))}\n`;
    }
    try {
      if (this.stdoutGone) throw this.stdoutGone;
      if (this.target.kind === 'stdout') await writeStdout(pipeChunks(text));
      else {
        const bytes = Buffer.from(text);
        for (let off = 0; off < bytes.length;) off += writeSync(this.fd!, bytes, off);
      }
      this.written += batch.length;
    } catch (e) {
      this.dropped += batch.length;
      this.warn('connection_log_write_failed', e);
    }
  }

  /** The emails of accounts not seen before (one read each; an account whose read fails is named null once). */
  private async learnEmails(batch: ConnectionRecord[]): Promise<void> {
    const missing = new Set<number>();
    for (const r of batch) if (r.accountId > 0 && !this.emails.has(r.accountId)) missing.add(r.accountId);
    for (const id of missing) {
      let email: string | null = null;
      try {
        email = (await this.accounts.get(id))?.email ?? null;
      } catch (e) {
        this.warn('connection_log_account_unread', e);
        continue; // asked again with the next record of that account
      }
      if (this.emails.size >= MAX_EMAILS) this.emails.delete(this.emails.keys().next().value as number);
      this.emails.set(id, email);
    }
  }

  private warn(event: string, e: unknown): void {
    const now = Date.now();
    if (now - this.lastWarn < 10_000) return;
    this.lastWarn = now;
    this.log?.warn({ event, detail: e instanceof Error ? e.message : String(e) }, 'connection log (JSON lines)');
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.flush();
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}
