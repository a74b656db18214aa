// Rate limits on a daemon, each way counted where the bytes arrive (upload at a target this test runs, download at
// its clients: what the target hands its socket runs ahead by the kernel's buffers, megabytes on loopback): 8 parallel tunnels of a user limited to 8 Mbit/s
// hold the rate within ±10 % over 10 s after the first second, downloading and uploading at once (each direction
// has its own budget); an unlimited user beside them keeps at least 0.8 of what it gets alone (paired runs, back
// to back); a changed limit applies to the open tunnels within 1 s, and lifting it frees them at once; the
// account's rate holds under a user's higher one.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, startDaemon, type Daemon } from '../helpers/daemon.js';
import { sleep } from '../helpers/wait.js';
import { patient } from '../helpers/patience.js';

const PASSWORD = 'rate-limit-password-1';
const EMAIL = 'rates@example.com';
const CHUNK = Buffer.alloc(64 * 1024, 0x61);

/**
 * The target: a tunnel's first line names its user; then it sends as fast as the tunnel takes (download) and
 * reads everything it is sent (upload), counting that per user; the clients count what they receive.
 */
class Target {
  readonly server: net.Server;
  /** Bytes the clients received, per user. */
  readonly sent = new Map<string, number>();
  readonly received = new Map<string, number>();

  constructor() {
    this.server = net.createServer((s) => {
      s.on('error', () => {});
      let who: string | null = null;
      let head = '';
      s.on('data', (d: Buffer) => {
        if (who !== null) return void this.received.set(who, (this.received.get(who) ?? 0) + d.length);
        head += d.toString('latin1');
        const nl = head.indexOf('\n');
        if (nl < 0) return;
        who = head.slice(0, nl);
        const pump = (): void => {
          while (!s.destroyed) if (!s.write(CHUNK)) return void s.once('drain', pump);
        };
        pump();
      });
    });
  }

  listen(): Promise<void> {
    return new Promise((r) => this.server.listen(0, '127.0.0.1', () => r()));
  }

