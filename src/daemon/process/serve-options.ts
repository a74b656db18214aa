// `proxyd serve`'s flags in one table: the commander options (main.ts), the defaults config.ts falls back to, and the
// flag tables of README.md and docs/operations.md (test/ops/readme-flags.test.ts compares them with this) read it.
// Light on purpose: main.ts imports it before any command runs.
import { KEY_LIMITS } from '../../contract/paths.js';
import { DEFAULT_STALE_ADMISSION_SEC } from '../admission/view.js';
import { DEFAULT_RELEASE_GRACE_SEC } from '../store/types.js';
import { UDP_DEFAULTS } from '../../rules/udp-defaults.js';
import { DEFAULT_USAGE_RETENTION } from '../store/usage-sql.js';

/** How many dedicated addresses an account may replace per month when `--ip-replacements` is not given. */
export const DEFAULT_IP_REPLACEMENTS = 3;
/** How many days a released dedicated address waits before reuse when `--ip-quarantine` is not given. */
export const DEFAULT_IP_QUARANTINE_DAYS = 30;

/** Every default of `proxyd serve`, as the flag's text (what commander and the env give); config.ts parses it. */
export const SERVE_DEFAULTS = {
  apiListen: '127.0.0.1:8080',
  httpProxyListen: '127.0.0.1:3128',
  socksListen: '127.0.0.1:1080',
  workers: '1',
  releaseGrace: String(DEFAULT_RELEASE_GRACE_SEC),
  staleAdmission: String(DEFAULT_STALE_ADMISSION_SEC),
  role: 'both',
  hopListen: '127.0.0.1:3129',
  hopCertLifetime: '90',
  hopGrace: '600',
  ipReplacements: String(DEFAULT_IP_REPLACEMENTS),
  ipQuarantine: String(DEFAULT_IP_QUARANTINE_DAYS),
  connectionLogRetention: '7d',
  auditRetention: '400d',
  connectionLogSink: 'db',
  udpPorts: `${UDP_DEFAULTS.ports.lo}-${UDP_DEFAULTS.ports.hi}`,
  udpIdle: String(UDP_DEFAULTS.idleMs / 1000),
  udpMaxAssociations: String(UDP_DEFAULTS.maxAssociations),
  connectionLogMaxSize: 'none',
  usageRetention: DEFAULT_USAGE_RETENTION,
  keyLimits: `${KEY_LIMITS.reads},${KEY_LIMITS.writes}`,
  logLevel: 'info',
} as const;

export type ServeDefaultKey = keyof typeof SERVE_DEFAULTS;

