// The pump under a rate budget, in process: tunnels sharing one user's buckets, each way counted where the bytes
// arrive (the target for upload, the client for download: the target's own count of what it sent runs ahead by
// the kernel's socket buffers, megabytes on loopback); the rate holds each way, a changed rate applies to open
// tunnels, a lifted one frees them.
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ByteBudget } from '../../../src/gateway/relay/byte-budget.js';
import { RateBucket, type RateBudget } from '../../../src/gateway/relay/rate-budget.js';
import type { PlanLimits } from '../../../src/gateway/types.js';
import { sleep } from '../../helpers/wait.js';
import { basic, startTestGateway, type TestGateway } from '../helpers.js';
import { patient } from '../../helpers/patience.js';

class Limits implements PlanLimits {
  rate: RateBudget | null = null;
  refusal(): null {
    return null;
  }
  pending(): null {
    return null;
  }
  slotFree(): boolean {
    return true;
  }
  async moreSlots(): Promise<void> {}
  budgetFor(): ByteBudget | null {
    return null;
  }
  rateFor(): RateBudget | null {
    return this.rate;
  }
}

const CHUNK = Buffer.alloc(64 * 1024, 0x62);

describe('a rate bucket', () => {
  it("holds at most one second of rate, refills at the rate, and the account's (parent) bucket holds too", () => {
    let now = 0;
    const account = new RateBucket(1_000, null, () => now);
    const user = new RateBucket(4_000, account, () => now);
    expect(user.available()).toBe(1_000); // the lower wins
    user.take(1_000);
    expect(user.available()).toBe(0);
    now += 500;
    expect(user.available()).toBe(500);
    now += 10_000; // a quiet spell: the burst stays one second of rate
    expect(account.available()).toBe(1_000);
    account.setRate(Infinity);
    expect(user.available()).toBe(4_000); // its own burst: one second of its rate
    user.setRate(2_000);
    expect(user.available()).toBe(2_000);
  });

  it('parks on whichever bucket is short and wakes its readers once it refilled', () => {
    vi.useFakeTimers(); // the buckets' clock (performance.now) and their timer
    try {
      const account = new RateBucket(100_000);
      const user = new RateBucket(1_000_000, account);
      account.take(account.available());
      let woke = false;
      user.park(() => (woke = true));
      expect(account.parked).toBe(1);
      expect(user.parked).toBe(0);
      vi.advanceTimersByTime(19);
      expect(woke).toBe(false);
      vi.advanceTimersByTime(1); // a quantum of 100 kB/s is 2 kB: 20 ms
      expect(woke).toBe(true);
      expect(account.parked).toBe(0);
      expect(account.available()).toBe(2_000);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('the pump under a rate budget', () => {
  let g: TestGateway;
  const limits = new Limits();
  let target: net.Server;
  let down = 0;
  let up = 0;

  beforeAll(async () => {
    // Sends as fast as it may and counts what it receives.
    target = net.createServer((s) => {
      s.on('error', () => {});
      s.on('data', (c: Buffer) => (up += c.length));
      const pump = (): void => {
        while (!s.destroyed) if (!s.write(CHUNK)) return void s.once('drain', pump);
      };
      pump();
    });
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', () => r()));
    g = await startTestGateway({ plans: limits });
  });
  afterAll(async () => {
    await g.gw.close(0);
    target.close();
  });

  async function tunnel(): Promise<net.Socket> {
    const s = net.connect(g.httpPort, '127.0.0.1');
    s.on('error', () => {});
    await new Promise<void>((resolve) => {
      s.once('connect', () =>
        s.write(
          `CONNECT 127.0.0.1:${(target.address() as net.AddressInfo).port} HTTP/1.1\r\nProxy-Authorization: ${basic('alice', 's3cret:pw')}\r\n\r\n`,
        ),
      );
      s.once('data', () => resolve());
    });
    s.on('data', (c: Buffer) => (down += c.length));
    const send = (): void => {
      while (!s.destroyed) if (!s.write(CHUNK)) return void s.once('drain', send);
    };
    send();
    return s;
  }

  async function rate(ms: number): Promise<{ down: number; up: number }> {
    const d0 = down;
    const u0 = up;
    const t0 = performance.now();
    await sleep(ms);
    const s = (performance.now() - t0) / 1000;
    return { down: (down - d0) / s, up: (up - u0) / s };
  }

  it(
    'holds the rate each way over 4 tunnels, applies a change to them, and a lifted rate frees them',
    async () => {
      const bucket = () => new RateBucket(500_000);
      limits.rate = { up: bucket(), down: bucket() };
      const tunnels = await Promise.all([tunnel(), tunnel(), tunnel(), tunnel()]);
      await sleep(1_200);
      const r1 = await rate(2_000);
      expect(r1.down / 500_000).toBeGreaterThan(0.9);
      expect(r1.down / 500_000).toBeLessThan(1.1);
      expect(r1.up / 500_000).toBeGreaterThan(0.9);
      expect(r1.up / 500_000).toBeLessThan(1.1);
      limits.rate.up.setRate(125_000);
      limits.rate.down.setRate(125_000);
      await sleep(300);
      const r2 = await rate(2_000);
      expect(r2.down / 125_000).toBeGreaterThan(0.85);
      expect(r2.down / 125_000).toBeLessThan(1.15);
      expect(r2.up / 125_000).toBeGreaterThan(0.85);
      expect(r2.up / 125_000).toBeLessThan(1.15);
      // Lifted: the gateway's rerate takes the rate off, the old buckets wake their parked readers.
      const old = limits.rate;
      limits.rate = null;
      g.gw.rerate(() => null);
      old.up.setRate(Infinity);
      old.down.setRate(Infinity);
      const r3 = await rate(500);
      for (const s of tunnels) s.destroy();
      expect(r3.down).toBeGreaterThan(20 * 125_000);
      expect(r3.up).toBeGreaterThan(20 * 125_000);
    },
    patient(20_000),
  );

  /** A GET through the gateway's HTTP proxy to `origin`: the bytes of its body and the seconds it took. */
  async function fetchThroughGateway(origin: http.Server): Promise<{ got: number; secs: number }> {
    const t0 = performance.now();
    const got = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port: g.httpPort,
          path: `http://127.0.0.1:${(origin.address() as net.AddressInfo).port}/`,
          headers: { 'Proxy-Authorization': basic('alice', 's3cret:pw') },
        },
        (res) => {
          let n = 0;
          res.on('data', (c: Buffer) => (n += c.length));
          res.on('end', () => resolve(n));
        },
      );
      req.on('error', reject);
      req.end();
    });
    return { got, secs: (performance.now() - t0) / 1000 };
  }

  it(
    'a forwarded (absolute-form) response passes at the rate too',
    async () => {
      const body = Buffer.alloc(1_500_000, 0x63);
      const origin = http.createServer((_req, res) => res.end(body));
      await new Promise<void>((r) => origin.listen(0, '127.0.0.1', () => r()));
      limits.rate = { up: new RateBucket(500_000), down: new RateBucket(500_000) };
      const { got, secs } = await fetchThroughGateway(origin);
      limits.rate = null;
      origin.close();
      expect(got).toBe(body.length);
      // One second of burst, then 500 kB/s: about 2 s for 1.5 MB (unlimited: milliseconds).
      expect(secs).toBeGreaterThan(1.6);
      expect(secs).toBeLessThan(3.5);
    },
    patient(20_000),
  );

  it(
    'a forwarded request sent while its rate is spent (other connections took it) still waits for it',
    async () => {
      const body = Buffer.alloc(1_000_000, 0x64);
      const origin = http.createServer((_req, res) => res.end(body));
      await new Promise<void>((r) => origin.listen(0, '127.0.0.1', () => r()));
      const down = new RateBucket(500_000);
      down.take(750_000); // the user's other connections have just used this second's rate, and more (a read passes whole)
      limits.rate = { up: new RateBucket(500_000), down };
      const { got, secs } = await fetchThroughGateway(origin);
      limits.rate = null;
      origin.close();
      expect(got).toBe(body.length);
      // Half a second in debt, then 1 MB at 500 kB/s: about 2.5 s (the response must not pass unlimited while the head waited).
      expect(secs).toBeGreaterThan(2.2);
      expect(secs).toBeLessThan(3.5);
    },
    patient(20_000),
  );
});
