// Stage auth: is this client admitted? HTTP: the proxy's answer to CONNECT (or to the absolute-form
// request for an http:// target) is 407 or not. SOCKS5: method selection plus the RFC 1929 status.
import { request, type IncomingMessage } from 'node:http';
import { formatHostPort } from '../../rules/host-port.js';
import {
  PeerClosedError,
  SocketReader,
  fromAProxy,
  headerGetter,
  parseProxyReply,
  peerText,
  proxyErrorOf,
  realmOf,
} from './reader.js';
import {
  METHOD_NONE_ACCEPTABLE,
  METHOD_NO_AUTH,
  METHOD_USER_PASS,
  SOCKS_VERSION,
  greeting,
  hex,
  userPassRequest,
} from './socks5.js';
import { fail, ok, describeNetError, type StageFn } from './stage.js';
import type { CheckContext, StageOutcome } from './types.js';

const MAX_HEAD = 64 * 1024;
const USER_AGENT = 'proxyctl-check';

function basicAuth(ctx: CheckContext): string | null {
  const { username, password } = ctx.proxy;
  if (username === null) return null;
  return `Basic ${Buffer.from(`${username}:${password ?? ''}`, 'utf8').toString('base64')}`;
}

function admittedText(ctx: CheckContext): string {
  return ctx.proxy.username !== null
    ? `credentials of "${ctx.proxy.username}" accepted`
    : 'admitted without credentials (source IP whitelist)';
}

function targetAuthority(ctx: CheckContext): string {
  const { host, port } = ctx.target;
  return formatHostPort(host, port);
}

function closedOutcome(err: unknown, during: string): StageOutcome {
  if (err instanceof PeerClosedError)
    return fail(`proxy closed the connection ${during}${err.code ? ` (${err.code})` : ''}`, { kind: 'closed', during });
  return fail(`${during}: ${(err as Error).message}`, { kind: 'protocol', message: (err as Error).message });
}

/** Statuses a proxy itself answers with (407 aside): refusals, limits and unreachable targets. */
const PROXY_STATUSES = new Set([200, 403, 429, 502, 503, 504]);

/**
 * An answer that cannot have come through a proxy: an error status a proxy does not use, with nothing a proxy
 * marks its answers with (fromAProxy: Via, Proxy-Status, a proxy's Server name, …). Typically the API or
 * another web server's port. tinyproxy's own 500 and 401 carry only its Server name.
 */
function notAProxy(ctx: CheckContext, status: number, reason: string, proxyish: boolean): StageOutcome | null {
  if (proxyish || PROXY_STATUSES.has(status) || status < 400) return null;
  return fail(
    `${status} ${reason}`.trim() +
      ` without a Via header: this answer did not come through a proxy (${formatHostPort(ctx.proxy.host, ctx.proxy.port)} looks like a web server or API, not a proxy port)`,
    {
      kind: 'not_a_proxy',
      status,
    },
  );
}

function rejected407(
  ctx: CheckContext,
  status: number,
  reason: string,
  authenticate: string | undefined,
): StageOutcome {
  const realm = realmOf(authenticate);
  const withCredentials = ctx.proxy.username !== null;
  const why = withCredentials ? 'credentials rejected' : 'no credentials and source IP not admitted';
  return fail(
    `${status} ${reason || 'Proxy Authentication Required'}${realm !== null ? ` (realm "${peerText(realm, 60)}")` : ''}: ${why}`,
    {
      kind: 'proxy_auth_required',
      realm,
      withCredentials,
      ...(status !== 407 ? { status } : {}),
    },
  );
}

