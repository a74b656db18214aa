// Waiting in tests: a plain pause, and polling until a condition holds. Deadlines are what a thing takes on an idle
// machine, scaled by the load (patience.ts): the suite runs on loaded machines too.
import { patient } from './patience.js';

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Polls `fn` every 50 ms until it returns something truthy (returned), or fails after `timeoutMs` (on an idle
 * machine; scaled by the load) naming `what`.
 */
export async function waitFor<T>(
  what: string,
  fn: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = patient(timeoutMs);
  const until = Date.now() + deadline;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what} (${deadline} ms)`);
    await sleep(50);
  }
}

/**
 * Polls `probe` until it gives `expected`, or `timeoutMs` runs out; the last value either way. For a change
 * that reaches the gateway through a node's admission view: the contract allows up to 1 s (docs/gateway.md),
 * so a test asks again until then (with room for a loaded machine) rather than racing the view.
 */
export async function settlesTo<T>(probe: () => Promise<T>, expected: T, timeoutMs = 3_000): Promise<T> {
  const until = Date.now() + patient(timeoutMs);
  for (;;) {
    const v = await probe();
    if (v === expected || Date.now() > until) return v;
    await sleep(50);
  }
}
