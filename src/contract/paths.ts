// URL paths of the whitelist API (docs/api.md) and the daemon's other endpoints.
export const API_PATHS = {
  list: '/openapi/v1/proxy/whitelist/list',
  add: '/openapi/v1/proxy/whitelist/add',
  delete: '/openapi/v1/proxy/whitelist/delete',
} as const;

export type ApiRoute = keyof typeof API_PATHS;

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
export const DEFAULT_PAGE_SIZE = 20;

/** Per-token limits per rolling 60 s (docs/api.md Limits). */
export const RATE_LIMITS: Record<ApiRoute, number> = { list: 60, add: 10, delete: 10 };
export const INVALID_TOKEN_LIMIT = 20;
export const RATE_WINDOW_MS = 60_000;
