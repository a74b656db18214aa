// Absolute-form requests (`GET http://host/path HTTP/1.1`): rewrite to origin-form, strip
// hop-by-hop headers and Proxy-Authorization, relay exactly the request body (Content-Length or
// chunked, passed through unchanged), then relay the response to its end: its framing's (no body,
// Content-Length, chunked), else the origin's close. One request per connection: both sides get
// `Connection: close`, and the exchange ends with the response even when the origin keeps its socket open.
import type net from 'node:net';
import { ByteQueue } from '../wire/byte-queue.js';
import { ChunkedScanner } from '../wire/chunked.js';
import { dialTarget, type ClientConn } from '../conn.js';
import {
  headerTokens,
  headerValues,
  parseAbsoluteHttpUrl,
  parseResponseHead,
  type Header,
  type RequestHead,
} from '../wire/http-head.js';
import { httpReply, type ProxyErrorType } from '../replies.js';

// `Trailer` is not among them (RFC 9110 6.6.2): the trailers it announces are relayed.
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'upgrade',
]);
/** The headers that frame a message: never removed on the way, whatever `Connection` names. */
const FRAMING = new Set(['content-length', 'transfer-encoding']);
const MAX_RESPONSE_HEAD = 64 * 1024;
/** RFC 9110 7.6.3: every hop names itself in `Via`, appended after any earlier hops' entries. */
const VIA_PSEUDONYM = 'proxyd';
const via = (version: string): string => `Via: ${version} ${VIA_PSEUDONYM}\r\n`;
const CLOSE_LINGER_MS = 5000;

type BodyFraming =
  { kind: 'none' } | { kind: 'length'; remaining: number } | { kind: 'chunked'; scanner: ChunkedScanner };
/** A response body may also run until the origin closes. */
type ResponseFraming = BodyFraming | { kind: 'close' };

/** How the request body is delimited, or why the request is refused (RFC 9112 6.3). */
export function requestFraming(head: RequestHead): BodyFraming | { error: string } {
  // A Connection option naming the framing would strip it on the way, and send the body unframed (smuggling).
  if (headerTokens(head.headers, 'connection').some((t) => FRAMING.has(t)))
    return { error: 'Connection names a framing header' };
  const te = headerTokens(head.headers, 'transfer-encoding');
  const cl = headerValues(head.headers, 'content-length');
  if (te.length > 0) {
    // Both headers, or chunked not last: classic request smuggling shapes. Refuse.
    if (cl.length > 0) return { error: 'both Transfer-Encoding and Content-Length' };
    if (te[te.length - 1] !== 'chunked' || head.version === '1.0') return { error: 'unsupported Transfer-Encoding' };
    return { kind: 'chunked', scanner: new ChunkedScanner() };
  }
  if (cl.length > 0) {
    const values = cl.flatMap((v) => v.split(',')).map((v) => v.trim());
    const first = values[0] as string;
    if (!/^[0-9]{1,15}$/.test(first) || values.some((v) => v !== first)) return { error: 'bad Content-Length' };
    const n = Number(first);
    return n === 0 ? { kind: 'none' } : { kind: 'length', remaining: n };
  }
  return { kind: 'none' };
}

/** How the response body is delimited (RFC 9112 6.3): none after HEAD, 204 or 304; chunked; Content-Length; else until close. */
export function responseFraming(status: number, headers: Header[], requestMethod: string): ResponseFraming {
  if (requestMethod === 'HEAD' || status === 204 || status === 304) return { kind: 'none' };
  const te = headerTokens(headers, 'transfer-encoding');
  if (te.length > 0)
    return te[te.length - 1] === 'chunked' ? { kind: 'chunked', scanner: new ChunkedScanner() } : { kind: 'close' };
  const cl = headerValues(headers, 'content-length');
  if (cl.length === 0) return { kind: 'close' };
  const values = cl.flatMap((v) => v.split(',')).map((v) => v.trim());
  const first = values[0] as string;
  // A length the client cannot trust either: relayed as it comes, to the origin's close.
  if (!/^[0-9]{1,15}$/.test(first) || values.some((v) => v !== first)) return { kind: 'close' };
  const n = Number(first);
  return n === 0 ? { kind: 'none' } : { kind: 'length', remaining: n };
}

function withoutHopByHop(headers: Header[]): Header[] {
  const named = new Set(headerTokens(headers, 'connection'));
  return headers.filter(([n]) => {
    const lower = n.toLowerCase();
    return FRAMING.has(lower) || (!HOP_BY_HOP.has(lower) && !named.has(lower));
  });
}

