// A full reload of the admission view, built on a thread of its own (docs/decisions.md#d-037, "Full reloads in a worker
// thread"): the snapshot's reads, the row objects and strings of up to a million users, their inserts into the
// tables and the young-generation collections all that garbage sets off happen here, at the lowest CPU priority,
// not between the gateway's connections. The tables go back to the view as their buffers, shared memory (nothing
// is copied, and the view's thread is not charged ~100 MiB of new external memory at once: byte-table.ts);
// accounts go as two typed arrays, target rules as rows (few), and the view builds those itself.
// Started by view.ts (`new Worker`) from dist/; it reads workerData and posts ReloadWorkerMessages.
import { parentPort, workerData } from 'node:worker_threads';
import { lowerThreadPriority, ownThreadId } from './thread-priority.js';
import type { ByteTableState } from './byte-table.js';
import type { AdmissionSnapshotRows, SnapshotSource, TargetRulesRow } from '../store/index.js';

export interface ReloadWorkerData {
  source: SnapshotSource;
  /** Entries and arena bytes to size each table for (those of the table it replaces: no rehash mid-build). */
  users: { expected: number; bytes: number };
  ips: { expected: number; bytes: number };
}

export type ReloadWorkerMessage =
  /** A page of users read: word from the database, so a long reload does not make the view look stale. */
  | { type: 'progress' }
  | {
      type: 'built';
      seq: number;
      gaps: AdmissionSnapshotRows['gaps'];
      users: ByteTableState;
      ips: ByteTableState;
      accountIds: Float64Array;
      /** 1: the account of the same index is active. */
      accountActive: Uint8Array;
      rules: TargetRulesRow[];
      /** The thread's nice value while it built (null: it could not be set). */
      nice: number | null;
    }
  | { type: 'failed'; error: string };

/** At most one progress message this often. */
const PROGRESS_MS = 500;

/** Our modules, loaded only once the thread runs at the lowest priority: loading them is CPU too. */
const loadModules = () =>
  Promise.all([import('./byte-table.js'), import('./entries.js'), import('../store/reader.js')]);

async function build(port: NonNullable<typeof parentPort>, data: ReloadWorkerData): Promise<void> {
  // Nice 19 for this thread (the view lowered it as it started it, where it could): when the cores are contended
  // the gateway's thread and the host's other work run first, and the reload takes what is left.
  const nice = lowerThreadPriority(ownThreadId());
  const [{ ByteTable }, { putIp, putUser }, { openChangeLogReader }] = await loadModules();
  const users = new ByteTable(data.users.expected, data.users.bytes, { shared: true });
  let said = performance.now();
  // The reader's own connection, closed before the thread posts its tables and ends.
  const reader = await openChangeLogReader(data.source);
  let snap: AdmissionSnapshotRows;
  try {
    snap = await reader.changeLog.snapshot((rows) => {
      for (const r of rows) putUser(users, r);
      if (performance.now() - said >= PROGRESS_MS) {
        said = performance.now();
        port.postMessage({ type: 'progress' } satisfies ReloadWorkerMessage);
      }
    });
  } finally {
    await reader.close();
  }
  for (const r of snap.users) putUser(users, r);
  const ips = new ByteTable(data.ips.expected, data.ips.bytes, { shared: true });
  for (const r of snap.ips) putIp(ips, r);
  const accountIds = new Float64Array(snap.accounts.length);
  const accountActive = new Uint8Array(snap.accounts.length);
  snap.accounts.forEach((a, i) => {
    accountIds[i] = a.id;
    accountActive[i] = a.status === 'active' ? 1 : 0;
  });
  const u = users.exportState();
  const p = ips.exportState();
  const msg: ReloadWorkerMessage = {
    type: 'built',
    seq: snap.seq,
    gaps: snap.gaps,
    users: u.state,
    ips: p.state,
    accountIds,
    accountActive,
    rules: snap.rules,
    nice,
  };
  port.postMessage(msg, [...u.transfer, ...p.transfer, accountIds.buffer, accountActive.buffer]);
}

/** The view's warm-up at start-up (a first worker thread's one-time cost taken then): it loads and ends. */
async function warmUp(port: NonNullable<typeof parentPort>): Promise<void> {
  lowerThreadPriority(ownThreadId());
  await loadModules();
  port.postMessage({ type: 'progress' } satisfies ReloadWorkerMessage);
}

if (parentPort && (workerData as { warmUp?: boolean } | null)?.warmUp === true) {
  const port = parentPort;
  warmUp(port).catch(() => port.postMessage({ type: 'progress' } satisfies ReloadWorkerMessage));
} else if (parentPort) {
  const port = parentPort;
  build(port, workerData as ReloadWorkerData).catch((err: unknown) => {
    port.postMessage({
      type: 'failed',
      error: err instanceof Error ? err.message : String(err),
    } satisfies ReloadWorkerMessage);
  });
}
