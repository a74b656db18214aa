// A token bucket's refill, once (src/rules/token-bucket.ts): the gateway's rate budgets and the daemon's failed-login
// budgets both refill by it.
import { describe, expect, it } from 'vitest';
import { FailureBudget } from '../../src/daemon/admission/failure-budget.js';
import { RateBucket } from '../../src/gateway/relay/rate-budget.js';
import { refilled } from '../../src/rules/token-bucket.js';

describe('refilled', () => {
  it('adds the rate for the time passed, up to the capacity', () => {
    expect(refilled(0, 500, 10, 100)).toBe(5);
    expect(refilled(-20, 1000, 10, 100)).toBe(-10); // a bucket taken past empty refills from below zero
    expect(refilled(95, 1000, 10, 100)).toBe(100);
    expect(refilled(3, 0, 10, 100)).toBe(3);
  });
  it('time running backwards adds and takes nothing; an infinite rate fills', () => {
    expect(refilled(3, -5000, 10, 100)).toBe(3);
    expect(refilled(3, Number.NaN, 10, 100)).toBe(3);
    expect(refilled(3, 1, Infinity, Infinity)).toBe(Infinity);
    expect(refilled(3, 0, Infinity, Infinity)).toBe(3);
  });
});

describe('both buckets refill by it', () => {
  it('a rate bucket: 1,000 B/s gives 250 bytes in 250 ms, never past one second of rate', () => {
    let now = 0;
    const b = new RateBucket(1000, null, () => now);
    b.take(1000);
    expect(b.available()).toBe(0);
    now += 250;
    expect(b.available()).toBe(refilled(0, 250, 1000, 1000));
    now += 10_000;
    expect(b.available()).toBe(1000);
  });

  it('a failure budget: a wall clock stepped back costs no token (it used to take them)', async () => {
    let now = 1_000_000;
    let checks = 0;
    const counted = async () => (checks++, false);
    const b = new FailureBudget({
      perSource: { burst: 2, perSec: 1 },
      perUser: { burst: 100, perSec: 100 },
      perNode: { burst: 100, perSec: 100 },
      nowMs: () => now,
    });
    await b.run('198.51.100.1', 'u1', counted); // 1 token left
    now -= 60_000; // the clock steps back a minute
    await b.run('198.51.100.1', 'u2', counted); // still had its token
    expect(checks).toBe(2);
    now += 1000;
    await b.run('198.51.100.1', 'u3', counted);
    expect(checks).toBe(3);
  });
});
