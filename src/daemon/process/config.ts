// `proxyd serve` configuration: flags with env fallbacks (docs/operations.md Flags and environment), validated into one typed object.
import { KEY_LIMITS } from '../../contract/paths.js';
import { DAY_MS, DAY_S } from '../../rules/time.js';
import { parseKeyLimits } from '../ratelimit/api-limits.js';
import { isIP } from 'node:net';
import { availableParallelism, homedir, hostname } from 'node:os';
import path from 'node:path';
import { parseSize } from '../../contract/size.js';
import ipaddr from 'ipaddr.js';
import type { EgressPrefix } from '../../gateway/index.js';
import { parseEgress } from './egress-pool.js';
import { parseDurationMs } from '../../contract/time.js';
import { splitHostPort, type HostPort } from '../../rules/host-port.js';
import { readUsageRetention } from '../services/usage.js';
import { SERVE_DEFAULTS } from './serve-options.js';

// The contract's HOST:PORT, as the start-up path (serve.ts) imports it from here.
export { formatHostPort } from '../../rules/host-port.js';

export interface ServeConfig {
  dataDir: string;
  /** `postgres://…`: the fleet's shared PostgreSQL instead of SQLite in the data dir. */
  databaseUrl: string | undefined;
  apiListen: HostPort;
  httpProxyListen: HostPort;
  socksListen: HostPort;
  egressAddress: string | undefined;
  /** `--egress-pool`, expanded to its addresses (IPv4). */
  egressPool: string[] | undefined;
  /** `--egress-pool` given as one IPv6 prefix (each connection: a random address of it). */
  egressPrefix?: EgressPrefix | undefined;
  allowPrivateTargets: boolean;
  /** Webhook receivers inside the operator's network: http:// and private addresses allowed. */
  allowPrivateWebhooks: boolean;
  workers: number;
  redisUrl: string | undefined;
  /** Several daemons on this host serve one data dir (shared lock); rate limits then live in Redis or SQLite. */
  sharedDataDir: boolean;
  trustProxy: string[];
  releaseGraceSec: number;
  /** How long the gateway admits from its last admission view while the change feed fails (docs/operations.md Fleet). */
  staleAdmissionSec: number;
  proxyProtocolFrom: string[];
  geoipDb: string | undefined;
  /** Operator override of the API limits, `list=60,add=10,delete=10,invalid=20`. */
  rateLimits: string | undefined;
  /** `--key-limits READS,WRITES`: requests per API key per rolling 60 s. */
  keyLimits: { reads: number; writes: number };
  logLevel: string;
  /** The name this node's connection-log records carry (`--node-name`, default the host name); an exit's name in the registry. */
  nodeName: string;
  /** `--role` (docs/operations.md, "Entry and exit nodes"): entry, exit, or both (one tier, as before). */
  role: 'entry' | 'exit' | 'both';
  /** `--location CC[:city]`, lower-case. */
  location: { country: string; city: string | null } | null;
  /** An exit's hop listener. */
  hopListen: HostPort;
  /** What an exit registers for its entries to dial, when its hop listener is on a wildcard address. */
  hopAdvertise: HostPort | undefined;
  /** An exit's hop certificate lifetime (ms; renewed at two thirds of it). */
  hopCertLifetimeMs: number;
  /** How long an exit accepts the replaced fleet secret after a rotation (ms). */
  hopGraceMs: number;
  /** Dedicated addresses (docs/admin.md, "ip"): replacements a customer may make per calendar month, and how long a replaced address is quarantined. */
  ipReplacements: number;
  ipQuarantineDays: number;
  /** How long connection-log records are kept (ms); 0: the gateway keeps no connection log. */
  connectionLogRetentionMs: number;
  /** How long audit records are kept (ms; pruning keeps each chain verifiable from its anchor). */
  auditRetentionMs: number;
  /** `--console-origin`: the console's public origin (`https://console.example.com`), the passkeys' relying party; null: as each browser reached it. */
  consoleOrigin: string | null;
  /** `--public-host`: the host customers reach the gateway at (GET /openapi/v1/proxy/gateway); null: the listeners' own. */
  publicHost: string | null;
  /** Where connection-log records go: the database, JSON lines (a file or stdout), or nowhere. */
  connectionLogSink: ConnectionLogSinkConfig;
  /** The database log's size on disk at most (bytes); undefined: no cap. */
  connectionLogMaxSize: number | undefined;
  /** SOCKS5 UDP ASSOCIATE: relay ports, idle time (ms), associations at most. */
  udp: { ports: { lo: number; hi: number }; idleMs: number; maxAssociations: number };
  /** How long usage buckets are kept, per period (ms). */
  usageRetentionMs: Record<'minute' | 'hour' | 'day', number>;
}

