import { describe, expect, it } from 'vitest';
import { RollingWindowPacer } from '../../src/cli/pacer.js';
import { FakeClock } from './helpers/fakes.js';

describe('RollingWindowPacer', () => {
  it('lets `limit` requests go at once and holds the next until the oldest is a window old', async () => {
    const clock = new FakeClock();
    const p = new RollingWindowPacer(3, 60_000, clock, 0);
    const start = clock.now();
    const sent: number[] = [];
    for (let i = 0; i < 7; i++) {
      await p.acquire();
      sent.push(clock.now() - start);
      clock.t += 1000; // each request takes a second
      p.record();
    }
    expect(sent).toEqual([0, 1000, 2000, 61_000, 62_000, 63_000, 122_000]);
  });

  it('never has more than `limit` completions inside any window', async () => {
    const clock = new FakeClock();
    const p = new RollingWindowPacer(10, 60_000, clock);
    const stamps: number[] = [];
    for (let i = 0; i < 35; i++) {
      await p.acquire();
      clock.t += Math.floor(Math.random() * 3000);
      p.record();
      stamps.push(clock.now());
    }
    for (let i = 10; i < stamps.length; i++) expect(stamps[i]! - stamps[i - 10]!).toBeGreaterThan(60_000);
  });

  it('a wait ends at once when its signal is aborted (Ctrl-C during pacing)', async () => {
    // A clock whose sleeps last until aborted: only the signal can end the wait.
    const clock = {
      now: () => 0,
      sleep: (_ms: number, signal?: AbortSignal) =>
        new Promise<void>((resolve) => signal?.addEventListener('abort', () => resolve(), { once: true })),
    };
    const p = new RollingWindowPacer(1, 60_000, clock, 0);
    p.record();
    const stop = new AbortController();
    const waited = p.acquire(undefined, stop.signal);
    stop.abort();
    await expect(waited).resolves.toBeUndefined();
  });
});
