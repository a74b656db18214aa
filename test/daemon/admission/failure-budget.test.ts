// The failure budget (src/daemon/admission/failure-budget.ts): what wrong proxy passwords may cost.
import { describe, expect, it } from 'vitest';
import { FailureBudget } from '../../../src/daemon/admission/failure-budget.js';

const fail = async () => false;
const pass = async () => true;

describe('the failure budget', () => {
  it('refuses a source past its burst without running the check; other sources are still checked', async () => {
    let now = 0;
    const b = new FailureBudget({
      perSource: { burst: 3, perSec: 1 },
      perUser: { burst: 100, perSec: 100 },
      perNode: { burst: 100, perSec: 0 },
      nowMs: () => now,
    });
    let checks = 0;
    const counted = async () => (checks++, false);
    for (let i = 0; i < 5; i++) await b.run('198.51.100.1', `u${i}`, counted);
    expect(checks).toBe(3);
    expect(b.refused).toBe(2);
    await b.run('198.51.100.2', 'u9', counted);
    expect(checks).toBe(4);
    now += 1000; // one token back per second
    await b.run('198.51.100.1', 'u1', counted);
    expect(checks).toBe(5);
  });

  it('limits failures against one username from many sources, known or not alike', async () => {
    const b = new FailureBudget({
      perSource: { burst: 100, perSec: 1 },
      perUser: { burst: 4, perSec: 0 },
      perNode: { burst: 100, perSec: 0 },
    });
    let checks = 0;
    for (let i = 0; i < 10; i++) await b.run(`203.0.113.${i}`, 'target', async () => (checks++, false));
    expect(checks).toBe(4);
    expect(await b.run('203.0.113.200', 'target', pass)).toBe('skipped'); // refused without a check
  });

  it('a good check costs nothing: a client that logs in keeps its budget', async () => {
    const b = new FailureBudget({ perSource: { burst: 2, perSec: 0 }, perUser: { burst: 2, perSec: 0 } });
    for (let i = 0; i < 10; i++) expect(await b.run('192.0.2.1', 'alice', pass)).toBe(true);
    await b.run('192.0.2.1', 'alice', fail);
    expect(await b.run('192.0.2.1', 'alice', pass)).toBe(true);
  });

  it('runs one check at a time and refuses past its queue', async () => {
    const b = new FailureBudget({
      concurrent: 1,
      queue: 2,
      perSource: { burst: 100, perSec: 0 },
      perUser: { burst: 100, perSec: 0 },
      perNode: { burst: 100, perSec: 0 },
    });
    let running = 0;
    let most = 0;
    const slow = async () => {
      most = Math.max(most, ++running);
      await new Promise((r) => setTimeout(r, 20));
      running--;
      return false;
    };
    const all = await Promise.all(Array.from({ length: 6 }, (_, i) => b.run(`192.0.2.${i}`, `u${i}`, slow)));
    expect(most).toBe(1);
    expect(all.filter((x) => x === false)).toHaveLength(3); // the three checked
    expect(all.filter((x) => x === 'skipped')).toHaveLength(3);
    expect(b.refused).toBe(3); // one running, two queued, three refused at once
  });

  it('keeps its tables bounded', async () => {
    const b = new FailureBudget({ maxKeys: 100, perNode: { burst: 2000, perSec: 0 } });
    for (let i = 0; i < 1000; i++) await b.run(`10.0.${i >> 8}.${i & 255}`, `user${i}`, fail);
    expect(b.trackedKeys).toBeLessThanOrEqual(200);
  });
});

describe('the node budget', () => {
  it('bounds failures a second on the node, however many sources and usernames', async () => {
    let now = 0;
    const b = new FailureBudget({ perNode: { burst: 5, perSec: 10 }, nowMs: () => now });
    let checks = 0;
    for (let i = 0; i < 50; i++) await b.run(`198.51.100.${i}`, `user${i}`, async () => (checks++, false));
    expect(checks).toBe(5);
    now += 500;
    for (let i = 50; i < 100; i++) await b.run(`198.51.100.${i}`, `user${i}`, async () => (checks++, false));
    expect(checks).toBe(10);
  });
});