export type ConnectionLogSinkConfig =
  { kind: 'db' } | { kind: 'off' } | { kind: 'stdout' } | { kind: 'file'; path: string };

/** `--connection-log-sink db|jsonl:PATH|stdout|off`. */
export function parseConnectionLogSink(s: string | undefined): ConnectionLogSinkConfig {
  const v = (s ?? SERVE_DEFAULTS.connectionLogSink).trim();
  if (v === 'db' || v === 'off' || v === 'stdout') return { kind: v };
  if (v.startsWith('jsonl:') && v.length > 'jsonl:'.length)
    return { kind: 'file', path: path.resolve(v.slice('jsonl:'.length)) };
  throw new ConfigError(`--connection-log-sink: expected db, jsonl:PATH, stdout or off, got "${s}"`);
}

/** `LO-HI`: a range of ports (1024..65535, LO ≤ HI). */
function parsePortRange(s: string, what: string): { lo: number; hi: number } {
  const m = /^(\d{1,5})-(\d{1,5})$/.exec(s.trim());
  const lo = Number(m?.[1]);
  const hi = Number(m?.[2]);
  if (!m || lo < 1024 || hi > 65535 || lo > hi)
    throw new ConfigError(`${what}: expected a port range LO-HI within 1024-65535, got "${s}"`);
  return { lo, hi };
}

/** `--connection-log-max-size SIZE` (`20GiB`, `500MB`, bytes) or `none`: at least 1 MiB. */
function parseMaxSize(s: string | undefined): number | undefined {
  if (s === undefined || s.trim() === '' || s.trim().toLowerCase() === 'none') return undefined;
  const n = parseSize(s);
  if (n === null || n < 2 ** 20)
    throw new ConfigError(
      `--connection-log-max-size: expected a size of at least 1MiB (20GiB, 500MB) or none, got "${s}"`,
    );
  return n;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export function defaultDataDir(env: NodeJS.ProcessEnv = process.env): string {
  const base =
    env.XDG_DATA_HOME && path.isAbsolute(env.XDG_DATA_HOME) ? env.XDG_DATA_HOME : path.join(homedir(), '.local/share');
  return path.join(base, 'proxyd');
}

/** A listen host that accepts on every address of its family (`0.0.0.0`, `::`, or any spelling of them). */
export function isWildcardHost(host: string): boolean {
  return isIP(host) !== 0 && ipaddr.parse(host).range() === 'unspecified';
}

export function parseHostPort(s: string, what: string): HostPort {
  const hp = splitHostPort(s);
  if (!hp) throw new ConfigError(`${what}: expected HOST:PORT (port 0 picks a free one), got "${s}"`);
  return hp;
}

function parseCidrList(s: string | undefined, what: string): string[] {
  if (!s) return [];
  return s
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean)
    .map((c) => {
      try {
        if (c.includes('/')) ipaddr.parseCIDR(c);
        else ipaddr.parse(c);
        return c;
      } catch {
        throw new ConfigError(`${what}: "${c}" is not an IP address or CIDR`);
      }
    });
}

