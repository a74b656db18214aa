// Proxy lines for `proxyctl proxies export` (docs/cli.md "Proxy lists"): the gateway's address, the proxy user with
// its targeting and session parameters (USER[-country-CC][-city-NAME][-session-ID[-sesstime-MIN]], docs/gateway.md),
// and the password, in the formats proxy tools take.
import { randomInt } from 'node:crypto';
import { bracketHost, splitHostPort } from '../rules/host-port.js';

export type ExportFormat = 'url' | 'hostport' | 'hostport-at' | 'json';
export type ExportProtocol = 'http' | 'socks5h';

export interface ExportSpec {
  user: string;
  password: string;
  protocol: ExportProtocol;
  country?: string;
  city?: string;
  /** Sticky session minutes (`-sesstime-N`); absent: the gateway's default length (10 min). */
  stickyMinutes?: number;
  /** No session part: every connection may leave from another address. */
  rotating: boolean;
  count: number;
}

export interface ProxyLine {
  protocol: ExportProtocol;
  host: string;
  port: number;
  username: string;
  password: string;
  session: string | null;
  url: string;
}

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
export const SESSION_ID_LENGTH = 12;

/** A session id of [A-Za-z0-9]{12} from the OS's CSPRNG (71 bits). */
export function sessionId(): string {
  let s = '';
  for (let i = 0; i < SESSION_ID_LENGTH; i++) s += ALPHABET[randomInt(ALPHABET.length)];
  return s;
}

/**
 * The gateway's address as the API gives it (`HOST:PORT`, `[v6]:PORT`, written by the daemon's formatHostPort), read
 * by the same rule; the host kept as it stands before `:port` in a line (an IPv6 address in brackets). null when it is
 * not one, or its port is 0.
 */
export function readGatewayAddress(text: string): { host: string; port: number } | null {
  const hp = splitHostPort(text.trim());
  if (!hp || hp.port < 1) return null;
  return { host: bracketHost(hp.host), port: hp.port };
}

export function proxyUsername(
  spec: Pick<ExportSpec, 'user' | 'country' | 'city' | 'stickyMinutes'>,
  session: string | null,
): string {
  let u = spec.user;
  if (spec.country) u += `-country-${spec.country.toLowerCase()}`;
  if (spec.city) u += `-city-${spec.city.toLowerCase()}`;
  if (session !== null)
    u += `-session-${session}${spec.stickyMinutes !== undefined ? `-sesstime-${spec.stickyMinutes}` : ''}`;
  return u;
}

/** `count` lines, each with its own session id (unless rotating). */
export function buildLines(
  address: { host: string; port: number },
  spec: ExportSpec,
  makeId: () => string = sessionId,
): ProxyLine[] {
  const seen = new Set<string>();
  const lines: ProxyLine[] = [];
  for (let i = 0; i < spec.count; i++) {
    let session: string | null = null;
    if (!spec.rotating) {
      do session = makeId();
      while (seen.has(session));
      seen.add(session);
    }
    const username = proxyUsername(spec, session);
    const scheme = spec.protocol === 'socks5h' ? 'socks5h' : 'http';
    const url = `${scheme}://${encodeURIComponent(username)}:${encodeURIComponent(spec.password)}@${address.host}:${address.port}`;
    lines.push({
      protocol: spec.protocol,
      host: address.host,
      port: address.port,
      username,
      password: spec.password,
      session,
      url,
    });
  }
  return lines;
}

/** The lines as text in a format: one per line, or a JSON array for `json`. */
export function formatLines(lines: ProxyLine[], format: ExportFormat): string {
  if (format === 'json') return `${JSON.stringify(lines, null, 2)}\n`;
  const one = (l: ProxyLine) =>
    format === 'url'
      ? l.url
      : format === 'hostport'
        ? `${l.host}:${l.port}:${l.username}:${l.password}`
        : `${l.username}:${l.password}@${l.host}:${l.port}`;
  return lines.map((l) => `${one(l)}\n`).join('');
}
