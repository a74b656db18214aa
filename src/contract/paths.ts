// URL paths of the whitelist API (docs/api.md) and the daemon's other endpoints.
export const API_PATHS = {
  list: '/openapi/v1/proxy/whitelist/list',
  add: '/openapi/v1/proxy/whitelist/add',
  delete: '/openapi/v1/proxy/whitelist/delete',
} as const;

export type ApiRoute = keyof typeof API_PATHS;

/** The read-only usage endpoints (docs/api.md Usage), under the same token and envelope. */
export const USAGE_PATHS = {
  summary: '/openapi/v1/usage/summary',
  series: '/openapi/v1/usage/series',
  domains: '/openapi/v1/usage/domains',
} as const;

export type UsageRoute = keyof typeof USAGE_PATHS;

/** The customer API's proxy users, target rules and gateway endpoints (docs/api.md, "Proxy users"), under an API key. */
export const PROXY_PATHS = {
  users: '/openapi/v1/proxy/users',
  usersBatch: '/openapi/v1/proxy/users/batch',
  user: '/openapi/v1/proxy/users/:username',
  userPassword: '/openapi/v1/proxy/users/:username/password',
  rules: '/openapi/v1/proxy/rules',
  gateway: '/openapi/v1/proxy/gateway',
} as const;

/** The header a write may carry to be sent again safely, and the one a replayed answer has (docs/api.md, "Idempotency"). */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
export const IDEMPOTENT_REPLAYED_HEADER = 'idempotent-replayed';

/** The customer's audit log (docs/api.md, "Audit log"): an API key with `audit:read`. */
export const AUDIT_PATH = '/openapi/v1/audit';

/** Dedicated egress addresses (docs/api.md, "Dedicated addresses"). */
export const IPS_PATHS = {
  list: '/openapi/v1/proxy/ips',
  replace: '/openapi/v1/proxy/ips/replace',
} as const;

/** A per-token limit's name: each whitelist route has its own; the three usage routes share `usage`. */
export type LimitedRoute = ApiRoute | 'usage';

/** At most this many points in one series answer. */
export const MAX_SERIES_POINTS = 1_000;
export const DEFAULT_DOMAINS_LIMIT = 100;
export const MAX_DOMAINS_LIMIT = 1_000;

export const DAEMON_PATHS = {
  healthz: '/healthz',
  metrics: '/metrics',
  ip: '/ip',
  openapi: '/openapi.json',
  console: '/console/',
} as const;

export const API_KEY_PARAM = 'api_key';
export const MAX_BATCH_ITEMS = 100;
export const MAX_BODY_BYTES = 256 * 1024;
export const MAX_PAGE_SIZE = 100;
/** The highest `page` the list endpoint takes (nine digits). */
export const MAX_PAGE = 999_999_999;
export const DEFAULT_PAGE_SIZE = 20;

/** Per-token limits per rolling 60 s (docs/api.md Limits). */
export const RATE_LIMITS: Record<LimitedRoute, number> = { list: 60, add: 10, delete: 10, usage: 60 };
export const INVALID_TOKEN_LIMIT = 20;
/** Per API key per rolling 60 s (docs/api.md Limits; `proxyd serve --key-limits READS,WRITES`). */
export const KEY_LIMITS = { reads: 120, writes: 30 } as const;
export const RATE_WINDOW_MS = 60_000;
