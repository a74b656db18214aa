// Runs one stage under its own timeout and measures it with the injected clock.
import type { CheckContext, StageName, StageOutcome, StageResult, FailureCause } from './types.js';

export type StageFn = (ctx: CheckContext, signal: AbortSignal) => Promise<StageOutcome>;

interface TimedOutcome {
  result: StageResult;
  cause: FailureCause | null;
}

export function round(ms: number): number {
  return Math.round(ms * 10) / 10;
}

export async function runStage(
  name: StageName,
  fn: StageFn,
  ctx: CheckContext,
  timeoutMs: number,
): Promise<TimedOutcome> {
  const ac = new AbortController();
  const start = ctx.deps.now();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<StageOutcome>((resolve) => {
    timer = setTimeout(() => {
      ac.abort();
      resolve({
        ok: false,
        detail: `no answer within ${timeoutMs} ms (stage timeout)`,
        cause: { kind: 'timeout', ms: timeoutMs },
      });
    }, timeoutMs);
  });
  let outcome: StageOutcome;
  try {
    outcome = await Promise.race([fn(ctx, ac.signal), timeout]);
  } catch (err) {
    outcome = {
      ok: false,
      detail: `unexpected error: ${(err as Error).message}`,
      cause: { kind: 'protocol', message: (err as Error).message },
    };
  } finally {
    clearTimeout(timer);
  }
  if (!outcome.ok) ac.abort();
  const ms = round(ctx.deps.now() - start);
  return outcome.ok
    ? { result: { name, status: 'ok', ms, detail: outcome.detail }, cause: null }
    : { result: { name, status: 'fail', ms, detail: outcome.detail }, cause: outcome.cause };
}

export const ok = (detail: string): StageOutcome => ({ ok: true, detail });
export const fail = (detail: string, cause: FailureCause): StageOutcome => ({ ok: false, detail, cause });

/** Human text for socket error codes. */
export function describeNetError(err: NodeJS.ErrnoException): string {
  switch (err.code) {
    case 'ECONNREFUSED':
      return 'connection refused (nothing listens on that port)';
    case 'ECONNRESET':
      return 'connection reset by peer';
    case 'EHOSTUNREACH':
      return 'host unreachable (no route)';
    case 'ENETUNREACH':
      return 'network unreachable';
    case 'ETIMEDOUT':
      return 'connection timed out';
    case 'EADDRNOTAVAIL':
      return 'address not available';
    case 'EPIPE':
      return 'connection closed while sending';
    default:
      return err.code ? `${err.code}: ${err.message}` : err.message;
  }
}
