// A flood of wrong proxy passwords from many sources must not slow other customers (docs/decisions.md#d-024,
// "What a wrong password may cost"). Before: 48 wrong passwords a second queued every hostname lookup
// behind scrypt on libuv's pool (a good client's set-up to a hostname p50 1 ms → 269 ms). Now failures draw
// on per-source and per-username budgets and one hashing lane, and names resolve through c-ares, so a good
// client's set-up to a hostname target under the flood stays near its quiet figure.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, makeAccount, startDaemon, type Daemon } from '../helpers/daemon.js';
import { tcpEcho } from '../helpers/net.js';
import { loadFactor, patient } from '../helpers/patience.js';

let d: Daemon;
let echo: net.Server;
let good: string;
const SOURCES = 48;

/** One CONNECT to `localhost:<echo>` (a name, resolved by the gateway) from `localAddress`: ms to the status line and the status. */
function connectOnce(auth: string, localAddress = '127.0.0.1'): Promise<{ ms: number; status: number }> {
  const [host, port] = d.httpProxy.split(':');
  const target = `localhost:${(echo.address() as net.AddressInfo).port}`;
  return new Promise((resolve) => {
    const t0 = performance.now();
    const s = net.connect({ port: Number(port), host: host!, localAddress });
    let head = '';
    const done = (status: number) => {
      s.destroy();
      resolve({ ms: performance.now() - t0, status });
    };
    s.setTimeout(10_000, () => done(0));
    s.on('error', () => done(0));
    s.on('connect', () =>
      s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\nProxy-Authorization: Basic ${auth}\r\n\r\n`),
    );
    s.on('data', (b) => {
      head += b.toString('latin1');
      if (head.includes('\r\n')) done(Number(head.split(' ')[1]));
    });
  });
}

const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)]!;

async function sample(n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const r = await connectOnce(good);
    expect(r.status).toBe(200);
    out.push(r.ms);
  }
  return out;
}

describe('a wrong-password flood', () => {
  beforeAll(async () => {
    d = await startDaemon({ args: ['--allow-private-targets'] });
    await makeAccount(d.dataDir, 'flood@example.com');
    const pu = await admin(d.dataDir, [
      'proxy-user',
      'create',
      '--email',
      'flood@example.com',
      '--username',
      'gooduser',
    ]);
    await admin(d.dataDir, ['proxy-user', 'create', '--email', 'flood@example.com', '--username', 'victim']);
    good = Buffer.from(`gooduser:${pu.json.password}`).toString('base64');
    echo = await tcpEcho();
    for (let i = 0; i < 100 && (await connectOnce(good)).status !== 200; i++)
      await new Promise((r) => setTimeout(r, 50));
  }, patient(60_000));

  afterAll(async () => {
    await d?.stop();
    await new Promise((r) => echo?.close(r));
  });

  it(
    "from many sources leaves a good client's set-up to a hostname within twice its quiet figure",
    async () => {
      const quiet = await sample(150);
      let flooding = true;
      let attempts = 0;
      const refused: number[] = [];
      // 48 sources (127.0.0.2 … 127.0.0.49), each sending a CONNECT with a wrong password every 100 ms, for an
      // existing user and for unknown ones: ~480 attempts a second, ten times the rate that used to slow every
      // customer 260-fold. (bench/auth-flood.mjs drives thousands a second; here the flood's clients share two
      // cores with the gateway, so a faster flood would measure the machine, not the gateway.)
      const flood = Array.from({ length: SOURCES }, async (_, i) => {
        const bad = Buffer.from(`${i % 2 ? 'victim' : `nouser${i}`}:wrong password ${i}`).toString('base64');
        while (flooding) {
          const r = await connectOnce(bad, `127.0.0.${i + 2}`);
          attempts++;
          refused.push(r.status);
          await new Promise((res) => setTimeout(res, Math.max(0, 100 - r.ms)));
        }
      });
      await new Promise((r) => setTimeout(r, 500));
      const t0 = Date.now();
      const a0 = attempts;
      const flooded = await sample(150);
      const rate = ((attempts - a0) / (Date.now() - t0)) * 1000;
      flooding = false;
      await Promise.all(flood);
      const figures = {
        quiet: { p50: pct(quiet, 50), p99: pct(quiet, 99) },
        flooded: { p50: pct(flooded, 50), p99: pct(flooded, 99) },
        attemptsPerSec: Math.round(rate),
      };
      if (process.env.PROXYD_TEST_PRINT) console.log(JSON.stringify(figures));
      // The budget refused some attempts without a hash, and /metrics says how many.
      const metrics = await (await fetch(`${d.api}/metrics`)).text();
      expect(Number(/^proxyd_gateway_login_checks_skipped_total (\d+)/m.exec(metrics)?.[1] ?? 0)).toBeGreaterThan(0);
      // Every wrong attempt got the uniform 407, never a 5xx or a hang.
      expect(
        refused.every((s) => s === 407),
        JSON.stringify([...new Set(refused)]),
      ).toBe(true);
      // Twice the quiet figure, with a floor for a two-core machine where the flood's own clients share the CPU
      // (before the change the flooded p50 was ~270 ms). The p99 of 150 samples is the second-worst one: two
      // scheduler stalls of a test machine running the whole suite reach 25–72 ms (seen: 25.7 in CI, 72 with the
      // other suites' daemons busy), so its floor is 150 ms, still well under what the regression looked like.
      // The floors grow with the machine's load (patience.ts), as the quiet figure itself does.
      expect(figures.flooded.p50, JSON.stringify(figures)).toBeLessThan(Math.max(2 * figures.quiet.p50, patient(5)));
      expect(figures.flooded.p99, JSON.stringify(figures)).toBeLessThan(Math.max(2 * figures.quiet.p99, patient(150)));
      // The flood was real: several times the 40–50/s of the report on an idle machine; a loaded one slows the
      // flood's own clients (112/s seen at load 12 on two cores), so the floor shrinks with the load.
      expect(figures.attemptsPerSec, JSON.stringify(figures)).toBeGreaterThan(120 / loadFactor());
    },
    patient(120_000),
  );
});