  get addr(): string {
    return `127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
  }

  /** Bytes each way for `who` so far. */
  count(who: string): { down: number; up: number } {
    return { down: this.sent.get(who) ?? 0, up: this.received.get(who) ?? 0 };
  }
}

/** A CONNECT tunnel for `user` that downloads (discarding) and uploads as fast as it may. */
async function tunnel(d: Daemon, t: Target, user: string): Promise<net.Socket> {
  const target = t.addr;
  const [host, port] = d.httpProxy.split(':') as [string, string];
  const s = net.connect(Number(port), host);
  s.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    let buf = '';
    s.once('connect', () =>
      s.write(
        `CONNECT ${target} HTTP/1.1\r\nProxy-Authorization: Basic ${Buffer.from(`${user}:${PASSWORD}`).toString('base64')}\r\n\r\n`,
      ),
    );
    const onData = (c: Buffer): void => {
      buf += c.toString('latin1');
      if (!buf.includes('\r\n\r\n')) return;
      s.removeListener('data', onData);
      if (!buf.startsWith('HTTP/1.1 200')) reject(new Error(buf));
      else resolve();
    };
    s.on('data', onData);
  });
  s.on('data', (c: Buffer) => t.sent.set(user, (t.sent.get(user) ?? 0) + c.length));
  s.write(`${user}\n`);
  const upload = (): void => {
    while (!s.destroyed) if (!s.write(CHUNK)) return void s.once('drain', upload);
  };
  upload();
  return s;
}

/** Bytes per second each way for `who` over `ms`. */
async function rateOver(t: Target, who: string, ms: number): Promise<{ down: number; up: number }> {
  const a = t.count(who);
  const t0 = performance.now();
  await sleep(ms);
  const b = t.count(who);
  const s = (performance.now() - t0) / 1000;
  return { down: (b.down - a.down) / s, up: (b.up - a.up) / s };
}

describe('rate limits', () => {
  let d: Daemon;
  const target = new Target();

  beforeAll(async () => {
    await target.listen();
    d = await startDaemon({ args: ['--allow-private-targets'] });
    expect(
      (
        await admin(
          d.dataDir,
          ['account', 'create', '--email', EMAIL, '--password-stdin', '--verified'],
          'correct horse battery\n',
        )
      ).code,
    ).toBe(0);
    for (const u of ['limited', 'free']) {
      expect(
        (
          await admin(
            d.dataDir,
            ['proxy-user', 'create', '--email', EMAIL, '--username', u, '--password-stdin'],
            `${PASSWORD}\n`,
          )
        ).code,
      ).toBe(0);
    }
    const set = await admin(d.dataDir, [
      'proxy-user',
      'set',
      '--email',
      EMAIL,
      '--username',
      'limited',
      '--rate-limit',
      '8mbit',
    ]);
    expect(set.json, set.stderr).toEqual({
      username: 'limited',
      traffic_limit: null,
      max_connections: null,
      rate_limit: 8_000_000,
      expires_at: null,
      allow: [],
      deny: [],
    });
    await sleep(1_200); // the daemon reads the plan tables every 500 ms
  }, patient(30_000));

  afterAll(async () => {
    await d?.stop();
    target.server.close();
  });

  it(
    '8 tunnels hold 8 Mbit/s each way within ±10 % over 10 s, download and upload at once',
    async () => {
      const tunnels = await Promise.all(Array.from({ length: 8 }, () => tunnel(d, target, 'limited')));
      await sleep(1_000); // the first second may carry the bucket's one-second burst
      const t0 = performance.now();
      const a = target.count('limited');
      await sleep(10_000);
      const b = target.count('limited');
      const secs = (performance.now() - t0) / 1000;
      for (const s of tunnels) s.destroy();
      const want = 8_000_000 / 8; // bytes per second
      const down = (b.down - a.down) / secs;
      const up = (b.up - a.up) / secs;
      console.log(
        `limited: down ${(down / want).toFixed(3)}, up ${(up / want).toFixed(3)} of 8 Mbit/s over ${secs.toFixed(1)} s`,
      );
      expect(down / want).toBeGreaterThan(0.9);
      expect(down / want).toBeLessThan(1.1);
      expect(up / want).toBeGreaterThan(0.9);
      expect(up / want).toBeLessThan(1.1);
    },
    patient(60_000),
  );

  it(
    'an unlimited user beside 8 limited tunnels keeps at least 0.8 of its rate alone',
    async () => {
      // Pairs, alone then beside, back to back: the shared machine's load drifts more than the tunnels cost. Seven
      // pairs and their median: with five, one CI run beside the rest of the suite read 1.20, 0.85, 0.78, 0.49, 0.63
      // (median 0.78) where the same test alone reads 0.88-1.09 in every pair.
      const freeRate = async (): Promise<number> => {
        const s = await tunnel(d, target, 'free');
        await sleep(300);
        const r = await rateOver(target, 'free', 1_000);
        s.destroy();
        await sleep(150);
        return r.down + r.up;
      };
      const ratios: number[] = [];
      for (let i = 0; i < 7; i++) {
        const alone = await freeRate();
        const limited = await Promise.all(Array.from({ length: 8 }, () => tunnel(d, target, 'limited')));
        await sleep(500);
        const beside = await freeRate();
        for (const s of limited) s.destroy();
        ratios.push(beside / alone);
      }
      const median = [...ratios].sort((x, y) => x - y)[3]!;
      console.log(
        `unlimited beside 8 limited tunnels / alone: ${ratios.map((r) => r.toFixed(2)).join(', ')} (median ${median.toFixed(2)})`,
      );
      expect(median).toBeGreaterThanOrEqual(0.8);
    },
    patient(60_000),
  );

  it('refuses a rate it cannot read, naming the value; plan set takes one too', async () => {
    const bad = await admin(d.dataDir, [
      'proxy-user',
      'set',
      '--email',
      EMAIL,
      '--username',
      'free',
      '--rate-limit',
      '10mb',
    ]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('--rate-limit: expected a rate such as 10mbit');
    expect(bad.stderr).toContain('"10mb"');
    const plan = await admin(d.dataDir, ['plan', 'set', '--email', EMAIL, '--rate-limit', '1.5gbit']);
    expect(plan.json.rate_limit, plan.stderr).toBe(1_500_000_000);
    expect(
      (await admin(d.dataDir, ['plan', 'set', '--email', EMAIL, '--rate-limit', 'none'])).json.rate_limit,
    ).toBeNull();
  });

  it(
    'a change applies to open tunnels within 1 s; lifting the limit frees them at once',
    async () => {
      const tunnels = await Promise.all(Array.from({ length: 4 }, () => tunnel(d, target, 'limited')));
      await sleep(1_500);
      expect(
        (
          await admin(d.dataDir, [
            'proxy-user',
            'set',
            '--email',
            EMAIL,
            '--username',
            'limited',
            '--rate-limit',
            '2mbit',
          ])
        ).code,
      ).toBe(0);
      await sleep(1_000);
      const lowered = await rateOver(target, 'limited', 2_000);
      expect(lowered.down / 250_000).toBeGreaterThan(0.8);
      expect(lowered.down / 250_000).toBeLessThan(1.2);
      expect(lowered.up / 250_000).toBeLessThan(1.2);
      expect(
        (
          await admin(d.dataDir, [
            'proxy-user',
            'set',
            '--email',
            EMAIL,
            '--username',
            'limited',
            '--rate-limit',
            'none',
          ])
        ).code,
      ).toBe(0);
      await sleep(1_000);
      const lifted = await rateOver(target, 'limited', 1_000);
      for (const s of tunnels) s.destroy();
      expect(lifted.down).toBeGreaterThan(20 * 250_000);
      expect(lifted.up).toBeGreaterThan(20 * 250_000);
    },
    patient(60_000),
  );

  it(
    "where the user and the account both have a rate, the lower holds (the account's here)",
    async () => {
      expect(
        (
          await admin(d.dataDir, [
            'proxy-user',
            'set',
            '--email',
            EMAIL,
            '--username',
            'limited',
            '--rate-limit',
            '8mbit',
          ])
        ).code,
      ).toBe(0);
      expect((await admin(d.dataDir, ['plan', 'set', '--email', EMAIL, '--rate-limit', '4mbit'])).json.rate_limit).toBe(
        4_000_000,
      );
      await sleep(1_200);
      const tunnels = await Promise.all(Array.from({ length: 4 }, () => tunnel(d, target, 'limited')));
      await sleep(1_500);
      const r = await rateOver(target, 'limited', 3_000);
      for (const s of tunnels) s.destroy();
      expect((await admin(d.dataDir, ['plan', 'set', '--email', EMAIL, '--rate-limit', 'none'])).code).toBe(0);
      expect(r.down / 500_000).toBeGreaterThan(0.85);
      expect(r.down / 500_000).toBeLessThan(1.15);
      expect(r.up / 500_000).toBeGreaterThan(0.85);
      expect(r.up / 500_000).toBeLessThan(1.15);
    },
    patient(30_000),
  );
});
