// `proxyd health`: asks a running daemon's GET /healthz on the API address `serve` would listen on (the same flag,
// env and default) and exits 0 when it answers 200 as proxyd does ({"status":"ok"}), else 1. A container's
// HEALTHCHECK runs it (no curl in the image), and a systemd unit's ExecStartPost waits with it (`--wait`) until
// the daemon serves.
import http from 'node:http';
import { formatHostPort, type HostPort } from '../../rules/host-port.js';
import { DAEMON_PATHS } from '../../contract/paths.js';
import { escapeControls } from '../observe/connection-log.js';
import { ConfigError, isWildcardHost, parseHostPort } from './config.js';

/** The most of an answer's body kept (a /healthz body is a few dozen bytes). */
const MAX_BODY = 4096;
const RETRY_EVERY_MS = 250;

export interface HealthOptions {
  apiListen: string;
  /** Seconds one request may take. */
  timeout: string;
  /** Seconds to keep asking until the daemon answers 200 (0: ask once). */
  wait: string;
}

export interface HealthAnswer {
  /** The HTTP status, or null when nothing answered. */
  status: number | null;
  /** The body (cut at 4 KiB), or why nothing answered. */
  text: string;
}

/** Where to ask: a wildcard listen address (0.0.0.0, ::) accepts on loopback, so it is asked there. */
export function probeAddress(listen: HostPort): HostPort {
  if (!isWildcardHost(listen.host)) return listen;
  return { host: listen.host.includes(':') ? '::1' : '127.0.0.1', port: listen.port };
}

/** One GET /healthz with a deadline; never throws. */
export function askHealth(at: HostPort, timeoutMs: number): Promise<HealthAnswer> {
  return new Promise((resolve) => {
    const req = http.get(
      {
        host: at.host,
        port: at.port,
        path: DAEMON_PATHS.healthz,
        timeout: timeoutMs,
        headers: { 'user-agent': 'proxyd-health' },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (text.length < MAX_BODY) text += chunk.slice(0, MAX_BODY - text.length);
        });
        res.on('end', () => resolve({ status: res.statusCode ?? null, text: text.trim() }));
        res.on('error', (e) => resolve({ status: null, text: e.message }));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ status: null, text: e.code ?? e.message }));
  });
}

/** Whether an answer is proxyd's own "healthy": 200 with `{"status":"ok"}` (another server's 200 is not). */
function healthy(a: HealthAnswer): boolean {
  if (a.status !== 200) return false;
  try {
    return (JSON.parse(a.text) as { status?: unknown } | null)?.status === 'ok';
  } catch {
    return false;
  }
}

/** Why an answer is not healthy, in a line (what it said, escaped: it may come from any server). */
function notHealthy(a: HealthAnswer, url: string): string {
  if (a.status === null) return `no answer from ${url} (${a.text})`;
  const said = escapeControls(a.text.slice(0, 300));
  if (a.status === 200)
    return `${url} answered 200 but not as proxyd does ({"status":"ok"}): is it the address proxyd serves its API on (--api-listen, PROXYD_API_LISTEN)? It said: ${said}`;
  return `${url} answered ${a.status}: ${said}`;
}

function seconds(s: string, what: string, min: number, max: number): number {
  const n = Number(s);
  if (!/^\d+(\.\d+)?$/.test(s.trim()) || n < min || n > max)
    throw new ConfigError(`${what}: expected seconds, ${min} to ${max}, got "${s}"`);
  return n;
}

/**
 * The command: one line on stdout with the daemon's answer when it is healthy (exit 0), one on stderr saying what
 * it answered or why nothing did (exit 1); a bad flag is exit 2.
 */
export async function runHealth(
  o: HealthOptions,
  out: { stdout: (s: string) => void; stderr: (s: string) => void },
  nowMs: () => number = Date.now,
): Promise<number> {
  let at: HostPort;
  let timeoutMs: number;
  let waitMs: number;
  try {
    const listen = parseHostPort(o.apiListen, '--api-listen');
    if (listen.port === 0)
      throw new ConfigError(
        '--api-listen: port 0 is picked when the daemon starts; give the port its ready line names',
      );
    at = probeAddress(listen);
    timeoutMs = seconds(o.timeout, '--timeout', 0.1, 300) * 1000;
    waitMs = seconds(o.wait, '--wait', 0, 3600) * 1000;
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    out.stderr(`proxyd: ${e.message}\n`);
    return 2;
  }
  const url = `http://${formatHostPort(at.host, at.port)}${DAEMON_PATHS.healthz}`;
  const until = nowMs() + waitMs;
  for (;;) {
    const a = await askHealth(at, timeoutMs);
    if (healthy(a)) {
      out.stdout(`${a.text}\n`);
      return 0;
    }
    if (nowMs() + RETRY_EVERY_MS > until) {
      out.stderr(`proxyd: health: ${notHealthy(a, url)}\n`);
      return 1;
    }
    await new Promise((r) => setTimeout(r, RETRY_EVERY_MS));
  }
}
