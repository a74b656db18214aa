// Shared knobs of the hostile suites: FUZZ_RUNS (default short) scales every property-based run;
// FUZZ_SEED replays a failure.
import fc from 'fast-check';

/** Runs per property: short by default, e.g. FUZZ_RUNS=100000 for a long run. */
export const RUNS = Math.max(1, Number(process.env.FUZZ_RUNS ?? 300) || 300);
/** Scale for the end-to-end request counts: 1 by default, at most 10 (each junk connection may wait seconds). */
export const E2E_SCALE = Math.min(10, Math.max(1, Math.floor(RUNS / 300)));

export function params(extra: fc.Parameters<unknown> = {}): fc.Parameters<unknown> {
  const seed = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : undefined;
  return { numRuns: RUNS, ...(seed !== undefined ? { seed } : {}), ...extra } as fc.Parameters<unknown>;
}

/** Long runs get a generous test timeout. */
export const FUZZ_TIMEOUT = 30_000 + RUNS * 5;

/** Arbitrary bytes biased towards protocol-ish content. */
export const bytes = (maxLength = 300): fc.Arbitrary<Buffer> =>
  fc
    .oneof(
      fc.uint8Array({ maxLength }),
      fc.string({ maxLength, unit: 'binary' }).map((s) => new TextEncoder().encode(s)),
      fc
        .array(fc.constantFrom(0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x0a, 0x0d, 0x20, 0x3a, 0xff), { maxLength })
        .map((a) => Uint8Array.from(a)),
    )
    .map((u) => Buffer.from(u));

/** Cut a buffer into pieces at the given (sorted, deduplicated) offsets. */
export function prefixesAt(buf: Buffer, cuts: number[]): number[] {
  return [...new Set(cuts.map((c) => c % (buf.length + 1)))].sort((a, b) => a - b);
}