async function httpConnectAuth(ctx: CheckContext, signal: AbortSignal): Promise<StageOutcome> {
  const socket = ctx.socket!;
  const authority = targetAuthority(ctx);
  const auth = basicAuth(ctx);
  const head = [
    `CONNECT ${authority} HTTP/1.1`,
    `Host: ${authority}`,
    `User-Agent: ${USER_AGENT}`,
    ...(auth ? [`Proxy-Authorization: ${auth}`] : []),
    '',
    '',
  ].join('\r\n');
  const reader = new SocketReader(socket, signal);
  socket.write(head);
  let raw: Buffer;
  try {
    raw = await reader.readUntil('\r\n\r\n', MAX_HEAD);
  } catch (err) {
    if (err instanceof PeerClosedError && reader.buffered > 0) {
      const sample = (await reader.readSome(64, 0)).toString('latin1');
      return fail(`not an HTTP proxy answer: "${peerText(sample, 40)}"`, {
        kind: 'not_http_proxy',
        sample: peerText(sample, 40),
      });
    }
    return closedOutcome(err, 'before answering CONNECT');
  }
  const parsed = parseProxyReply(raw.toString('latin1').slice(0, -4));
  if (!parsed) {
    const sample = peerText(raw, 40);
    return fail(`not an HTTP proxy answer: "${sample}"`, { kind: 'not_http_proxy', sample });
  }
  // The answer to CONNECT is the proxy's own: its request id is the proxy's.
  keepRequestId(ctx, parsed.headers.get('x-request-id'));
  const get = (name: string) => parsed.headers.get(name)?.[0];
  const proxyish = fromAProxy(get);
  if (parsed.status === 407)
    return rejected407(ctx, parsed.status, peerText(parsed.reason, 60), get('proxy-authenticate'));
  // Some proxies (tinyproxy) refuse credentials with 401 and WWW-Authenticate.
  if (parsed.status === 401 && proxyish)
    return rejected407(
      ctx,
      parsed.status,
      peerText(parsed.reason, 60),
      get('proxy-authenticate') ?? get('www-authenticate'),
    );
  const foreign = notAProxy(ctx, parsed.status, peerText(parsed.reason, 60), proxyish);
  if (foreign) return foreign;
  let body = '';
  if (parsed.status !== 200) {
    // Keep the proxy's explanation, if it sends a short one.
    const len = Number(parsed.headers.get('content-length')?.[0] ?? NaN);
    const bytes = Number.isFinite(len)
      ? await reader.read(Math.min(len, 2048)).catch(() => reader.readSome(2048, 0))
      : await reader.readSome(2048, 20);
    body = peerText(bytes, 200);
  }
  reader.release();
  ctx.connectAnswer = {
    status: parsed.status,
    reason: peerText(parsed.reason, 60),
    body,
    proxyError: proxyErrorOf(get),
  };
  return ok(`${admittedText(ctx)} (CONNECT answered ${parsed.status})`);
}

async function httpForwardAuth(ctx: CheckContext, signal: AbortSignal): Promise<StageOutcome> {
  const socket = ctx.socket!;
  const auth = basicAuth(ctx);
  return new Promise<StageOutcome>((resolve) => {
    const req = request({
      createConnection: () => socket,
      method: 'GET',
      host: ctx.target.host,
      port: ctx.target.port,
      path: ctx.target.href,
      signal,
      headers: {
        Host: ctx.target.hostHeader,
        'User-Agent': USER_AGENT,
        Accept: 'application/json, text/plain;q=0.9, */*;q=0.1',
        Connection: 'close',
        ...(auth ? { 'Proxy-Authorization': auth } : {}),
      },
    });
    req.once('response', (res: IncomingMessage) => {
      const get = headerGetter(res.headers);
      const via = get('via');
      // A forwarded answer is the target's: an X-Request-Id in it is the target's own, unless proxyd forwarded it
      // (it adds its id last) or answered itself (its Proxy-Status names it). Through another proxy the
      // gateway's id is unknown, not the target's.
      if (/\bproxyd\b/i.test(via ?? '') || /^\s*proxyd\s*;/i.test(get('proxy-status') ?? ''))
        keepRequestId(
          ctx,
          res.rawHeaders.filter((_, i) => i % 2 === 1 && /^x-request-id$/i.test(res.rawHeaders[i - 1] ?? '')),
        );
      const proxyish = fromAProxy(get);
      if (res.statusCode === 407) {
        res.resume();
        resolve(rejected407(ctx, 407, peerText(res.statusMessage ?? '', 60), get('proxy-authenticate')));
        return;
      }
      // A 401 the proxy itself sent (tinyproxy refusing credentials): not forwarded (no Via), a proxy's mark on it.
      if (res.statusCode === 401 && via === undefined && proxyish) {
        res.resume();
        resolve(
          rejected407(
            ctx,
            401,
            peerText(res.statusMessage ?? '', 60),
            get('proxy-authenticate') ?? get('www-authenticate'),
          ),
        );
        return;
      }
      const foreign = notAProxy(ctx, res.statusCode ?? 0, peerText(res.statusMessage ?? '', 60), proxyish);
      if (foreign) {
        res.resume();
        resolve(foreign);
        return;
      }
      ctx.forwardResponse = res;
      ctx.viaMissing = via === undefined;
      const mark = via !== undefined ? `, Via ${peerText(via, 60)}` : ', no Via header';
      resolve(ok(`${admittedText(ctx)} (absolute-form GET answered ${res.statusCode}${mark})`));
    });
    req.once('error', (err: NodeJS.ErrnoException) => {
      if (signal.aborted) return;
      if (err.code === 'ECONNRESET' || err.code === 'EPIPE')
        resolve(
          fail(`proxy closed the connection before answering (${describeNetError(err)})`, {
            kind: 'closed',
            during: 'before answering the request',
          }),
        );
      else if (err.code?.startsWith('HPE_'))
        resolve(fail(`not an HTTP proxy answer (${err.code})`, { kind: 'not_http_proxy', sample: err.code }));
      else resolve(fail(`request failed: ${describeNetError(err)}`, { kind: 'protocol', message: err.message }));
    });
    req.end();
  });
}

