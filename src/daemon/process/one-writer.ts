// With `--workers N` on SQLite, one process writes usage and the connection log: the primary. Workers hand it
// their batches over IPC (a message per batch, never per connection) and it writes them through one writer
// connection, so the workers' writers never meet on the file's lock and the transactions are as few and as
// large as one process's (docs/decisions.md#d-035, "Workers on SO_REUSEPORT"). On PostgreSQL workers write directly.
import cluster, { type Worker } from 'node:cluster';
import type { ConnectionRecord, UsageDelta } from '../../gateway/types.js';
import type { DaemonLog } from '../log.js';
import type { ServeConfig } from './config.js';
import { connectionLogBuffer } from './serve.js';
import { UsageMeter } from '../metering/meter.js';
import { ConnectionLogWriter } from '../observe/connection-log.js';
import { StoreUnavailableError, type ConnectionLogStore, type Store, type UsageStore } from '../store/index.js';

const WRITE = 'proxyd:write';
const WRITTEN = 'proxyd:written';
/** A worker waits this long for the primary's answer, then keeps its batch for the next flush. */
const ANSWER_TIMEOUT_MS = 5_000;

/** A record as a tuple on the way to the primary: field names are not serialised once per record. */
type PackedRecord = [
  startedAt: number,
  requestId: string,
  protocol: ConnectionRecord['protocol'],
  sourceIp: string,
  username: string | null,
  accountId: number,
  target: string | null,
  reason: ConnectionRecord['reason'],
  bytesUp: number,
  bytesDown: number,
  durationMs: number,
  exit: string | null,
  exitMovedFrom: string | null,
  /** A UDP association's datagrams each way (null on every other record). */
  datagramsUp: number | null,
  datagramsDown: number | null,
];

export const packRecord = (r: ConnectionRecord): PackedRecord => [
  r.startedAt,
  r.requestId,
  r.protocol,
  r.sourceIp,
  r.username,
  r.accountId,
  r.target,
  r.reason,
  r.bytesUp,
  r.bytesDown,
  r.durationMs,
  r.exit ?? null,
  r.exitMovedFrom ?? null,
  r.datagramsUp ?? null,
  r.datagramsDown ?? null,
];

export function unpackRecord(p: PackedRecord): ConnectionRecord {
  const [
    startedAt,
    requestId,
    protocol,
    sourceIp,
    username,
    accountId,
    target,
    reason,
    bytesUp,
    bytesDown,
    durationMs,
    exit,
    exitMovedFrom,
    datagramsUp,
    datagramsDown,
  ] = p;
  const r: ConnectionRecord = {
    startedAt,
    requestId,
    protocol,
    sourceIp,
    username,
    accountId,
    target,
    reason,
    bytesUp,
    bytesDown,
    durationMs,
  };
  if (exit !== null || exitMovedFrom !== null) Object.assign(r, { exit, exitMovedFrom });
  if (datagramsUp !== null && datagramsUp !== undefined)
    Object.assign(r, { datagramsUp, datagramsDown: datagramsDown ?? 0 });
  return r;
}

type WriteAsk =
  | { type: typeof WRITE; id: number; kind: 'connection-log'; entries: PackedRecord[] }
  | {
      type: typeof WRITE;
      id: number;
      kind: 'usage';
      node: string;
      flushId: string;
      atMs: number;
      deltas: UsageDelta[];
      domains?: { atMs: number; deltas: UsageDelta[] };
    };
type Outcome = 'ok' | 'duplicate' | 'busy';
type WriteAnswer = { type: typeof WRITTEN; id: number; outcome: Outcome | 'unavailable' };

/** The writer side in the primary: takes the workers' batches and writes them. */
export interface PrimaryWriter {
  stop(): Promise<void>;
}

/**
 * The primary's writer: connection-log records go into one buffered writer (batched across workers, pruned
 * here); a worker's usage flush is written as it comes, with its own id (so one sent twice counts once).
 */
