// The batch engine of `whitelist add|delete` (docs/cli.md Whitelist, retry rules):
// batches of 100, paced to the per-token limit; after a 10431 only failed items with a retryable
// code are resent, alone; 429 replays the same batch after Retry-After; 500/503/network errors
// replay the same batch up to --retry times; a 10425 (add) / 10426 (delete) on an item an earlier attempt may
// have applied is "already done"; 401 stops at once.
import {
  Code,
  MAX_BATCH_ITEMS,
  RATE_LIMITS,
  RATE_WINDOW_MS,
  RETRYABLE_ITEM_CODES,
  type FailedItem,
} from '../contract/index.js';
import {
  ApiError,
  isAuthError,
  isRateLimited,
  isTransient,
  mayHaveApplied,
  type BatchResponse,
  type WhitelistApi,
} from './api.js';
import { Exit, type ExitCode } from './exit-codes.js';
import { RollingWindowPacer, type Clock } from './pacer.js';

export type BatchOp = 'add' | 'delete';

export interface BatchItem {
  ip: string;
  remark?: string;
}

export interface BatchSummary {
  success_count: number;
  already_done: number;
  failed_count: number;
  failed_items: FailedItem[];
}

export interface BatchProgress {
  total: number;
  /** Items with a final outcome so far (succeeded, already done or failed). */
  settled: number;
  succeeded: number;
  alreadyDone: number;
  failed: number;
  /** Set while waiting: what for, and for how long. */
  waiting?: {
    reason: 'rate-limit' | 'retry-after' | 'backoff';
    ms: number;
    /** The client-side limit, in words (default the whitelist's 10 requests/min). */ limit?: string;
  };
}

interface BatchStop {
  exitCode: ExitCode;
  message: string;
}

export interface BatchRunResult {
  summary: BatchSummary;
  /** Why the run ended early (items not processed are in failed_items); absent when every item was tried. */
  stop?: BatchStop;
  exitCode: ExitCode;
  /** Requests sent, replays included. */
  requests: number;
}

interface BatchEngineOptions {
  op: BatchOp;
  items: BatchItem[];
  api: Pick<WhitelistApi, 'add' | 'delete'>;
  clock: Clock;
  /** Resends allowed per item (whole-batch replays and failed-item resends alike), and 429 replays per batch. */
  retry: number;
  batchSize?: number;
  rateLimit?: number;
  windowMs?: number;
  /** Delay before resend number `n` (1-based). */
  backoffMs?: (n: number) => number;
  onProgress?: (p: BatchProgress) => void;
  /** 10425 (add) / 10426 (delete) is "already done" on a first send too (sync: the goal is a state, not an action). */
  doneIsDone?: boolean;
  /** Aborted (Ctrl-C): no new request goes; a request in flight is answered first, the rest is reported not processed. */
  signal?: AbortSignal;
}

/** 1 s, 2 s, 4 s … capped at 30 s. */
function defaultBackoffMs(n: number): number {
  return Math.min(30_000, 1000 * 2 ** Math.max(0, n - 1));
}

interface ItemState {
  item: BatchItem;
  /**
   * Sent before in a request that may have applied it (so 10425/10426 may be our own doing): a 500, a timeout or a
   * connection cut after the request went, or a per-item retryable failure; not a 503/10503 or a refused connection.
   */
  resent: boolean;
  retries: number;
}

interface Unit {
  items: ItemState[];
  rateLimitedReplays: number;
}