/** The request head as sent to the origin. */
export function originRequestHead(head: RequestHead, authority: string, path: string): Buffer {
  let out = `${head.method} ${path} HTTP/${head.version}\r\nHost: ${authority}\r\n`;
  for (const [n, v] of withoutHopByHop(head.headers)) {
    if (n.toLowerCase() === 'host') continue;
    out += `${n}: ${v}\r\n`;
  }
  out += via(head.version);
  out += 'Connection: close\r\n\r\n';
  return Buffer.from(out, 'latin1');
}

/** `headBytes`: the request head's size as the client sent it (what the meter counts for it, not the rewritten one). */
export function forwardRequest(conn: ClientConn, head: RequestHead, headBytes: number): void {
  const url = parseAbsoluteHttpUrl(head.target);
  if (!url) {
    conn.refuse('malformed', httpReply(400, 'http_request_error', urlProblem(head.target), conn.requestId));
    return;
  }
  const framing = requestFraming(head);
  if ('error' in framing) {
    conn.refuse('malformed', httpReply(400, 'http_request_error', framing.error, conn.requestId));
    return;
  }
  const originHead = originRequestHead(head, url.authority, url.path);
  void dialTarget(conn, url.host, url.port)
    .then((out) => {
      if (!out) return;
      if (!out.ok) {
        conn.failHttp(out.failure, out.detail);
        return;
      }
      const early = conn.handOff('forward');
      if (!early) return void out.socket.destroy();
      new ForwardExchange(conn, out.socket, framing, head.method).start(originHead, headBytes, early);
    })
    .catch(() => conn.destroy());
}