/** A number of days, fractions allowed (0.01 is about a quarter of an hour), more than 0 and at most `max`. */
function parseDays(s: string, what: string, max: number): number {
  if (!/^\d+(\.\d+)?$/.test(s) || Number(s) <= 0 || Number(s) > max)
    throw new ConfigError(`${what}: expected a number of days, more than 0 and at most ${max}, got "${s}"`);
  return Number(s);
}

function intIn(s: string, what: string, min: number, max: number): number {
  if (!/^\d+$/.test(s) || Number(s) < min || Number(s) > max)
    throw new ConfigError(`${what}: expected an integer ${min}..${max}, got "${s}"`);
  return Number(s);
}

interface RawServeOptions {
  dataDir?: string;
  databaseUrl?: string;
  apiListen: string;
  httpProxyListen: string;
  socksListen: string;
  egressAddress?: string;
  egressPool?: string;
  allowPrivateTargets?: boolean | string;
  allowPrivateWebhooks?: boolean | string;
  workers: string;
  redisUrl?: string;
  sharedDataDir?: boolean | string;
  trustProxy?: string;
  releaseGrace: string;
  /** Absent in callers that predate it: the default applies. */
  staleAdmission?: string;
  proxyProtocolFrom?: string;
  geoipDb?: string;
  rateLimits?: string;
  /** Absent in callers that predate it: the default applies. */
  keyLimits?: string;
  logLevel: string;
  nodeName?: string;
  role?: string;
  location?: string;
  hopListen?: string;
  hopAdvertise?: string;
  hopCertLifetime?: string;
  hopGrace?: string;
  ipReplacements?: string;
  ipQuarantine?: string;
  connectionLogRetention?: string;
  auditRetention?: string;
  consoleOrigin?: string;
  publicHost?: string;
  connectionLogSink?: string;
  connectionLogMaxSize?: string;
  udpPorts?: string;
  udpIdle?: string;
  udpMaxAssociations?: string;
  usageRetention?: string;
}

/** A boolean flag, else its env var: 1/true/yes turn it on, 0/false/no/empty leave it off, anything else is an error. */
export function flagOrEnv(flag: boolean | string | undefined, env: NodeJS.ProcessEnv, name: string): boolean {
  if (flag === true) return true;
  const v = (typeof flag === 'string' ? flag : env[name])?.trim().toLowerCase();
  if (v === undefined || v === '' || v === '0' || v === 'false' || v === 'no') return false;
  if (v === '1' || v === 'true' || v === 'yes') return true;
  throw new ConfigError(`${name}: expected 1 or 0, got "${v}"`);
}

/** `PROXYD_DNS_SERVERS=ip[:port],…`: the servers the gateway asks for target names instead of /etc/resolv.conf's. */
export function parseDnsServers(s: string | undefined): string[] | undefined {
  const list = s
    ?.split(',')
    .map((x) => x.trim())
    .filter(Boolean);
  if (!list?.length) return undefined;
  for (const x of list) {
    const bare = x.startsWith('[') && x.endsWith(']') ? x.slice(1, -1) : x;
    if (!isIP(bare) && !isIP(splitHostPort(x)?.host ?? ''))
      throw new ConfigError(`PROXYD_DNS_SERVERS: "${x}" is not an IP address with an optional port`);
  }
  return list;
}

