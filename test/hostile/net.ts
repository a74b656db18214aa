// Raw-socket and /proc helpers for the hostile end-to-end suites (loopback only).
import { readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { recordBody } from '../helpers/daemon.js';
import { sleep } from '../helpers/wait.js';

export function hostPort(s: string): { host: string; port: number } {
  const i = s.lastIndexOf(':');
  return { host: s.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(s.slice(i + 1)) };
}

/** Open file descriptors and resident memory (KiB) of a process. */
export function procStats(pid: number): { fds: number; rssKiB: number } {
  const fds = readdirSync(`/proc/${pid}/fd`).length;
  const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return { fds, rssKiB: m ? Number(m[1]) : NaN };
}

export interface Exchange {
  data: Buffer;
  /** The server closed (or reset) the connection before we gave up. */
  closedByServer: boolean;
  ms: number;
}

/**
 * Connect, write `payload` (all at once, or the given pieces with pauses), collect what comes back
 * until the server closes or `waitMs` passes; then close our side.
 */
export function exchange(
  target: string,
  payload: Buffer | Buffer[],
  opts: { waitMs: number; pauseMs?: number; end?: boolean; localAddress?: string },
): Promise<Exchange> {
  const { host, port } = hostPort(target);
  return new Promise((resolve) => {
    const t0 = Date.now();
    const chunks: Buffer[] = [];
    const socket = net.connect({ host, port, ...(opts.localAddress ? { localAddress: opts.localAddress } : {}) });
    let done = false;
    const finish = (closedByServer: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ data: Buffer.concat(chunks), closedByServer, ms: Date.now() - t0 });
    };
    const timer = setTimeout(() => finish(false), opts.waitMs);
    socket.on('data', (d) => chunks.push(d));
    socket.on('error', () => finish(true));
    socket.on('close', () => finish(true));
    socket.on('end', () => finish(true));
    socket.on('connect', async () => {
      const pieces = Array.isArray(payload) ? payload : [payload];
      for (const p of pieces) {
        if (done || socket.destroyed) return;
        if (p.length) socket.write(p);
        if (opts.pauseMs) await sleep(opts.pauseMs);
      }
      if (opts.end && !socket.destroyed) socket.end();
    });
  });
}

/** Reads until the end of an HTTP response head; resolves with the status and the open socket. */
export function connectTunnel(
  proxy: string,
  target: string,
  auth?: { username: string; password: string },
  timeoutMs = 5000,
): Promise<{ status: number; socket: net.Socket; head: string }> {
  const { host, port } = hostPort(proxy);
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port });
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`CONNECT ${target} via ${proxy}: no answer in ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    socket.on('connect', () => {
      const a = auth
        ? `Proxy-Authorization: Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}\r\n`
        : '';
      socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${a}\r\n`);
    });
    const onData = (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      clearTimeout(timer);
      socket.removeListener('data', onData);
      const head = buf.subarray(0, end).toString('latin1');
      const rest = buf.subarray(end + 4);
      if (rest.length) socket.unshift(rest);
      resolve({ status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0), socket, head });
    };
    socket.on('data', onData);
    socket.on('close', () => {
      clearTimeout(timer);
      if (!buf.includes('\r\n\r\n'))
        reject(new Error(`CONNECT ${target}: closed without an answer (${buf.toString('latin1').slice(0, 80)})`));
    });
  });
}

/** Write `msg` into an open tunnel and wait for it to come back (echo target). */
export function echoRoundTrip(socket: net.Socket, msg: string, timeoutMs = 2000): Promise<void> {
  return new Promise((resolve, reject) => {
    let got = '';
    const timer = setTimeout(() => reject(new Error(`echo timeout, got ${JSON.stringify(got)}`)), timeoutMs);
    const onData = (d: Buffer) => {
      got += d.toString('latin1');
      if (got.includes(msg)) {
        clearTimeout(timer);
        socket.removeListener('data', onData);
        resolve();
      }
    };
    socket.on('data', onData);
    socket.write(msg);
  });
}

export interface HttpAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** One HTTP request over the given agent; never rejects on an HTTP status. */
export function httpRequest(
  base: string,
  r: { method: string; url: string; headers?: Record<string, string>; body?: Buffer | undefined },
  agent?: http.Agent,
): Promise<HttpAnswer> {
  const u = new URL(base);
  // Node's client sends a DELETE/OPTIONS body with neither Content-Length nor chunked framing
  // (so the server would read it as the next request): always frame it.
  const headers = { ...r.headers, ...(r.body !== undefined ? { 'content-length': String(r.body.length) } : {}) };
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: Number(u.port),
        method: r.method,
        path: r.url,
        headers,
        agent: agent ?? false,
        timeout: 10_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (d: Buffer) => chunks.push(d));
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          // API answers join the suite-wide secret scan; console pages may rightly show a token once.
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: r.url.startsWith('/console') ? body : recordBody(body),
          });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`timeout ${r.method} ${r.url.slice(0, 60)}`)));
    req.on('error', reject);
    req.end(r.body);
  });
}

/** Run `fn` over `items` with at most `n` in flight. */
export async function pool<T, R>(items: T[], n: number, fn: (x: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i] as T, i);
      }
    }),
  );
  return out;
}
