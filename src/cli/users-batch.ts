// `users create --file`: batches of 100 to /proxy/users/batch with the failed-items-only retry of section 5
// (docs/cli.md "Proxy users"). Each request is one logical write with its own Idempotency-Key; a whole-batch resend
// (timeout, cut connection, 5xx) reuses the key and the body, so the server answers it with its first answer when it
// had done it (the created passwords included); only items that failed retryably (10500) are resent, alone, as a new
// write. A 10409 on an item an earlier attempt may have created is "already done" (its password was not seen).
import { Code, RETRYABLE_ITEM_CODES } from '../contract/codes.js';
import { KEY_LIMITS, RATE_WINDOW_MS } from '../contract/paths.js';
import { ApiError, isAuthError, isRateLimited, isTransient, mayHaveApplied, type WhitelistApi } from './api.js';
import {
  CUSTOMER_PATHS,
  isStillInProgress,
  newIdempotencyKey,
  parseUserBatch,
  type Credential,
} from './customer-api.js';
import type { BatchProgress } from './batch.js';
import { Exit, type ExitCode } from './exit-codes.js';
import { RollingWindowPacer, type Clock } from './pacer.js';
import type { NewUser } from './user-input.js';

/** The key's write limit (docs/api.md, "Limits": 30 per rolling 60 s by default). */
export const KEY_WRITE_LIMIT = KEY_LIMITS.writes;
const WINDOW_MS = RATE_WINDOW_MS;
const CONFLICT = Code.CONFLICT;
const BATCH = 100;

export interface UserFailure {
  username: string;
  code: number;
  reason: string;
}

export interface UserBatchSummary {
  success_count: number;
  already_done: number;
  failed_count: number;
  failed_items: UserFailure[];
  /** Every password the server made or took, shown once. */
  created: Credential[];
}

export interface UserBatchResult {
  summary: UserBatchSummary;
  exitCode: ExitCode;
  /** Why the run stopped early (the rest is in failed_items). */
  stop?: string;
  requests: number;
}

interface ItemState {
  user: NewUser;
  /** A request that may have created it went before (its 10409 then is our own doing). */
  maybeDone: boolean;
  retries: number;
}

interface Unit {
  items: ItemState[];
  /** The Idempotency-Key of this exact body: kept on a resend of the same request. */
  key: string;
  rateLimited: number;
}

export interface UserBatchOptions {
  api: Pick<WhitelistApi, 'request'>;
  users: NewUser[];
  clock: Clock;
  retry: number;
  batchSize?: number;
  writeLimit?: number;
  backoffMs?: (n: number) => number;
  onProgress?: (p: BatchProgress) => void;
  signal?: AbortSignal;
}

const defaultBackoff = (n: number) => Math.min(30_000, 1000 * 2 ** Math.max(0, n - 1));