export function toServeConfig(o: RawServeOptions, env: NodeJS.ProcessEnv = process.env): ServeConfig {
  if (o.egressAddress && !isIP(o.egressAddress))
    throw new ConfigError(`--egress-address: "${o.egressAddress}" is not an IP address`);
  if (o.redisUrl && !/^rediss?:\/\//.test(o.redisUrl))
    throw new ConfigError('--redis-url: expected redis://HOST:PORT or rediss://…');
  checkDatabaseUrl(o.databaseUrl);
  // An env-only setting: read again where the gateway is built, refused here like a bad flag (exit 2).
  parseDnsServers(env.PROXYD_DNS_SERVERS);
  const allow = flagOrEnv(o.allowPrivateTargets, env, 'PROXYD_ALLOW_PRIVATE_TARGETS');
  const egress = o.egressPool ? parseEgress(o.egressPool) : undefined;
  if (egress && 'error' in egress) throw new ConfigError(`--egress-pool: ${egress.error}`);
  const pool = egress && 'addresses' in egress ? egress.addresses : undefined;
  if (egress && o.egressAddress) throw new ConfigError('--egress-pool replaces --egress-address: give one of them');
  const role = parseRole(o.role, o);
  return {
    dataDir: path.resolve(o.dataDir || defaultDataDir(env)),
    databaseUrl: o.databaseUrl || undefined,
    apiListen: parseHostPort(o.apiListen, '--api-listen'),
    httpProxyListen: parseHostPort(o.httpProxyListen, '--http-proxy-listen'),
    socksListen: parseHostPort(o.socksListen, '--socks-listen'),
    egressAddress: o.egressAddress || undefined,
    egressPool: pool,
    egressPrefix: egress && 'prefix' in egress ? egress.prefix : undefined,
    allowPrivateTargets: allow,
    allowPrivateWebhooks: flagOrEnv(o.allowPrivateWebhooks, env, 'PROXYD_ALLOW_PRIVATE_WEBHOOKS'),
    workers: parseWorkers(o.workers),
    redisUrl: o.redisUrl || undefined,
    sharedDataDir: flagOrEnv(o.sharedDataDir, env, 'PROXYD_SHARED_DATA_DIR'),
    trustProxy: parseCidrList(o.trustProxy, '--trust-proxy'),
    releaseGraceSec: intIn(o.releaseGrace, '--release-grace', 0, 365 * DAY_S),
    staleAdmissionSec: intIn(o.staleAdmission ?? SERVE_DEFAULTS.staleAdmission, '--stale-admission', 0, 7 * DAY_S),
    proxyProtocolFrom: parseCidrList(o.proxyProtocolFrom, '--proxy-protocol-from'),
    geoipDb: o.geoipDb || undefined,
    rateLimits: o.rateLimits || undefined,
    keyLimits: parseKeyLimitsFlag(o.keyLimits),
    logLevel: o.logLevel,
    nodeName: parseNodeName(o.nodeName),
    role,
    location: parseLocation(o.location),
    ...hopAddresses(role, o),
    hopCertLifetimeMs:
      parseDays(o.hopCertLifetime ?? SERVE_DEFAULTS.hopCertLifetime, '--hop-cert-lifetime', 3650) * DAY_MS,
    hopGraceMs: intIn(o.hopGrace ?? SERVE_DEFAULTS.hopGrace, '--hop-grace', 5, 7 * DAY_S) * 1000,
    ipReplacements: intIn(o.ipReplacements ?? SERVE_DEFAULTS.ipReplacements, '--ip-replacements', 0, 1000),
    ipQuarantineDays: intIn(o.ipQuarantine ?? SERVE_DEFAULTS.ipQuarantine, '--ip-quarantine', 0, 3650),
    connectionLogRetentionMs: parseDuration(
      o.connectionLogRetention ?? SERVE_DEFAULTS.connectionLogRetention,
      '--connection-log-retention',
    ),
    auditRetentionMs: parseAuditRetention(o.auditRetention ?? SERVE_DEFAULTS.auditRetention),
    consoleOrigin: parseConsoleOrigin(o.consoleOrigin),
    publicHost: parsePublicHost(o.publicHost),
    connectionLogSink: parseConnectionLogSink(o.connectionLogSink),
    connectionLogMaxSize: parseMaxSize(o.connectionLogMaxSize),
    udp: {
      ports: parsePortRange(o.udpPorts ?? SERVE_DEFAULTS.udpPorts, '--udp-ports'),
      idleMs: intIn(o.udpIdle ?? SERVE_DEFAULTS.udpIdle, '--udp-idle', 1, DAY_S) * 1000,
      maxAssociations: intIn(
        o.udpMaxAssociations ?? SERVE_DEFAULTS.udpMaxAssociations,
        '--udp-max-associations',
        1,
        1_000_000,
      ),
    },
    usageRetentionMs: parseUsageRetention(o.usageRetention ?? SERVE_DEFAULTS.usageRetention),
  };
}

/** `--key-limits READS,WRITES` (default 120,30): each an integer 1..1000000. */
function parseKeyLimitsFlag(s: string | undefined): { reads: number; writes: number } {
  if (s === undefined) return { ...KEY_LIMITS };
  const l = parseKeyLimits(s);
  if (!l)
    throw new ConfigError(`--key-limits: expected READS,WRITES (two integers 1..1000000, e.g. 120,30), got "${s}"`);
  return l;
}

export const MAX_WORKERS = 64;

/** `N` (1–64) or `auto`: one worker per CPU this process may run on (os.availableParallelism), at most 64. */
export function parseWorkers(s: string, cpus: () => number = availableParallelism): number {
  if (s.trim().toLowerCase() === 'auto') return Math.max(1, Math.min(MAX_WORKERS, cpus()));
  if (!/^\d+$/.test(s) || Number(s) < 1 || Number(s) > MAX_WORKERS)
    throw new ConfigError(`--workers: expected an integer 1..${MAX_WORKERS} or auto, got "${s}"`);
  return Number(s);
}

function parseRole(s: string | undefined, o: RawServeOptions): ServeConfig['role'] {
  const role = s ?? SERVE_DEFAULTS.role;
  if (role !== 'entry' && role !== 'exit' && role !== 'both')
    throw new ConfigError(`--role: expected entry, exit or both, got "${role}"`);
  if (role !== 'both' && !o.databaseUrl)
    throw new ConfigError(
      `--role ${role}: entry and exit nodes share a fleet database: give --database-url postgres://…`,
    );
  if (role === 'entry' && (o.egressAddress || o.egressPool))
    throw new ConfigError(
      '--role entry: an entry dials from no egress address of its own (give --egress-address / --egress-pool to its exits)',
    );
  return role;
}

/** An exit registers what its entries dial: the hop listener's address, or `--hop-advertise` (needed for a wildcard). */
function hopAddresses(role: ServeConfig['role'], o: RawServeOptions): Pick<ServeConfig, 'hopListen' | 'hopAdvertise'> {
  const hopListen = parseHostPort(o.hopListen ?? SERVE_DEFAULTS.hopListen, '--hop-listen');
  const hopAdvertise = o.hopAdvertise ? parseHostPort(o.hopAdvertise, '--hop-advertise') : undefined;
  if (hopAdvertise && (hopAdvertise.port === 0 || isWildcardHost(hopAdvertise.host))) {
    throw new ConfigError(
      `--hop-advertise: the address and port entries dial (not a wildcard or port 0), got "${o.hopAdvertise}"`,
    );
  }
  if (role === 'exit' && !hopAdvertise && isWildcardHost(hopListen.host)) {
    throw new ConfigError(
      `--hop-listen ${o.hopListen}: entries cannot dial a wildcard address; give --hop-advertise HOST:PORT (what they reach this exit on)`,
    );
  }
  return { hopListen, hopAdvertise };
}

/** `us`, `de:berlin`: ISO 3166 alpha-2 and an optional city name (letters, digits, _), both lower-cased. */
/** `--public-host`: an IP address or a DNS name, no port (the gateway's ports are its listeners'). */
export function parsePublicHost(s: string | undefined): string | null {
  if (s === undefined || s === '') return null;
  const bare = s.startsWith('[') && s.endsWith(']') ? s.slice(1, -1) : s;
  if (isIP(bare)) return bare;
  const name =
    /^(?=.{1,253}$)([A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$/;
  if (!name.test(s))
    throw new ConfigError(
      `--public-host: expected a host name or an IP address without a port (proxy.example.com, 203.0.113.7), got "${s}"`,
    );
  return s.replace(/\.$/, '').toLowerCase();
}

export function parseLocation(s: string | undefined): ServeConfig['location'] {
  if (!s) return null;
  const m = /^([A-Za-z]{2})(?::([A-Za-z0-9_]{1,64}))?$/.exec(s.trim());
  if (!m)
    throw new ConfigError(
      `--location: expected COUNTRY[:CITY] such as us or de:berlin (ISO 3166 alpha-2; a city of letters, digits and _), got "${s}"`,
    );
  return { country: m[1]!.toLowerCase(), city: m[2]?.toLowerCase() ?? null };
}

/** `minute=48h,hour=90d,day=2y`: any subset; the periods not named keep their default. */
export function parseUsageRetention(s: string): Record<'minute' | 'hour' | 'day', number> {
  const r = readUsageRetention(s);
  if (typeof r === 'string') throw new ConfigError(r);
  return r;
}

/** `--audit-retention`: a duration of at least a day (records younger than a day are never pruned). */
function parseAuditRetention(s: string): number {
  const ms = parseDuration(s, '--audit-retention');
  if (ms < DAY_MS) throw new ConfigError(`--audit-retention: at least 1d, got "${s}"`);
  return ms;
}

/** `--console-origin`: scheme and host (and port) only, such as https://console.example.com; browsers refuse an IP literal for passkeys. */
export function parseConsoleOrigin(s: string | undefined): string | null {
  if (s === undefined || s.trim() === '') return null;
  let u: URL;
  try {
    u = new URL(s.trim());
  } catch {
    throw new ConfigError(`--console-origin: expected an origin such as https://console.example.com, got "${s}"`);
  }
  if (
    (u.protocol !== 'https:' && u.protocol !== 'http:') ||
    u.pathname !== '/' ||
    u.search ||
    u.hash ||
    u.username ||
    u.password ||
    s.trim().replace(/\/$/, '') !== u.origin
  ) {
    throw new ConfigError(`--console-origin: scheme and host only (https://console.example.com), got "${s}"`);
  }
  if (/^[\d.]+$|^\[/.test(u.hostname))
    throw new ConfigError(
      `--console-origin: a host name, not an IP address (browsers refuse passkeys on IP addresses), got "${s}"`,
    );
  return u.origin;
}
/** `90s`, `30m`, `48h`, `7d`, `2y`, or plain seconds; `0` is zero. */
export function parseDuration(s: string, what: string): number {
  const ms = parseDurationMs(s, { bareSeconds: true });
  if (ms === null) throw new ConfigError(`${what}: expected a duration such as 2y, 7d, 48h, 30m or 90s, got "${s}"`);
  return ms;
}

function parseNodeName(s: string | undefined): string {
  const name =
    s?.trim() ||
    hostname()
      .replace(/[^A-Za-z0-9._:-]/g, '-')
      .replace(/^[^A-Za-z0-9]+/, '')
      .slice(0, 63) ||
    'proxyd';
  if (!/^[A-Za-z0-9][A-Za-z0-9._:-]{0,62}$/.test(name))
    throw new ConfigError(`--node-name: letters, digits, . _ : - (up to 63), got "${name}"`);
  return name;
}

/** `--database-url`: PostgreSQL only (SQLite is the data dir). */
export function checkDatabaseUrl(url: string | undefined): void {
  if (url && !/^postgres(ql)?:\/\/[^\s]+$/i.test(url))
    throw new ConfigError('--database-url: expected postgres://USER:PASSWORD@HOST:PORT/DATABASE');
}