/** The last `X-Request-Id` the proxy sent, if it looks like an id (peerText, short). */
function keepRequestId(ctx: CheckContext, values: readonly string[] | undefined): void {
  const v = values?.[values.length - 1]?.trim();
  if (v && /^[\x21-\x7e]{1,128}$/.test(v)) ctx.requestId = v;
}

async function socksAuth(ctx: CheckContext, signal: AbortSignal): Promise<StageOutcome> {
  const socket = ctx.socket!;
  const withCredentials = ctx.proxy.username !== null;
  const reader = new SocketReader(socket, signal);
  socket.write(greeting(withCredentials));
  let choice: Buffer;
  try {
    choice = await reader.read(2);
  } catch (err) {
    return closedOutcome(err, 'during SOCKS5 method selection');
  }
  if (choice[0] !== SOCKS_VERSION) {
    const sample = peerText(Buffer.concat([choice, await reader.readSome(30, 0)]), 40);
    return fail(
      `not a SOCKS5 answer (first byte ${hex(choice[0]!)}${/^HTTP\//.test(sample) ? `, looks like HTTP: "${sample}"` : ''})`,
      { kind: 'not_socks5', firstByte: choice[0]! },
    );
  }
  const method = choice[1]!;
  if (method === METHOD_NONE_ACCEPTABLE) {
    return fail(
      withCredentials
        ? 'method selection: proxy accepts no offered method (0xFF; offered username/password)'
        : 'method selection: no acceptable method (0xFF) for a client without credentials',
      { kind: 'socks_no_method', withCredentials },
    );
  }
  if (method === METHOD_NO_AUTH) {
    reader.release();
    return ok(
      withCredentials
        ? 'proxy chose "no authentication" (0x00); credentials not checked'
        : 'admitted without credentials (method 0x00, source IP whitelist)',
    );
  }
  if (method !== METHOD_USER_PASS || !withCredentials) {
    return fail(`method selection: proxy chose method ${hex(method)}, which was not offered`, {
      kind: 'protocol',
      message: `unexpected SOCKS5 method ${hex(method)}`,
    });
  }
  socket.write(userPassRequest(ctx.proxy.username!, ctx.proxy.password ?? ''));
  let status: Buffer;
  try {
    status = await reader.read(2);
  } catch (err) {
    return closedOutcome(err, 'during RFC 1929 authentication');
  }
  if (status[1] !== 0x00) {
    return fail(`username/password rejected (RFC 1929 status ${hex(status[1]!)})`, {
      kind: 'socks_auth_failed',
      status: status[1]!,
    });
  }
  reader.release();
  return ok(`credentials of "${ctx.proxy.username}" accepted (method 0x02, RFC 1929 status 0x00)`);
}

export const authStage: StageFn = (ctx, signal) => {
  if (ctx.proxy.protocol === 'http')
    return ctx.target.protocol === 'https' ? httpConnectAuth(ctx, signal) : httpForwardAuth(ctx, signal);
  return socksAuth(ctx, signal);
};
