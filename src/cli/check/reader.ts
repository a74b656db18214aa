// Reads exact byte counts or delimited heads from a socket, for the hand-made handshakes.
import type { Socket } from 'node:net';

export class PeerClosedError extends Error {
  constructor(readonly code: string | undefined) {
    super(code ? `connection closed by the proxy (${code})` : 'connection closed by the proxy');
  }
}

export class SocketReader {
  private buf: Buffer = Buffer.alloc(0);
  private wake: (() => void) | null = null;
  private closed: PeerClosedError | null = null;
  private readonly onData = (chunk: Buffer): void => {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    this.notify();
  };
  private readonly onEnd = (): void => {
    this.closed ??= new PeerClosedError(undefined);
    this.notify();
  };
  private readonly onError = (err: NodeJS.ErrnoException): void => {
    this.closed ??= new PeerClosedError(err.code);
    this.notify();
  };

  constructor(
    private readonly socket: Socket,
    private readonly signal?: AbortSignal,
  ) {
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('close', this.onEnd);
    socket.on('error', this.onError);
    signal?.addEventListener('abort', () => this.notify(), { once: true });
    socket.resume(); // a previous reader's release() paused it
  }

  get buffered(): number {
    return this.buf.length;
  }

  private notify(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }

  private async waitMore(): Promise<void> {
    if (this.signal?.aborted) throw new Error('aborted');
    if (this.closed) throw this.closed;
    await new Promise<void>((resolve) => (this.wake = resolve));
    if (this.signal?.aborted) throw new Error('aborted');
  }

  /** Exactly n bytes. */
  async read(n: number): Promise<Buffer> {
    while (this.buf.length < n) {
      if (this.closed && this.buf.length < n) throw this.closed;
      await this.waitMore();
    }
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }

  /** Everything up to and including `delim`; fails past `max` bytes. */
  async readUntil(delim: string, max: number): Promise<Buffer> {
    for (;;) {
      const at = this.buf.indexOf(delim);
      if (at >= 0) return this.read(at + delim.length);
      if (this.buf.length > max) throw new Error(`header not ended within ${max} bytes (no ${JSON.stringify(delim)})`);
      if (this.closed) throw this.closed;
      await this.waitMore();
    }
  }

  /** Whatever is buffered now, plus what arrives within `waitMs` (up to `max` bytes). */
  async readSome(max: number, waitMs: number): Promise<Buffer> {
    if (this.buf.length < max && !this.closed) {
      const timer = setTimeout(() => this.notify(), waitMs);
      try {
        while (this.buf.length < max && !this.closed) {
          const before = this.buf.length;
          await this.waitMore().catch(() => undefined);
          if (this.buf.length === before) break; // timer or close
        }
      } finally {
        clearTimeout(timer);
      }
    }
    const out = this.buf.subarray(0, max);
    this.buf = this.buf.subarray(out.length);
    return out;
  }

  /** Stops reading and gives unread bytes back to the socket. */
  release(): void {
    this.socket.pause();
    this.socket.off('data', this.onData);
    this.socket.off('end', this.onEnd);
    this.socket.off('close', this.onEnd);
    this.socket.off('error', this.onError);
    if (this.buf.length) this.socket.unshift(this.buf);
    this.buf = Buffer.alloc(0);
  }
}

export interface ResponseHead {
  status: number;
  reason: string;
  headers: Map<string, string[]>;
}

/** Parses an HTTP/1.x response head; null when the bytes are not one. */
export function parseProxyReply(raw: string): ResponseHead | null {
  const lines = raw.split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})(?: (.*))?$/.exec(lines[0] ?? '');
  if (!m) return null;
  const headers = new Map<string, string[]>();
  for (const line of lines.slice(1)) {
    if (!line) continue;
    const i = line.indexOf(':');
    if (i <= 0) continue;
    const k = line.slice(0, i).trim().toLowerCase();
    const list = headers.get(k) ?? [];
    list.push(line.slice(i + 1).trim());
    headers.set(k, list);
  }
  return { status: Number(m[1]), reason: m[2] ?? '', headers };
}

/** realm="…" of a Proxy-Authenticate header value. */
export function realmOf(value: string | undefined): string | null {
  if (!value) return null;
  const m = /realm\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))/i.exec(value);
  return m ? (m[1] ?? m[2] ?? '').replace(/\\(.)/g, '$1') : null;
}