export function startPrimaryWriter(
  store: Store,
  cfg: Pick<
    ServeConfig,
    'nodeName' | 'connectionLogRetentionMs' | 'usageRetentionMs' | 'connectionLogSink' | 'connectionLogMaxSize'
  >,
  log: DaemonLog,
): PrimaryWriter {
  // Only a database log is written here (JSON lines are each worker's own appends).
  const connLog =
    cfg.connectionLogRetentionMs > 0 && cfg.connectionLogSink.kind === 'db'
      ? new ConnectionLogWriter(store.connectionLog, cfg.nodeName, {
          retentionMs: cfg.connectionLogRetentionMs,
          maxSizeBytes: cfg.connectionLogMaxSize,
          maxBuffered: connectionLogBuffer(),
          log,
        })
      : null;
  connLog?.start();
  // Its own flushes are empty: it is here for retention, which one process runs for all.
  const meter = new UsageMeter(store.usage, () => [], { retentionMs: cfg.usageRetentionMs, log });
  meter.start();
  const answer = (w: Worker, id: number, outcome: WriteAnswer['outcome']) => {
    if (w.isConnected()) w.send({ type: WRITTEN, id, outcome } satisfies WriteAnswer);
  };
  const onMessage = (w: Worker, m: WriteAsk) => {
    if (m?.type !== WRITE) return;
    if (m.kind === 'connection-log') {
      // Full here: the worker keeps them (and counts what its own buffer cannot hold).
      if (!connLog || !connLog.accepts(m.entries.length)) return answer(w, m.id, 'busy');
      for (const p of m.entries) connLog.record(unpackRecord(p));
      return answer(w, m.id, 'ok');
    }
    store.usage.addFlush(m.node, m.flushId, m.atMs, m.deltas, m.domains).then(
      (outcome) => answer(w, m.id, outcome),
      () => answer(w, m.id, 'unavailable'),
    );
  };
  cluster.on('message', onMessage);
  return {
    async stop() {
      cluster.off('message', onMessage);
      await connLog?.stop();
      await meter.stop();
    },
  };
}

/** A worker's way to the primary's writer: each call is one message and its answer. */
class AskPrimaryWriter {
  private nextId = 0;
  private readonly waiting = new Map<number, (o: WriteAnswer['outcome']) => void>();

  constructor() {
    process.on('message', (m: WriteAnswer) => {
      if (m?.type === WRITTEN) this.waiting.get(m.id)?.(m.outcome);
    });
  }

  async ask(
    m:
      | Omit<Extract<WriteAsk, { kind: 'connection-log' }>, 'id' | 'type'>
      | Omit<Extract<WriteAsk, { kind: 'usage' }>, 'id' | 'type'>,
  ): Promise<Outcome> {
    const id = this.nextId++;
    const outcome = await new Promise<WriteAnswer['outcome'] | null>((resolve) => {
      const timer = setTimeout(() => resolve(null), ANSWER_TIMEOUT_MS);
      this.waiting.set(id, (o) => {
        clearTimeout(timer);
        resolve(o);
      });
      if (!process.send?.({ ...m, type: WRITE, id } as WriteAsk)) {
        clearTimeout(timer);
        resolve(null);
      }
    });
    this.waiting.delete(id);
    // No answer, or the database away: kept by the caller and sent again, as with a database that is down.
    if (outcome === null) throw new StoreUnavailableError('the primary did not answer a write');
    if (outcome === 'unavailable') throw new StoreUnavailableError('the primary could not write');
    return outcome;
  }
}

/** What a worker's connection-log writer and usage meter write to: the primary, which writes for all. */
export function primaryWriterSinks(): {
  connectionLog: Pick<ConnectionLogStore, 'insert' | 'prune'>;
  usage: Pick<UsageStore, 'addFlush' | 'prune'>;
} {
  const primary = new AskPrimaryWriter();
  return {
    connectionLog: {
      insert: async (_node, entries) =>
        (await primary.ask({ kind: 'connection-log', entries: (entries as ConnectionRecord[]).map(packRecord) })) ===
        'ok'
          ? 'ok'
          : 'busy',
      prune: async () => 0, // the primary runs retention
    },
    usage: {
      addFlush: (node, flushId, atMs, deltas, domains) =>
        primary.ask({
          kind: 'usage',
          node,
          flushId,
          atMs,
          deltas: [...deltas],
          ...(domains ? { domains: { atMs: domains.atMs, deltas: [...domains.deltas] } } : {}),
        }),
      prune: async () => 0,
    },
  };
}
