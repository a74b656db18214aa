// Business codes (docs/api.md Codes): the one place errors get their code, HTTP status and wording.
import { MAX_BATCH_ITEMS } from './paths.js';

export const Code = {
  OK: 200,
  PARTIAL: 10431,
  INVALID_PARAMS: 10400,
  TOO_MANY_ITEMS: 10413,
  INVALID_API_KEY: 10401,
  NOT_VERIFIED: 10403,
  /** The API key lacks the endpoint's scope (same code as NOT_VERIFIED: 403, the caller may not do this). */
  MISSING_SCOPE: 10403,
  NOT_FOUND: 10404,
  METHOD_NOT_ALLOWED: 10405,
  /** The customer API: taken (a username), or an Idempotency-Key used with another request. */
  CONFLICT: 10409,
  RATE_LIMITED: 10429,
  SYSTEM: 10500,
  LIMITER_UNAVAILABLE: 10503,
  // item codes
  ALREADY_LISTED: 10425,
  NO_SUCH_WHITELIST: 10426,
  IP_UNAVAILABLE: 10427,
  INVALID_IPV4: 10420,
  NOT_PUBLIC: 10421,
  MAINLAND_CHINA: 10422,
  REMARK_TOO_LONG: 10423,
} as const;

/** Codes an item can fail with inside `failed_items`. */
// eslint-disable-next-line @typescript-eslint/no-unused-vars -- a value only to name the ItemCode type
const ITEM_CODES = [10420, 10421, 10422, 10423, 10425, 10426, 10427, 10500] as const;
export type ItemCode = (typeof ITEM_CODES)[number];

/** Item codes worth resending alone. */
export const RETRYABLE_ITEM_CODES: ReadonlySet<number> = new Set([10500]);

export const ITEM_REASON: Record<ItemCode, string> = {
  10420: 'not a valid IPv4 address',
  10421: 'not a public IPv4 address',
  10422: 'IP address in mainland China is not allowed',
  10423: 'remark longer than 255 characters',
  10425: 'IP already in your whitelist',
  10426: 'whitelist does not exist',
  10427: 'IP unavailable',
  10500: 'temporary failure, retry this item',
};

/** HTTP status for each top-level code. */
export const HTTP_STATUS: Record<number, number> = {
  200: 200,
  10431: 200,
  10400: 200,
  10413: 200,
  10401: 401,
  10403: 403,
  10404: 404,
  10405: 405,
  10409: 409,
  10429: 429,
  10500: 500,
  10503: 503,
};

export const TOP_MESSAGE: Record<number, string> = {
  200: 'success',
  10400: 'invalid parameters',
  10413: `too many items (at most ${MAX_BATCH_ITEMS})`,
  10401: 'invalid api key',
  10403: 'account is not real-name verified',
  10404: 'not found',
  10405: 'method not allowed',
  10409: 'conflict',
  10429: 'rate limited',
  10500: 'system error',
  10503: 'rate limit service unavailable',
};

/** An error as a value: a business code plus a message safe to show (never carries a secret). */
export class BusinessError extends Error {
  readonly code: number;
  readonly httpStatus: number;
  readonly retryAfterSeconds: number | undefined;
  constructor(code: number, message?: string, opts?: { retryAfterSeconds?: number }) {
    super(message ?? TOP_MESSAGE[code] ?? 'error');
    this.name = 'BusinessError';
    this.code = code;
    this.httpStatus = HTTP_STATUS[code] ?? 500;
    this.retryAfterSeconds = opts?.retryAfterSeconds;
  }
}

export function partialMessage(success: number, failed: number): string {
  return `${success} succeeded, ${failed} failed`;
}
