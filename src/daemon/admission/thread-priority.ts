// Nice 19 for one thread of this process (the admission view's reload worker): on Linux nice is per thread, so the
// gateway's thread keeps its priority while the reload takes only what is left of the cores. Elsewhere (no /proc,
// not Linux) every call answers null and changes nothing.
import { readdirSync, readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';

const LOWEST = 19;

/** The calling thread's id: /proc/thread-self is `PID/task/TID` for the thread that reads it. */
export function ownThreadId(): number | null {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    return Number.isSafeInteger(tid) && tid > 0 ? tid : null;
  } catch {
    return null;
  }
}

/** The ids of this process's threads now. */
export function threadIds(): Set<number> | null {
  try {
    return new Set(readdirSync('/proc/self/task').map(Number));
  } catch {
    return null;
  }
}

/** Nice 19 for the thread; its nice value after, or null when that failed. */
export function lowerThreadPriority(tid: number | null): number | null {
  if (tid === null) return null;
  try {
    setPriority(tid, LOWEST);
    return getPriority(tid);
  } catch {
    return null;
  }
}

/**
 * Runs `start`, which starts one thread (a `new Worker`: its thread exists when the constructor returns), and
 * lowers that thread's priority at once, so the worker's own start (an isolate, Node's bootstrap, the modules)
 * already runs at nice 19. Only when exactly one thread appeared meanwhile; the worker lowers itself again anyway.
 */
export function startLowered<T>(start: () => T): T {
  const before = threadIds();
  const started = start();
  const after = before && threadIds();
  const fresh = after ? [...after].filter((t) => !before!.has(t)) : [];
  if (fresh.length === 1) lowerThreadPriority(fresh[0]!);
  return started;
}
