// The egress IP a target echoes, and the direct (proxy-less) request used for comparison.
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { secureContextFor } from './tls.js';
import type { TargetSpec } from './urls.js';

const MAX_BODY = 64 * 1024;

/** The IP in an echo body: JSON `{"ip":…}` (also `origin`, as httpbin sends), or a body that is an IP. */
export function parseEgressIp(body: string): string | null {
  const text = body.trim();
  if (!text) return null;
  if (text.startsWith('{')) {
    try {
      const obj = JSON.parse(text) as Record<string, unknown>;
      for (const key of ['ip', 'origin', 'address', 'query']) {
        const v = obj[key];
        if (typeof v === 'string') {
          const first = v.split(',')[0]!.trim(); // httpbin: "client, proxy"
          if (isIP(first)) return first;
        }
      }
    } catch {
      /* not JSON */
    }
    return null;
  }
  const firstLine = text.split(/\r?\n/)[0]!.trim();
  return isIP(firstLine) ? firstLine : null;
}

/** Reads a response body up to MAX_BODY bytes (more is cut off). */
export function readBody(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (c: Buffer) => {
      if (size < MAX_BODY) chunks.push(c);
      size += c.length;
      if (size >= MAX_BODY) {
        res.destroy();
        resolve(Buffer.concat(chunks).subarray(0, MAX_BODY).toString('utf8'));
      }
    });
    res.once('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.once('error', reject);
    res.once('aborted', () => reject(new Error('response aborted')));
  });
}

export const REQUEST_HEADERS = {
  'User-Agent': 'proxyctl-check',
  Accept: 'application/json, text/plain;q=0.9, */*;q=0.1',
  Connection: 'close',
} as const;

type DirectResult = { ok: true; ip: string | null; status: number } | { ok: false; error: string };

/** The same target fetched without the proxy. */
export function fetchDirect(
  target: TargetSpec,
  opts: { ca?: string | undefined; timeoutMs: number },
): Promise<DirectResult> {
  return new Promise((resolve) => {
    const signal = AbortSignal.timeout(opts.timeoutMs);
    const base = {
      host: target.host,
      port: target.port,
      path: target.path,
      method: 'GET',
      headers: { Host: target.hostHeader, ...REQUEST_HEADERS },
      signal,
      agent: false as const,
    };
    const req =
      target.protocol === 'https'
        ? // secureContext is passed on to tls.connect (missing from the https option types)
          httpsRequest({
            ...base,
            servername: isIP(target.host) ? undefined : target.host,
            ...({ secureContext: secureContextFor(opts.ca) } as object),
          })
        : httpRequest(base);
    req.once('response', (res) => {
      readBody(res).then(
        (body) => resolve({ ok: true, ip: parseEgressIp(body), status: res.statusCode ?? 0 }),
        (err: Error) => resolve({ ok: false, error: err.message }),
      );
    });
    req.once('error', (err: NodeJS.ErrnoException) =>
      resolve({
        ok: false,
        error: signal.aborted ? `no answer within ${opts.timeoutMs} ms` : (err.code ?? err.message),
      }),
    );
    req.end();
  });
}