export async function runBatches(opts: BatchEngineOptions): Promise<BatchRunResult> {
  const { op, api, clock, retry } = opts;
  const size = Math.min(opts.batchSize ?? MAX_BATCH_ITEMS, MAX_BATCH_ITEMS);
  const pacer = new RollingWindowPacer(opts.rateLimit ?? RATE_LIMITS[op], opts.windowMs ?? RATE_WINDOW_MS, clock);
  const backoff = opts.backoffMs ?? defaultBackoffMs;
  const doneCode = op === 'add' ? Code.ALREADY_LISTED : Code.NO_SUCH_WHITELIST;

  const summary: BatchSummary = { success_count: 0, already_done: 0, failed_count: 0, failed_items: [] };
  const total = opts.items.length;
  let requests = 0;
  const queue: Unit[] = [];
  for (let i = 0; i < opts.items.length; i += size) {
    queue.push({
      items: opts.items.slice(i, i + size).map((item) => ({ item, resent: false, retries: 0 })),
      rateLimitedReplays: 0,
    });
  }

  const progress = (waiting?: BatchProgress['waiting']) => {
    opts.onProgress?.({
      total,
      settled: summary.success_count + summary.already_done + summary.failed_count,
      succeeded: summary.success_count,
      alreadyDone: summary.already_done,
      failed: summary.failed_count,
      ...(waiting ? { waiting } : {}),
    });
  };
  const fail = (f: FailedItem) => {
    summary.failed_items.push(f);
    summary.failed_count++;
  };
  const wait = async (ms: number, reason: NonNullable<BatchProgress['waiting']>['reason']) => {
    if (ms <= 0) return;
    progress({ reason, ms });
    await clock.sleep(ms, opts.signal);
  };
  /**
   * Ends the run: everything queued is reported as not processed, and so is the current unit, except its items that
   * a request may have applied (`outcome unknown`): this last one (`lastMayBeDone`) or an earlier one.
   */
  const stopWith = (
    exitCode: ExitCode,
    message: string,
    code: number,
    current: Unit,
    lastMayBeDone = false,
  ): BatchRunResult => {
    const reason = `not processed: ${message}`;
    const unknown = `outcome unknown: ${message}`;
    for (const s of current.items) fail({ ip: s.item.ip, code, reason: lastMayBeDone || s.resent ? unknown : reason });
    for (const u of queue) for (const s of u.items) fail({ ip: s.item.ip, code, reason });
    queue.length = 0;
    progress();
    return { summary, stop: { exitCode, message }, exitCode, requests };
  };

  progress();
  while (queue.length > 0) {
    const unit = queue.shift()!;
    await pacer.acquire((ms) => progress({ reason: 'rate-limit', ms }), opts.signal);
    if (opts.signal?.aborted) return stopWith(Exit.INTERRUPTED, 'interrupted (Ctrl-C)', 0, unit);
    let res: BatchResponse;
    try {
      requests++;
      res =
        op === 'add'
          ? await api.add(unit.items.map((s) => s.item))
          : await api.delete(unit.items.map((s) => s.item.ip));
      pacer.record();
    } catch (err) {
      pacer.record();
      if (isAuthError(err))
        return stopWith(Exit.AUTH, `the API rejected the token: ${err.describe()}`, Code.INVALID_API_KEY, unit);
      if (isRateLimited(err)) {
        // Nothing of the batch was processed: the same batch goes again, unmarked.
        if (unit.rateLimitedReplays >= retry)
          return stopWith(
            Exit.RATE_LIMITED,
            `rate limited and out of retries: ${err.describe()}`,
            Code.RATE_LIMITED,
            unit,
          );
        unit.rateLimitedReplays++;
        const ms = err.retryAfterMs ?? Math.max(1000, pacer.delayMs());
        await wait(ms, 'retry-after');
        queue.unshift(unit);
        continue;
      }
      if (isTransient(err)) {
        const worst = Math.max(...unit.items.map((s) => s.retries));
        const code = err.code ?? 0;
        const applied = mayHaveApplied(err);
        if (worst >= retry)
          return stopWith(
            Exit.ERROR,
            `${err.describe()}; gave up after ${retry} ${retry === 1 ? 'retry' : 'retries'}`,
            code,
            unit,
            applied,
          );
        // The server may have processed some of it (unless it said it ran nothing): marked, so that the replay's
        // 10425/10426 reads as done.
        for (const s of unit.items) {
          s.resent ||= applied;
          s.retries++;
        }
        await wait(backoff(worst + 1), 'backoff');
        queue.unshift(unit);
        continue;
      }
      const msg = err instanceof ApiError ? err.describe() : String(err);
      // A success whose body could not be read applied the batch, or part of it.
      return stopWith(
        Exit.ERROR,
        msg,
        err instanceof ApiError ? (err.code ?? 0) : 0,
        unit,
        err instanceof ApiError && mayHaveApplied(err),
      );
    }

    if (res.code === Code.OK) {
      summary.success_count += unit.items.length;
      progress();
      continue;
    }
    // 10431: items absent from failed_items succeeded.
    const byIp = new Map(unit.items.map((s) => [s.item.ip, s] as const));
    const again: ItemState[] = [];
    let failedHere = 0;
    for (const f of res.data.failed_items) {
      const s = byIp.get(f.ip);
      if (s) {
        byIp.delete(f.ip);
        failedHere++;
      }
      if (s && RETRYABLE_ITEM_CODES.has(f.code) && s.retries < retry) {
        s.retries++;
        s.resent = true;
        again.push(s);
      } else if (s && (s.resent || opts.doneIsDone === true) && f.code === doneCode) {
        summary.already_done++;
      } else {
        fail({ ip: f.ip, code: f.code, reason: f.reason });
      }
    }
    summary.success_count += unit.items.length - failedHere;
    progress();
    if (again.length > 0) {
      // Only the failed items, alone, after a backoff.
      await wait(backoff(Math.max(...again.map((s) => s.retries))), 'backoff');
      queue.unshift({ items: again, rateLimitedReplays: 0 });
    }
  }
  return { summary, exitCode: summary.failed_count > 0 ? Exit.ITEMS_FAILED : Exit.OK, requests };
}