/** Printable, single-line, bounded text from peer bytes. */
export function peerText(bytes: Buffer | string, max = 120): string {
  const s = (typeof bytes === 'string' ? bytes : bytes.toString('latin1')).replace(/[^\x20-\x7e]+/g, ' ').trim();
  return s.length > max ? `${s.slice(0, max)}…` : s;
}

/** A header's first value by its lower-case name, from Node's parsed headers (what fromAProxy and proxyErrorOf read). */
export function headerGetter(
  headers: Record<string, string | string[] | undefined>,
): (name: string) => string | undefined {
  return (name) => {
    const v = headers[name];
    return Array.isArray(v) ? v[0] : v;
  };
}

/** Forward-proxy software, by its Server header (their own error pages carry no Via). */
const PROXY_SERVERS = /\b(squid|tinyproxy|privoxy|polipo|3proxy|ccproxy|mitmproxy|proxyd)\b/i;

/**
 * Whether an answer shows it came from a proxy: the Via a proxy adds (RFC 9110 7.6.3), a Proxy-Status (RFC
 * 9209), a Proxy-Authenticate, squid's X-Squid-Error, or a proxy's name in Server.
 */
export function fromAProxy(get: (name: string) => string | undefined): boolean {
  return (
    ['via', 'proxy-status', 'proxy-authenticate', 'x-squid-error'].some((h) => get(h) !== undefined) ||
    PROXY_SERVERS.test(get('server') ?? '')
  );
}

/** The last `Proxy-Status` member: the one the proxy nearest to us added (RFC 9209). */
function nearestProxyStatus(get: (name: string) => string | undefined): string {
  const members = (get('proxy-status') ?? '').split(/,(?=(?:[^"]*"[^"]*")*[^"]*$)/);
  return members[members.length - 1] ?? '';
}

/** Whether the nearest proxy says it forwarded the target's own answer (`Proxy-Status: …; received-status=N`). */
export function forwardedByProxy(get: (name: string) => string | undefined): boolean {
  return /;\s*received-status=/i.test(nearestProxyStatus(get));
}

/** Whether the nearest proxy says the answer is its own refusal (`Proxy-Status: …; error=…`, not forwarded). */
export function refusedByProxy(get: (name: string) => string | undefined): boolean {
  const nearest = nearestProxyStatus(get);
  return !/;\s*received-status=/i.test(nearest) && /;\s*error=/i.test(nearest);
}

/** Why a proxy says it could not reach the target, where it says so in a header. */
export type ProxyError = 'refused' | 'dns' | 'timeout' | 'unreachable' | 'unavailable';

/**
 * From `Proxy-Status: …; error=<type>` (RFC 9209) or squid's `X-Squid-Error: ERR_… <errno>`; null if neither says.
 * Only the proxy nearest to us counts: the last `Proxy-Status` member, and none at all when that member says it
 * forwarded an answer (`received-status`): an error named before it is the target's own reverse proxy's. So is
 * an `X-Squid-Error` in an answer proxyd forwarded (its `Via`).
 */
export function proxyErrorOf(get: (name: string) => string | undefined): ProxyError | null {
  const nearest = nearestProxyStatus(get);
  if (/;\s*received-status=/i.test(nearest)) return null;
  const type = /(?:^|;)\s*error=("?)([a-z_]+)\1/i.exec(nearest)?.[2]?.toLowerCase();
  if (type) {
    if (type.endsWith('timeout')) return 'timeout'; // dns_timeout too: a slow resolver, not a wrong name
    if (type.startsWith('dns_') || type === 'destination_not_found') return 'dns';
    if (type === 'connection_refused') return 'refused';
    if (type === 'destination_ip_unroutable') return 'unreachable';
    if (type === 'destination_unavailable') return 'unavailable';
  }
  const squid = /\bproxyd\b/i.test(get('via') ?? '') ? undefined : get('x-squid-error');
  if (squid) {
    if (/^ERR_DNS_FAIL\b/.test(squid)) return 'dns';
    if (/^ERR_CONNECT_FAIL 111\b/.test(squid)) return 'refused';
    if (/^ERR_CONNECT_FAIL 110\b|^ERR_[A-Z_]*TIMEOUT\b/.test(squid)) return 'timeout';
    if (/^ERR_CONNECT_FAIL\b/.test(squid)) return 'unreachable';
  }
  return null;
}
