// A lean open-loop HTTP/1.1 load generator for loopback benches: GETs written as prepared bytes on
// keep-alive sockets, replies framed by Content-Length, nothing else per request. undici's per-request
// work competes with the daemon on a two-core machine and puts its own scheduling tail into the figures
// (docs/benchmarks/api.md, API); this keeps the generator's share small so the tail measured is the server's.
// Latency is counted from when a request was due (no coordinated omission).
import net from 'node:net';

/** A request with no reply in this long counts as an error, and its connection is replaced. */
const REPLY_TIMEOUT_MS = 10_000;
/** A lost connection is reopened after this long (again and again while the server refuses). */
const REOPEN_DELAY_MS = 50;

/**
 * Sends `total` GETs at `rate` per second to host:port, the i-th for path `pathFor(i)`, and resolves with
 * { fromDue, fromSend, errors, elapsedMs, startMonoMs }: latencies in ms, unsorted (fromDue: from when the
 * request was due, or from its send when that was earlier). A reply that is not a 200 whose body starts
 * with `expectPrefix`, a reply without Content-Length, a connection lost mid-request, a reply later than
 * 10 s, and a request due while no connection is open count as errors. `headersFor(i)`, when given, adds header
 * lines (each ending in CRLF) to the i-th request (an `Authorization: Bearer` key); `expectStatus` (default 200) is
 * the status a reply must have.
 * `trace`, an array, gets [ms since start when due, latency] per reply.
 */
export async function openLoop({
  host,
  port,
  rate,
  total,
  pathFor,
  headersFor,
  expectPrefix,
  expectStatus = 200,
  connections = 32,
  trace,
}) {
  if (total <= 0)
    return { fromDue: [], fromSend: [], errors: 0, elapsedMs: 0, startMonoMs: Number(process.hrtime.bigint()) / 1e6 };
  const idle = [];
  const backlog = [];
  let live = 0;
  let stopped = false;
  const fromDue = [];
  const fromSend = [];
  let errors = 0;
  let done = 0;
  let start = 0;
  let finish;
  const finished = new Promise((r) => (finish = r));

  function settle(job, ok) {
    const now = performance.now();
    if (ok) {
      const latency = now - Math.min(job.due, job.sent);
      fromDue.push(latency);
      fromSend.push(now - job.sent);
      if (trace) trace.push([+(job.due - start).toFixed(1), +latency.toFixed(2)]);
    } else errors++;
    if (++done === total) finish();
  }

  function release(conn) {
    const next = backlog.shift();
    if (next) send(conn, next);
    else idle.push(conn);
  }

  function send(conn, job) {
    job.sent = performance.now();
    conn.current = job;
    conn.timer = setTimeout(() => conn.socket.destroy(), REPLY_TIMEOUT_MS);
    conn.socket.write(job.bytes);
  }

  function onData(conn, chunk) {
    conn.buf = conn.buf.length ? Buffer.concat([conn.buf, chunk]) : chunk;
    if (!conn.current) return;
    const headEnd = conn.buf.indexOf('\r\n\r\n');
    if (headEnd < 0) return;
    const head = conn.buf.toString('latin1', 0, headEnd);
    const m = /\r\ncontent-length:\s*(\d+)/i.exec(head);
    if (!m) {
      conn.socket.destroy(); // no framing this client reads (chunked): the request fails with its connection
      return;
    }
    const len = Number(m[1]);
    if (conn.buf.length < headEnd + 4 + len) return;
    const body = conn.buf.toString('utf8', headEnd + 4, headEnd + 4 + len);
    conn.buf = conn.buf.subarray(headEnd + 4 + len);
    const job = conn.current;
    conn.current = null;
    clearTimeout(conn.timer);
    settle(job, head.startsWith(`HTTP/1.1 ${expectStatus}`) && body.startsWith(expectPrefix));
    if (/\r\nconnection:\s*close/i.test(head)) conn.socket.destroy();
    else release(conn);
  }

  /** With no connection open, what waits can never be sent: it fails. */
  function failBacklog() {
    if (live > 0) return;
    for (const job of backlog.splice(0)) settle(job, false);
  }

  /**
   * Opens a connection, resolving null if it cannot. A lost one (server idle timeout, reset) fails its request
   * and is reopened after a short delay until the run ends.
   */
  function open() {
    return new Promise((resolve) => {
      const socket = net.connect({ host, port, noDelay: true });
      const conn = { socket, buf: Buffer.alloc(0), current: null, timer: null, connected: false };
      socket.on('connect', () => {
        if (stopped) return socket.destroy();
        conn.connected = true;
        live++;
        resolve(conn);
      });
      socket.on('data', (c) => onData(conn, c));
      socket.on('error', () => {});
      socket.on('close', () => {
        clearTimeout(conn.timer);
        if (conn.connected) live--;
        const at = idle.indexOf(conn);
        if (at >= 0) idle.splice(at, 1);
        if (conn.current) settle(conn.current, false);
        conn.current = null;
        failBacklog();
        if (!stopped && start > 0) {
          setTimeout(() => {
            if (!stopped) open().then((c) => c && release(c));
          }, REOPEN_DELAY_MS);
        }
        resolve(null);
      });
    });
  }

  const conns = (await Promise.all(Array.from({ length: connections }, open))).filter(Boolean);
  if (conns.length === 0) {
    stopped = true;
    throw new Error(`cannot connect to ${host}:${port}`);
  }
  idle.push(...conns);
  start = performance.now();
  let i = 0;
  const tick = () => {
    const now = performance.now();
    // Everything due within the timer's 1 ms resolution goes out, in order: one sent early counts from its
    // send, one sent late (a late timer) from when it was due.
    while (i < total && start + (i * 1000) / rate <= now + 1) {
      const job = {
        due: start + (i * 1000) / rate,
        sent: 0,
        bytes: Buffer.from(
          `GET ${pathFor(i)} HTTP/1.1\r\nHost: ${host}:${port}\r\n${headersFor ? headersFor(i) : ''}\r\n`,
          'latin1',
        ),
      };
      i++;
      // Oldest idle connection first: every connection stays in use, none sits out the server's keep-alive timeout.
      const conn = idle.shift();
      if (conn) send(conn, job);
      else if (live > 0) backlog.push(job);
      else settle(job, false);
    }
    if (i < total) setTimeout(tick, Math.max(0, start + (i * 1000) / rate - performance.now() - 1));
  };
  tick();
  await finished;
  const elapsedMs = performance.now() - start;
  // CLOCK_MONOTONIC of the start, to line a trace up with other recorders (perf record -k CLOCK_MONOTONIC).
  const startMonoMs = Number(process.hrtime.bigint()) / 1e6 - (performance.now() - start);
  stopped = true; // no replacements after the end
  for (const c of [...idle]) c.socket.destroy();
  return { fromDue, fromSend, errors, elapsedMs, startMonoMs };
}