/** What is wrong with a request target that is not a usable absolute http:// URL (the 400's `details`). */
function urlProblem(target: string): string {
  const m = /^[Hh][Tt][Tt][Pp]:\/\/([^/?#]*)/.exec(target);
  if (!m)
    return /^https:\/\//i.test(target)
      ? 'https:// goes through CONNECT, not absolute-form'
      : 'an absolute http:// URL is required (use CONNECT for https)';
  const authority = m[1] as string;
  if (authority.includes('@')) return 'credentials in the URL are not accepted (send Proxy-Authorization)';
  if (authority === '') return 'the URL has no host';
  return "the URL's host or port is not valid";
}

class ForwardExchange {
  private readonly client: net.Socket;
  private bodyDone: boolean;
  private readonly responseHead = new ByteQueue();
  /** Bytes of the response head already looked through for its end (each chunk scans only what is new). */
  private headScanned = 0;
  private headDone = false;
  private sentToClient = false;
  /** The response body's framing, once its head has been read. */
  private response: ResponseFraming | null = null;
  /** The response was relayed to its end: the exchange is finishing. */
  private responseDone = false;
  /** Waiting for the byte budget's next grant. */
  private parked = false;

  constructor(
    private readonly conn: ClientConn,
    private readonly upstream: net.Socket,
    private readonly framing: BodyFraming,
    private readonly method: string,
  ) {
    this.client = conn.socket;
    this.bodyDone = framing.kind === 'none';
  }

  start(originHead: Buffer, headBytes: number, early: Buffer): void {
    const { client, upstream, conn } = this;
    // Metered as exchanged with the client: its head as it sent it, not as rewritten for the origin.
    this.toUpstream(originHead, headBytes);
    if (early.length > 0) this.onClientData(early);
    client.on('data', (c: Buffer) => this.onClientData(c));
    client.on('end', () => {
      // The client finished sending: fine once the body is complete (half-close), else truncated.
      if (!this.bodyDone) this.destroyBoth();
    });
    client.on('error', () => this.destroyBoth());
    client.on('drain', () => {
      if (!this.parked) upstream.resume();
    });
    upstream.on('drain', () => {
      if (!this.bodyDone && !this.parked) client.resume();
    });
    upstream.on('data', (c: Buffer) => this.onUpstreamData(c));
    upstream.on('end', () => this.onUpstreamEnd());
    upstream.on('error', () => this.onUpstreamFailure());
    upstream.on('close', () => {
      if (!client.writableEnded) this.onUpstreamFailure();
    });
    // The client's side closed: the exchange is over, whatever the origin still does.
    client.on('close', () => upstream.destroy());
    const idle = conn.core.limits.idleTimeoutMs;
    client.setTimeout(idle, () => this.onIdle());
    upstream.setTimeout(idle, () => this.onIdle());
    if (client.readableEnded && !this.bodyDone) return this.destroyBoth();
    // Gone before it was taken over (a target that reset right after the connect): its 'close' came and went.
    if (upstream.destroyed) return this.onUpstreamFailure();
    if (!this.bodyDone && !this.parked) client.resume();
    // A hop connection to an exit comes paused (its answer line was read off it): a 'data' listener alone
    // does not start a stream that was paused by hand, and the response would never be read. Parked (its request
    // found the rate or the traffic budget spent), it is resumed by the grant or refill instead.
    if (!this.parked) upstream.resume();
  }

  /** `counted`: what the meter counts for these bytes (the client's own head for the rewritten one). */
  private toUpstream(b: Buffer, counted = b.length): void {
    this.conn.bytesUp += counted;
    if (!this.upstream.write(b)) this.client.pause();
    if (this.conn.budget !== null || this.conn.rate !== null) this.spend(counted, 'up');
  }

  private toClient(b: Buffer): void {
    this.sentToClient = true;
    this.conn.bytesDown += b.length;
    if (!this.client.write(b)) this.upstream.pause();
    if (this.conn.budget !== null || this.conn.rate !== null) this.spend(b.length, 'down');
  }

  /** Whichever stops this exchange now: its traffic budget or a direction's rate with no room; null: neither. */
  private short(): { park(resume: () => void): void } | null {
    const { budget, rate } = this.conn;
    if (budget !== null && budget.available() <= 0) return budget;
    if (rate !== null) {
      if (rate.up.available() <= 0) return rate.up;
      if (rate.down.available() <= 0) return rate.down;
    }
    return null;
  }

  /**
   * Under a traffic limit (byte-budget.ts) or a rate limit (rate-budget.ts): a chunk already read goes on whole,
   * then both sides stop reading until the next grant or refill. So a forwarded exchange passes at most one read
   * (64 KiB) past its node's grant, or ahead of its rate.
   */
  private spend(n: number, direction: 'up' | 'down'): void {
    this.conn.budget?.take(n);
    this.conn.rate?.[direction].take(n);
    if (this.parked) return;
    const first = this.short();
    if (first === null) return;
    this.parked = true;
    this.client.pause();
    this.upstream.pause();
    const resume = (): void => {
      if (!this.parked || this.client.destroyed) return;
      // What it relays under now (the plan tables may have changed it, or lifted the limit).
      const still = this.short();
      if (still !== null) return still.park(resume);
      this.parked = false;
      this.upstream.resume();
      if (!this.bodyDone) this.client.resume();
    };
    first.park(resume);
  }

  private onClientData(chunk: Buffer): void {
    if (this.bodyDone) return; // bytes after the request (pipelining) are not forwarded
    const f = this.framing;
    let take: number;
    if (f.kind === 'length') {
      take = Math.min(f.remaining, chunk.length);
      f.remaining -= take;
      if (f.remaining === 0) this.bodyDone = true;
    } else if (f.kind === 'chunked') {
      const step = f.scanner.feed(chunk);
      if ('error' in step) {
        if (!this.sentToClient) this.replyAndClose(400, 'http_request_error', 'malformed chunked body');
        else this.destroyBoth();
        return;
      }
      take = step.consumed;
      if (step.done) this.bodyDone = true;
    } else take = 0;
    if (take > 0) this.toUpstream(take === chunk.length ? chunk : chunk.subarray(0, take));
    // Request complete: anything after it (pipelining) is not forwarded, so stop reading.
    if (this.bodyDone) this.client.pause();
  }

  private onUpstreamData(chunk: Buffer): void {
    if (this.headDone) {
      this.responseBody(chunk);
      return;
    }
    this.responseHead.append(chunk);
    for (;;) {
      const r = parseResponseHead(this.responseHead.view(), MAX_RESPONSE_HEAD, this.headScanned);
      if (r.kind === 'incomplete') {
        this.headScanned = this.responseHead.length;
        return;
      }
      this.headScanned = 0;
      if (r.kind === 'error') {
        this.replyAndClose(502, 'http_protocol_error', 'malformed response from the target');
        return;
      }
      const raw = this.responseHead.view().subarray(0, r.consumed);
      const status = r.value.status;
      if (status >= 100 && status < 200 && status !== 101) {
        // Interim response (100 Continue, 103 Early Hints): pass it through as is.
        this.toClient(Buffer.from(raw));
        this.responseHead.consume(r.consumed);
        continue;
      }
      if (status === 101) {
        // We never forward Upgrade, so a switch is a broken origin.
        this.replyAndClose(502, 'http_protocol_error', 'unexpected protocol switch from the target');
        return;
      }
      this.response = responseFraming(status, r.value.headers, this.method);
      // Chunked and a Content-Length: the length is not the framing, and goes (RFC 9112 6.3).
      const dropLength = this.response.kind === 'chunked' && headerValues(r.value.headers, 'content-length').length > 0;
      let out = `HTTP/${r.value.version} ${status} ${r.value.reason}\r\n`;
      for (const [n, v] of withoutHopByHop(r.value.headers))
        if (!dropLength || n.toLowerCase() !== 'content-length') out += `${n}: ${v}\r\n`;
      out += via(r.value.version);
      // RFC 9209: our member goes last (nearest the client), after any an upstream proxy added.
      out += `Proxy-Status: proxyd; received-status=${status}\r\nX-Request-Id: ${this.conn.requestId}\r\n`;
      out += 'Connection: close\r\n\r\n';
      this.responseHead.consume(r.consumed);
      const rest = Buffer.from(this.responseHead.takeAll());
      this.headDone = true;
      this.toClient(Buffer.from(out, 'latin1'));
      if (this.response.kind === 'none') this.finish();
      else if (rest.length > 0) this.responseBody(rest);
      return;
    }
  }

  /** Response body bytes: relayed up to the framing's end (anything after it is not), then the exchange ends. */
  private responseBody(chunk: Buffer): void {
    const f = this.response;
    if (this.responseDone || f === null) return;
    if (f.kind === 'close') return this.toClient(chunk);
    let take: number;
    let done: boolean;
    if (f.kind === 'length') {
      take = Math.min(f.remaining, chunk.length);
      f.remaining -= take;
      done = f.remaining === 0;
    } else if (f.kind === 'chunked') {
      const step = f.scanner.feed(chunk);
      // Framing this scanner does not take (an origin's sloppy chunk line): relayed as it comes, to the origin's
      // close, as every response was before its end was looked for; the client's parser judges it.
      if ('error' in step) {
        this.response = { kind: 'close' };
        return this.toClient(chunk);
      }
      take = step.consumed;
      done = step.done;
    } else return;
    if (take > 0) this.toClient(take === chunk.length ? chunk : chunk.subarray(0, take));
    if (done) this.finish();
  }

  private onUpstreamEnd(): void {
    if (!this.headDone) {
      this.replyAndClose(502, 'http_response_incomplete', 'the target closed without a complete response');
      return;
    }
    // The origin ended the response (we asked for Connection: close): ours ends too.
    this.finish();
  }

  /**
   * The response is complete (its framing's end, or the origin's close): end the client's side, and read on
   * (discarding) so the client's FIN closes the socket at once instead of after the linger. The origin's socket
   * goes at once: one that stays open after a complete response holds nothing of ours.
   */
  private finish(): void {
    if (this.responseDone) return;
    this.responseDone = true;
    this.bodyDone = true;
    this.client.removeAllListeners('data');
    this.client.on('data', () => {});
    this.client.resume();
    this.client.end();
    this.upstream.destroy();
    this.client.setTimeout(CLOSE_LINGER_MS, () => this.destroyBoth());
  }

  private onUpstreamFailure(): void {
    if (this.client.writableEnded || this.client.destroyed) return;
    if (!this.sentToClient) this.replyAndClose(502, 'connection_terminated', 'the target connection failed');
    else this.abort(); // mid-response: a reset tells the client the body is truncated
  }

  private onIdle(): void {
    if (!this.sentToClient && !this.client.writableEnded)
      this.replyAndClose(504, 'http_response_timeout', 'the target did not answer in time');
    else if (!this.responseDone) this.abort();
    else this.destroyBoth();
  }

  private replyAndClose(status: number, error: ProxyErrorType, detail: string): void {
    const reply = httpReply(status, error, detail, this.conn.requestId);
    this.upstream.destroy();
    if (this.sentToClient || this.client.writableEnded || this.client.destroyed) return this.destroyBoth();
    this.sentToClient = true;
    this.client.removeAllListeners('data');
    this.client.on('data', () => {});
    this.client.resume();
    this.client.end(reply);
    this.client.setTimeout(CLOSE_LINGER_MS, () => this.destroyBoth());
    this.client.on('end', () => this.destroyBoth());
  }

  private destroyBoth(): void {
    this.client.destroy();
    this.upstream.destroy();
  }

  /**
   * A response cut short: the client gets a reset, not a FIN, so a body that runs to the close (or a client that
   * does not check a length) is not taken for complete.
   */
  private abort(): void {
    if (!this.client.destroyed) this.client.resetAndDestroy();
    this.upstream.destroy();
  }
}
