// Stage connect: did the proxy open the way to the target? HTTP: the CONNECT status (200 or the
// status and its reason). http:// targets have no tunnel: the stage is folded into the forwarded
// request (a gateway refusal 403/502/504 fails here, unless the proxy marks it as the target's). SOCKS5: the CONNECT reply code, named.
import { isIP } from 'node:net';
import { ATYP_DOMAIN } from '../../rules/socks5-address.js';
import { readBody } from './egress-ip.js';
import {
  PeerClosedError,
  SocketReader,
  forwardedByProxy,
  headerGetter,
  peerText,
  proxyErrorOf,
  refusedByProxy,
} from './reader.js';
import { SOCKS_VERSION, boundAddressLength, connectRequest, formatBound, hex, socksReplyName } from './socks5.js';
import { fail, ok, type StageFn } from './stage.js';
import type { CheckContext, StageOutcome } from './types.js';

/** Statuses the gateway itself uses for a target it will not or cannot reach (docs/gateway.md Status codes and SOCKS replies). */
const GATEWAY_REFUSAL_STATUSES = new Set([403, 502, 504]);

/** The proxy's explanation without a repeated "403 Forbidden:" prefix. */
export function explanation(body: string, status: number, reason: string): string {
  // An HTML error page (squid's, tinyproxy's) says nothing a line can show: its headers and status speak instead.
  if (/^\s*<|<html[\s>]/i.test(body)) return '';
  const text = peerText(body, 160);
  const prefix = `${status} ${reason}`.trim();
  return text.startsWith(prefix) ? text.slice(prefix.length).replace(/^[\s:]+/, '') : text;
}

function httpConnectVerdict(ctx: CheckContext): StageOutcome {
  const a = ctx.connectAnswer!;
  const text = `${a.status} ${a.reason}`.trim();
  if (a.status === 200) return ok(`tunnel to ${ctx.target.hostHeader} open (${text})`);
  const why = explanation(a.body, a.status, a.reason);
  return fail(`CONNECT ${ctx.target.hostHeader} answered ${text}${why ? `: ${why}` : ''}`, {
    kind: 'http_connect_status',
    status: a.status,
    reason: a.reason,
    body: why,
    ...(a.proxyError ? { proxyError: a.proxyError } : {}),
  });
}

async function httpForwardVerdict(ctx: CheckContext): Promise<StageOutcome> {
  const res = ctx.forwardResponse!;
  const status = res.statusCode ?? 0;
  const text = `${status} ${peerText(res.statusMessage ?? '', 60)}`.trim();
  // The proxy saying in a header that it could not reach the target (squid answers 503 so): the proxy's answer.
  const get = headerGetter(res.headers);
  const proxyError = status >= 400 ? proxyErrorOf(get) : null;
  // The proxy's own typed refusal (Proxy-Status error=, e.g. a 429 connection limit) fails here; a 403/502/504
  // the proxy marks as forwarded (received-status) is the target's own: the status stage judges it.
  const ownRefusal = status >= 400 && refusedByProxy(get);
  if (proxyError || ownRefusal || (GATEWAY_REFUSAL_STATUSES.has(status) && !forwardedByProxy(get))) {
    const why = explanation(await readBody(res).catch(() => ''), status, peerText(res.statusMessage ?? '', 60));
    return fail(
      `request for ${ctx.target.hostHeader} answered ${text}${why ? `: ${why}` : ''}${proxyError || ownRefusal ? ' (from the proxy)' : ' (from the proxy, unless the target itself sent it)'}`,
      {
        kind: 'http_connect_status',
        status,
        reason: peerText(res.statusMessage ?? '', 60),
        body: why,
        ...(proxyError ? { proxyError } : {}),
      },
    );
  }
  return ok(`no tunnel for an http:// target: forwarded as absolute-form request (answered ${text})`);
}

async function socksConnect(ctx: CheckContext, signal: AbortSignal): Promise<StageOutcome> {
  const socket = ctx.socket!;
  let host = ctx.target.host;
  let resolvedNote = '';
  if (ctx.proxy.protocol === 'socks5' && isIP(host) === 0) {
    // socks5:// resolves the target here; socks5h:// lets the proxy resolve it.
    try {
      const addrs = await ctx.deps.lookup(host);
      const first = addrs.find((a) => a.family === 4) ?? addrs[0];
      if (!first) throw Object.assign(new Error('no addresses'), { code: 'ENODATA' });
      resolvedNote = ` (${host} resolved locally to ${first.address})`;
      host = first.address;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'ERROR';
      return fail(`target ${host} does not resolve locally (${code}); socks5h:// would let the proxy resolve it`, {
        kind: 'target_dns',
        code,
      });
    }
  }
  const reader = new SocketReader(socket, signal);
  socket.write(connectRequest(host, ctx.target.port));
  let header: Buffer;
  try {
    header = await reader.read(4);
  } catch (err) {
    if (err instanceof PeerClosedError)
      return fail('proxy closed the connection before the CONNECT reply', {
        kind: 'closed',
        during: 'before the SOCKS5 CONNECT reply',
      });
    throw err;
  }
  if (header[0] !== SOCKS_VERSION)
    return fail(`bad CONNECT reply: version byte ${hex(header[0]!)}`, {
      kind: 'protocol',
      message: 'bad SOCKS5 reply version',
    });
  const rep = header[1]!;
  if (rep !== 0x00) {
    return fail(`CONNECT ${ctx.target.hostHeader}${resolvedNote}: reply ${hex(rep)} ${socksReplyName(rep)}`, {
      kind: 'socks_reply',
      code: rep,
    });
  }
  const atyp = header[3]!;
  let bound = '';
  try {
    const first = atyp === ATYP_DOMAIN ? (await reader.read(1))[0] : undefined;
    const len = boundAddressLength(atyp, first);
    if (len === null)
      return fail(`bad CONNECT reply: address type ${hex(atyp)}`, {
        kind: 'protocol',
        message: 'bad SOCKS5 address type',
      });
    const rest = await reader.read(atyp === ATYP_DOMAIN ? len - 1 : len);
    bound = formatBound(atyp, first === undefined ? rest : Buffer.concat([Buffer.from([first]), rest]));
  } catch {
    return fail('proxy closed the connection inside the CONNECT reply', {
      kind: 'closed',
      during: 'inside the SOCKS5 CONNECT reply',
    });
  }
  reader.release();
  return ok(`reply 0x00 succeeded${resolvedNote}, bound ${bound}`);
}

export const connectStage: StageFn = async (ctx, signal) => {
  if (ctx.proxy.protocol === 'http')
    return ctx.target.protocol === 'https' ? httpConnectVerdict(ctx) : httpForwardVerdict(ctx);
  return socksConnect(ctx, signal);
};
