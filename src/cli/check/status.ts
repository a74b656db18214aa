// Stage status: the target's HTTP status for a GET through the proxy, and the egress IP it echoes.
import { request, type IncomingMessage } from 'node:http';
import { REQUEST_HEADERS, parseEgressIp, readBody } from './egress-ip.js';
import { peerText } from './reader.js';
import { fail, ok, describeNetError, type StageFn } from './stage.js';
import type { CheckContext, StageOutcome } from './types.js';

function verdict(ctx: CheckContext, res: IncomingMessage, body: string): StageOutcome {
  const status = res.statusCode ?? 0;
  const text = `${status} ${peerText(res.statusMessage ?? '', 60)}`.trim();
  if (status >= 400 || status < 100) {
    return fail(`target answered ${text}`, { kind: 'target_status', status });
  }
  const ip = parseEgressIp(body);
  ctx.egressIp = ip;
  return ok(ip ? `${text}, egress IP ${ip}` : `${text}, no IP in the body (not an IP echo target?)`);
}

function overTunnel(ctx: CheckContext, signal: AbortSignal): Promise<StageOutcome> {
  // HTTPS: the TLS socket; SOCKS5 to an http:// target: the plain tunnel.
  const socket = (ctx.tlsSocket ?? ctx.socket)!;
  socket.resume(); // the handshake reader left the plain tunnel paused; the target speaks only after our request
  return new Promise((resolve) => {
    const req = request({
      createConnection: () => socket,
      method: 'GET',
      host: ctx.target.host,
      port: ctx.target.port,
      path: ctx.target.path,
      signal,
      headers: { Host: ctx.target.hostHeader, ...REQUEST_HEADERS },
    });
    req.once('response', (res) => {
      readBody(res).then(
        (body) => resolve(verdict(ctx, res, body)),
        (err: Error) =>
          resolve(
            fail(`response body cut off: ${err.message}`, {
              kind: 'closed',
              during: 'while sending the response body',
            }),
          ),
      );
    });
    req.once('error', (err: NodeJS.ErrnoException) => {
      if (signal.aborted) return;
      resolve(
        fail(`request failed: ${describeNetError(err)}`, { kind: 'closed', during: 'before the target answered' }),
      );
    });
    req.end();
  });
}

async function forwarded(ctx: CheckContext): Promise<StageOutcome> {
  const res = ctx.forwardResponse!;
  try {
    return verdict(ctx, res, await readBody(res));
  } catch (err) {
    return fail(`response body cut off: ${(err as Error).message}`, {
      kind: 'closed',
      during: 'while sending the response body',
    });
  }
}

export const statusStage: StageFn = (ctx, signal) => (ctx.forwardResponse ? forwarded(ctx) : overTunnel(ctx, signal));