export interface ServeFlag {
  /** Commander's flags, `--api-listen <host:port>`; the option's attribute name is the long flag in camelCase. */
  flags: string;
  /** The help text. */
  help: string;
  /** The environment variable; a boolean flag reads it in config.ts (commander would take any value, even 0, as on). */
  env: string;
  /** The key of its default in SERVE_DEFAULTS. */
  default?: ServeDefaultKey;
  boolean?: true;
  choices?: readonly string[];
  /** Test-only: not in help or the docs. */
  hidden?: true;
  /** The docs tables' cells: the flag with its metavariable (`--api-listen H:P`) and, for a flag without a default, what the default column says. */
  doc: { flag: string; none?: string };
}

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** In help order. */
export const SERVE_FLAGS: readonly ServeFlag[] = [
  {
    flags: '--data-dir <dir>',
    help: 'data directory holding proxyd.db',
    env: 'PROXYD_DATA_DIR',
    doc: { flag: '--data-dir DIR', none: '`$XDG_DATA_HOME/proxyd` (else `~/.local/share/proxyd`)' },
  },
  {
    flags: '--database-url <url>',
    help: 'postgres://… : a shared PostgreSQL instead of SQLite in the data dir',
    env: 'PROXYD_DATABASE_URL',
    doc: { flag: '--database-url URL', none: 'none (SQLite in the data dir)' },
  },
  {
    flags: '--api-listen <host:port>',
    help: 'whitelist API, console, /ip, /healthz, /metrics',
    env: 'PROXYD_API_LISTEN',
    default: 'apiListen',
    doc: { flag: '--api-listen H:P' },
  },
  {
    flags: '--http-proxy-listen <host:port>',
    help: 'HTTP proxy (absolute-form and CONNECT)',
    env: 'PROXYD_HTTP_PROXY_LISTEN',
    default: 'httpProxyListen',
    doc: { flag: '--http-proxy-listen H:P' },
  },
  {
    flags: '--socks-listen <host:port>',
    help: 'SOCKS5 (CONNECT, UDP ASSOCIATE)',
    env: 'PROXYD_SOCKS_LISTEN',
    default: 'socksListen',
    doc: { flag: '--socks-listen H:P' },
  },
  {
    flags: '--egress-address <ip>',
    help: 'local address outgoing gateway connections bind to',
    env: 'PROXYD_EGRESS_ADDRESS',
    doc: { flag: '--egress-address IP', none: 'OS picks' },
  },
  {
    flags: '--egress-pool <list>',
    help: 'egress IPv4 addresses (a,b, ranges a-b, CIDR up to /22) or one IPv6 prefix /48../112, each connection from a random address of it (replaces --egress-address)',
    env: 'PROXYD_EGRESS_POOL',
    doc: { flag: '--egress-pool LIST', none: 'none' },
  },
  {
    flags: '--allow-private-targets',
    help: 'let the gateway reach loopback/private/reserved targets (env PROXYD_ALLOW_PRIVATE_TARGETS=1)',
    env: 'PROXYD_ALLOW_PRIVATE_TARGETS',
    boolean: true,
    doc: { flag: '--allow-private-targets', none: 'off' },
  },
  {
    flags: '--allow-private-webhooks',
    help: 'let webhooks go to http:// and private or loopback receivers (env PROXYD_ALLOW_PRIVATE_WEBHOOKS=1)',
    env: 'PROXYD_ALLOW_PRIVATE_WEBHOOKS',
    boolean: true,
    doc: { flag: '--allow-private-webhooks', none: 'off' },
  },
  {
    flags: '--workers <n|auto>',
    help: 'worker processes, each accepting on its own socket of every listener (auto: one per CPU)',
    env: 'PROXYD_WORKERS',
    default: 'workers',
    doc: { flag: '--workers N\\|auto' },
  },
  {
    flags: '--redis-url <url>',
    help: 'shared rate-limit store',
    env: 'PROXYD_REDIS_URL',
    doc: { flag: '--redis-url URL', none: 'none' },
  },
  {
    flags: '--shared-data-dir',
    help: 'let several daemons on this host serve one data dir (all must pass it; env PROXYD_SHARED_DATA_DIR=1)',
    env: 'PROXYD_SHARED_DATA_DIR',
    boolean: true,
    doc: { flag: '--shared-data-dir', none: 'off' },
  },
  {
    flags: '--trust-proxy <cidrs>',
    help: 'peers whose X-Forwarded-For is believed (API)',
    env: 'PROXYD_TRUST_PROXY',
    doc: { flag: '--trust-proxy CIDR,…', none: 'none' },
  },
  {
    flags: '--release-grace <seconds>',
    help: 'how long IPs of a closed account stay "being released"',
    env: 'PROXYD_RELEASE_GRACE',
    default: 'releaseGrace',
    doc: { flag: '--release-grace SECONDS' },
  },
  {
    flags: '--proxy-protocol-from <cidrs>',
    help: 'peers allowed to send a PROXY protocol v1/v2 header',
    env: 'PROXYD_PROXY_PROTOCOL_FROM',
    doc: { flag: '--proxy-protocol-from CIDR,…', none: 'none' },
  },
  {
    flags: '--geoip-db <file>',
    help: 'MMDB country database (default: bundled DB-IP Lite)',
    env: 'PROXYD_GEOIP_DB',
    doc: { flag: '--geoip-db FILE', none: 'bundled DB-IP Lite' },
  },
  {
    flags: '--stale-admission <seconds>',
    help: 'how long the gateway admits from its last view while the database is unreachable',
    env: 'PROXYD_STALE_ADMISSION',
    default: 'staleAdmission',
    doc: { flag: '--stale-admission SECONDS' },
  },
  {
    flags: '--role <role>',
    help: 'entry (customers connect; forwards to exits), exit (dials; no customer listener) or both',
    env: 'PROXYD_ROLE',
    default: 'role',
    choices: ['entry', 'exit', 'both'],
    doc: { flag: '--role ROLE' },
  },
  {
    flags: '--location <cc[:city]>',
    help: 'where this node dials from: ISO 3166 alpha-2 country, optional city (us, de:berlin)',
    env: 'PROXYD_LOCATION',
    doc: { flag: '--location CC[:CITY]', none: 'none' },
  },
  {
    flags: '--hop-advertise <host:port>',
    help: 'what an exit registers for its entries to dial (needed when --hop-listen is 0.0.0.0 or ::)',
    env: 'PROXYD_HOP_ADVERTISE',
    doc: { flag: '--hop-advertise H:P', none: "the hop listener's address" },
  },
  {
    flags: '--hop-listen <host:port>',
    help: "an exit's TLS listener for its entries (fleet secret; port 0 picks one)",
    env: 'PROXYD_HOP_LISTEN',
    default: 'hopListen',
    doc: { flag: '--hop-listen H:P' },
  },
  {
    flags: '--hop-cert-lifetime <days>',
    help: "an exit's hop certificate lifetime, renewed at two thirds of it",
    env: 'PROXYD_HOP_CERT_LIFETIME',
    default: 'hopCertLifetime',
    doc: { flag: '--hop-cert-lifetime DAYS' },
  },
  {
    flags: '--hop-grace <seconds>',
    help: 'how long an exit accepts the replaced fleet secret after `proxyd admin fleet rotate-secret`',
    env: 'PROXYD_HOP_GRACE',
    default: 'hopGrace',
    doc: { flag: '--hop-grace SECONDS' },
  },
  {
    flags: '--ip-replacements <n>',
    help: 'dedicated addresses a customer may replace per calendar month',
    env: 'PROXYD_IP_REPLACEMENTS',
    default: 'ipReplacements',
    doc: { flag: '--ip-replacements N' },
  },
  {
    flags: '--ip-quarantine <days>',
    help: 'how long a replaced dedicated address is kept from every account and the shared rotation',
    env: 'PROXYD_IP_QUARANTINE',
    default: 'ipQuarantine',
    doc: { flag: '--ip-quarantine DAYS' },
  },
  {
    flags: '--node-name <name>',
    help: "this node's name in the connection log (default: the host name)",
    env: 'PROXYD_NODE_NAME',
    doc: { flag: '--node-name NAME', none: 'the host name' },
  },
  {
    flags: '--connection-log-retention <duration>',
    help: 'how long connection-log records are kept, e.g. 7d, 48h; 0 turns the log off',
    env: 'PROXYD_CONNECTION_LOG_RETENTION',
    default: 'connectionLogRetention',
    doc: { flag: '--connection-log-retention D' },
  },
  {
    flags: '--audit-retention <duration>',
    help: 'how long audit records are kept, e.g. 400d, 2y (at least 1d); the chains stay verifiable',
    env: 'PROXYD_AUDIT_RETENTION',
    default: 'auditRetention',
    doc: { flag: '--audit-retention D' },
  },
  {
    flags: '--public-host <host>',
    help: "the host customers reach the gateway at, as GET /openapi/v1/proxy/gateway names it (default: the listen addresses' host)",
    env: 'PROXYD_PUBLIC_HOST',
    doc: { flag: '--public-host HOST', none: "none (the listen addresses' host)" },
  },
  {
    flags: '--console-origin <origin>',
    help: "the console's public origin for passkeys (https://console.example.com); default: the host each browser reached",
    env: 'PROXYD_CONSOLE_ORIGIN',
    doc: { flag: '--console-origin URL', none: 'none (the host each browser reached)' },
  },
  {
    flags: '--connection-log-sink <sink>',
    help: 'where connection-log records go: db, jsonl:PATH (reopened on SIGHUP), stdout or off',
    env: 'PROXYD_CONNECTION_LOG_SINK',
    default: 'connectionLogSink',
    doc: { flag: '--connection-log-sink S' },
  },
  {
    flags: '--udp-ports <lo-hi>',
    help: 'SOCKS5 UDP ASSOCIATE relay ports',
    env: 'PROXYD_UDP_PORTS',
    default: 'udpPorts',
    doc: { flag: '--udp-ports LO-HI' },
  },
  {
    flags: '--udp-idle <seconds>',
    help: 'a UDP association ends this long after its last datagram',
    env: 'PROXYD_UDP_IDLE',
    default: 'udpIdle',
    doc: { flag: '--udp-idle SECONDS' },
  },
  {
    flags: '--udp-max-associations <n>',
    help: 'UDP associations open at most on this node',
    env: 'PROXYD_UDP_MAX_ASSOCIATIONS',
    default: 'udpMaxAssociations',
    doc: { flag: '--udp-max-associations N' },
  },
  {
    flags: '--connection-log-max-size <size>',
    help: "the database connection log's size on disk at most (20GiB, 500MB; oldest days dropped first) or none",
    env: 'PROXYD_CONNECTION_LOG_MAX_SIZE',
    default: 'connectionLogMaxSize',
    doc: { flag: '--connection-log-max-size SIZE' },
  },
  {
    flags: '--usage-retention <spec>',
    help: 'how long usage buckets are kept, e.g. minute=48h,hour=90d,day=2y',
    env: 'PROXYD_USAGE_RETENTION',
    default: 'usageRetention',
    doc: { flag: '--usage-retention SPEC' },
  },
  {
    flags: '--key-limits <reads,writes>',
    help: 'requests per API key per rolling 60 s: reads,writes',
    env: 'PROXYD_KEY_LIMITS',
    default: 'keyLimits',
    doc: { flag: '--key-limits READS,WRITES' },
  },
  {
    flags: '--rate-limits <spec>',
    help: 'override API limits, e.g. list=60,add=10,delete=10,usage=60,invalid=20',
    env: 'PROXYD_RATE_LIMITS',
    hidden: true,
    doc: { flag: '--rate-limits SPEC' },
  },
  {
    flags: '--log-level <level>',
    help: 'log level',
    env: 'PROXYD_LOG_LEVEL',
    default: 'logLevel',
    choices: LOG_LEVELS,
    doc: { flag: '--log-level L' },
  },
];

/** A flag's row in the docs tables: flag, env and default cells (the meaning cell is each document's own). */
export function docCells(f: ServeFlag): [string, string, string] {
  const env = f.boolean ? `\`${f.env}=1\`` : `\`${f.env}\``;
  const def = f.default ? `\`${SERVE_DEFAULTS[f.default]}\`` : (f.doc.none ?? 'none');
  return [`\`${f.doc.flag}\``, env, def];
}
