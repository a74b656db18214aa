// Shared by the fleet e2e files: one CONNECT through a node's HTTP gateway, and the propagation figures
// (time until a check holds, percentiles, one JSON log line). The echo target is test/helpers/net.ts's.
import net from 'node:net';
import { patient } from '../helpers/patience.js';

/** One CONNECT through the gateway, as `source` (PROXY v1 header) or with credentials: the reply's status code (0: none). */
export function probe(
  gateway: string,
  target: string,
  as: { source: string } | { user: string; password: string },
): Promise<number> {
  const [host, port] = gateway.split(':') as [string, string];
  return new Promise((resolve) => {
    const s = net.connect(Number(port), host);
    let buf = '';
    const done = (code: number) => {
      s.destroy();
      resolve(code);
    };
    s.setTimeout(5000, () => done(0));
    s.on('error', () => done(0));
    s.on('connect', () => {
      const head = 'source' in as ? `PROXY TCP4 ${as.source} 127.0.0.1 40000 ${port}\r\n` : '';
      const auth =
        'user' in as
          ? `Proxy-Authorization: Basic ${Buffer.from(`${as.user}:${as.password}`).toString('base64')}\r\n`
          : '';
      s.write(`${head}CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${auth}\r\n`);
    });
    s.on('data', (d) => {
      buf += d.toString('latin1');
      const m = /^HTTP\/1\.1 (\d{3})/.exec(buf);
      if (m) done(Number(m[1]));
    });
    s.on('close', () => done(0));
  });
}

/** Milliseconds from `t0` until `check` holds (polled back to back), or Infinity after `limitMs`. */
export async function until(t0: number, check: () => Promise<boolean>, limitMs = 5000): Promise<number> {
  const limit = patient(limitMs);
  while (performance.now() - t0 < limit) if (await check()) return performance.now() - t0;
  return Infinity;
}

export function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
}

/** Logs the propagation figures as one JSON line. */
export function report(what: string, ms: number[], extra: Record<string, string> = {}): void {
  const line = {
    event: 'fleet_propagation',
    ...extra,
    what,
    changes: ms.length,
    p50_ms: +percentile(ms, 50).toFixed(1),
    p99_ms: +percentile(ms, 99).toFixed(1),
    max_ms: +Math.max(...ms).toFixed(1),
  };
  console.log(JSON.stringify(line));
}