export async function runUserBatches(opts: UserBatchOptions): Promise<UserBatchResult> {
  const { api, clock, retry } = opts;
  const size = Math.min(opts.batchSize ?? BATCH, BATCH);
  const pacer = new RollingWindowPacer(opts.writeLimit ?? KEY_WRITE_LIMIT, WINDOW_MS, clock);
  const backoff = opts.backoffMs ?? defaultBackoff;
  const summary: UserBatchSummary = {
    success_count: 0,
    already_done: 0,
    failed_count: 0,
    failed_items: [],
    created: [],
  };
  const total = opts.users.length;
  let requests = 0;
  const queue: Unit[] = [];
  for (let i = 0; i < total; i += size) {
    queue.push({
      items: opts.users.slice(i, i + size).map((user) => ({ user, maybeDone: false, retries: 0 })),
      key: newIdempotencyKey(),
      rateLimited: 0,
    });
  }
  const settled = () => summary.success_count + summary.already_done + summary.failed_count;
  type Waiting = NonNullable<BatchProgress['waiting']>;
  const limit = `${opts.writeLimit ?? KEY_WRITE_LIMIT} writes/min`;
  const progress = (waiting?: Omit<Waiting, 'limit'>) =>
    opts.onProgress?.({
      total,
      settled: settled(),
      succeeded: summary.success_count,
      alreadyDone: summary.already_done,
      failed: summary.failed_count,
      ...(waiting ? { waiting: { ...waiting, limit } } : {}),
    });
  const fail = (f: UserFailure) => {
    summary.failed_items.push(f);
    summary.failed_count++;
  };
  const wait = async (ms: number, reason: Waiting['reason']) => {
    if (ms <= 0) return;
    progress({ reason, ms });
    await clock.sleep(ms, opts.signal);
  };
  const stopWith = (
    exitCode: ExitCode,
    message: string,
    code: number,
    current: Unit,
    maybeDone = false,
  ): UserBatchResult => {
    for (const s of current.items)
      fail({
        username: s.user.username,
        code,
        reason: `${maybeDone || s.maybeDone ? 'outcome unknown' : 'not processed'}: ${message}`,
      });
    for (const u of queue)
      for (const s of u.items) fail({ username: s.user.username, code, reason: `not processed: ${message}` });
    queue.length = 0;
    progress();
    return { summary, exitCode, stop: message, requests };
  };

  progress();
  while (queue.length > 0) {
    const unit = queue.shift()!;
    await pacer.acquire((ms) => progress({ reason: 'rate-limit', ms }), opts.signal);
    if (opts.signal?.aborted) return stopWith(Exit.INTERRUPTED, 'interrupted (Ctrl-C)', 0, unit);
    let data: ReturnType<typeof parseUserBatch>;
    try {
      requests++;
      const env = await api.request('POST', CUSTOMER_PATHS.usersBatch, {
        body: { items: unit.items.map((s) => s.user) },
        idempotencyKey: unit.key,
      });
      pacer.record();
      data = parseUserBatch(env.data);
    } catch (err) {
      pacer.record();
      if (isAuthError(err))
        return stopWith(Exit.AUTH, `the API rejected the API key: ${err.describe()}`, Code.INVALID_API_KEY, unit);
      if (err instanceof ApiError && err.httpStatus === 403)
        return stopWith(Exit.AUTH, err.describe(), err.code ?? 10403, unit);
      if (isRateLimited(err)) {
        if (unit.rateLimited >= retry)
          return stopWith(
            Exit.RATE_LIMITED,
            `rate limited and out of retries: ${err.describe()}`,
            Code.RATE_LIMITED,
            unit,
          );
        unit.rateLimited++;
        await wait(err.retryAfterMs ?? Math.max(1000, pacer.delayMs()), 'retry-after');
        queue.unshift(unit);
        continue;
      }
      // A timeout, a cut connection, a 5xx, or our earlier send of this very request still running on the server.
      if (isTransient(err) || isStillInProgress(err)) {
        const worst = Math.max(...unit.items.map((s) => s.retries));
        const applied = isStillInProgress(err) || mayHaveApplied(err);
        if (worst >= retry)
          return stopWith(
            Exit.ERROR,
            `${err.describe()}; gave up after ${retry} ${retry === 1 ? 'retry' : 'retries'}`,
            err.code ?? 0,
            unit,
            applied,
          );
        for (const s of unit.items) {
          s.maybeDone ||= applied;
          s.retries++;
        }
        await wait(backoff(worst + 1), 'backoff');
        // The same body under the same key: an exact resend.
        queue.unshift(unit);
        continue;
      }
      const msg = err instanceof ApiError ? err.describe() : String((err as Error)?.message ?? err);
      return stopWith(
        Exit.ERROR,
        msg,
        err instanceof ApiError ? (err.code ?? 0) : 0,
        unit,
        err instanceof ApiError && mayHaveApplied(err),
      );
    }
    summary.created.push(...data.created);
    const byName = new Map(unit.items.map((s) => [s.user.username, s] as const));
    const again: ItemState[] = [];
    let failedHere = 0;
    for (const f of data.failed_items) {
      const s = f.username === null ? undefined : byName.get(f.username);
      if (s) byName.delete(s.user.username);
      // One of ours either way (a null username: an item the server could not name).
      failedHere++;
      if (s && RETRYABLE_ITEM_CODES.has(f.code) && s.retries < retry) {
        s.retries++;
        s.maybeDone = true;
        again.push(s);
      } else if (s && s.maybeDone && f.code === CONFLICT) {
        summary.already_done++;
      } else fail({ username: f.username ?? '(no username)', code: f.code, reason: f.reason });
    }
    summary.success_count += Math.max(0, unit.items.length - failedHere);
    progress();
    if (again.length > 0) {
      await wait(backoff(Math.max(...again.map((s) => s.retries))), 'backoff');
      // A new body: a new logical write, a new key.
      queue.unshift({ items: again, key: newIdempotencyKey(), rateLimited: 0 });
    }
  }
  return { summary, exitCode: summary.failed_count > 0 ? Exit.ITEMS_FAILED : Exit.OK, requests };
}
