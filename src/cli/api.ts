// The whitelist API client (SPEC 3) on undici: envelopes decoded with the contract's zod schemas,
// the token only in the `api_key` query parameter, and never in an error message.
import { createRequire } from 'node:module';
import type { Agent as UndiciAgent, Dispatcher } from 'undici';
import {
  API_KEY_PARAM,
  API_PATHS,
  BatchResultSchema,
  Code,
  EnvelopeSchema,
  ListDataSchema,
  type BatchResult,
  type ListData,
} from '../contract/index.js';
import { scrubSecrets } from './errors.js';

export type ApiErrorKind = 'http' | 'network' | 'timeout' | 'bad_response';

/** A failed API call: business code and request id when the server answered; never carries the token. */
export class ApiError extends Error {
  readonly kind: ApiErrorKind;
  readonly code: number | undefined;
  readonly httpStatus: number | undefined;
  readonly requestId: string | undefined;
  readonly retryAfterMs: number | undefined;
  constructor(
    kind: ApiErrorKind,
    message: string,
    extra: { code?: number; httpStatus?: number; requestId?: string; retryAfterMs?: number } = {},
  ) {
    super(message);
    this.name = 'ApiError';
    this.kind = kind;
    this.code = extra.code;
    this.httpStatus = extra.httpStatus;
    this.requestId = extra.requestId;
    this.retryAfterMs = extra.retryAfterMs;
  }
  /** Message plus request id, for the user. */
  describe(): string {
    return this.requestId ? `${this.message} (request id ${this.requestId})` : this.message;
  }
}

export interface BatchResponse {
  code: 200 | 10431;
  message: string;
  requestId: string;
  data: BatchResult;
}

export interface ListParams {
  page?: number;
  page_size?: number;
  status?: 'all' | 'active' | 'disabled';
  ip?: string;
}

export interface AddItem {
  ip: string;
  remark?: string;
}

/** What commands need of the API; the batch engine and tests use this interface. */
export interface WhitelistApi {
  list(params: ListParams): Promise<{ requestId: string; data: ListData }>;
  add(items: AddItem[]): Promise<BatchResponse>;
  delete(ips: string[]): Promise<BatchResponse>;
  close(): Promise<void>;
}

export interface ApiClientOptions {
  baseUrl: string;
  token: string;
  /** Per request: connect, headers and body each. */
  timeoutMs?: number;
  userAgent?: string;
}

export const DEFAULT_TIMEOUT_MS = 30_000;

interface Transport {
  Agent: typeof UndiciAgent;
  request(dispatcher: Dispatcher, opts: Dispatcher.RequestOptions): Promise<Dispatcher.ResponseData>;
}

let transport: Transport | undefined;

/**
 * undici's Agent and its `request` API, loaded as the two modules they are rather than through
 * undici's index (~110 modules with fetch, websocket, mocks, caches): 60 ms less per command
 * (docs/BENCHMARKS.md, CLI). Falls back to the index if a future undici moves them.
 */
export function loadTransport(): Transport {
  if (transport) return transport;
  const require = createRequire(import.meta.url);
  try {
    const Agent = require('undici/lib/dispatcher/agent') as typeof UndiciAgent;
    const request = require('undici/lib/api/api-request') as (this: Dispatcher, opts: Dispatcher.RequestOptions) => Promise<Dispatcher.ResponseData>;
    if (typeof Agent === 'function' && typeof request === 'function') {
      transport = { Agent, request: (d, opts) => request.call(d, opts) };
      return transport;
    }
  } catch {
    // fall through to the public entry point
  }
  const undici = require('undici') as typeof import('undici');
  transport = { Agent: undici.Agent, request: (d, opts) => d.request(opts) };
  return transport;
}

/** Parses `Retry-After` (delta seconds or HTTP date) into milliseconds. */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined || v.trim() === '') return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : Math.max(0, t - now);
}

export class ApiClient implements WhitelistApi {
  readonly #baseUrl: string;
  readonly #token: string;
  readonly #timeoutMs: number;
  readonly #userAgent: string;
  readonly #agent: UndiciAgent;
  readonly #transport: Transport;

  constructor(opts: ApiClientOptions) {
    this.#baseUrl = opts.baseUrl.replace(/\/+$/, '');
    this.#token = opts.token;
    this.#timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#userAgent = opts.userAgent ?? 'proxyctl';
    this.#transport = loadTransport();
    this.#agent = new this.#transport.Agent({
      connect: { timeout: this.#timeoutMs },
      headersTimeout: this.#timeoutMs,
      bodyTimeout: this.#timeoutMs,
      keepAliveTimeout: 10_000,
    });
  }

  async list(params: ListParams): Promise<{ requestId: string; data: ListData }> {
    const q: Record<string, string> = {};
    if (params.page !== undefined) q.page = String(params.page);
    if (params.page_size !== undefined) q.page_size = String(params.page_size);
    if (params.status !== undefined) q.status = params.status;
    if (params.ip !== undefined) q.ip = params.ip;
    const env = await this.#call('GET', API_PATHS.list, q);
    if (env.code !== Code.OK) throw this.#codeError(env.code, env.message, env.requestId, 200);
    const data = ListDataSchema.safeParse(env.data);
    if (!data.success) throw new ApiError('bad_response', 'the API returned a list in an unexpected shape', { requestId: env.requestId, httpStatus: 200 });
    return { requestId: env.requestId, data: data.data };
  }

  add(items: AddItem[]): Promise<BatchResponse> {
    return this.#batch(API_PATHS.add, { items });
  }

  delete(ips: string[]): Promise<BatchResponse> {
    return this.#batch(API_PATHS.delete, { ips });
  }

  async close(): Promise<void> {
    await this.#agent.close();
  }

  async #batch(path: string, body: unknown): Promise<BatchResponse> {
    const env = await this.#call('POST', path, {}, body);
    if (env.code !== Code.OK && env.code !== Code.PARTIAL) throw this.#codeError(env.code, env.message, env.requestId, 200);
    const data = BatchResultSchema.safeParse(env.data);
    if (!data.success) throw new ApiError('bad_response', 'the API returned a batch result in an unexpected shape', { requestId: env.requestId, httpStatus: 200 });
    return { code: env.code, message: env.message, requestId: env.requestId, data: data.data };
  }

  #codeError(code: number, message: string, requestId: string, httpStatus: number, retryAfterMs?: number): ApiError {
    // Server text is shown as is, minus anything that looks like our token.
    const safe = scrubSecrets(message, [this.#token]);
    return new ApiError('http', `${safe} [code ${code}]`, { code, httpStatus, requestId, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) });
  }

  async #call(method: 'GET' | 'POST', path: string, query: Record<string, string>, body?: unknown) {
    const url = new URL(this.#baseUrl + path);
    for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
    url.searchParams.set(API_KEY_PARAM, this.#token);
    let res: Dispatcher.ResponseData;
    try {
      res = await this.#transport.request(this.#agent, {
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method,
        headers: {
          accept: 'application/json',
          'user-agent': this.#userAgent,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        headersTimeout: this.#timeoutMs,
        bodyTimeout: this.#timeoutMs,
      });
    } catch (err) {
      throw this.#networkError(err);
    }
    const requestIdHeader = res.headers['x-request-id'];
    const headerId = Array.isArray(requestIdHeader) ? requestIdHeader[0] : requestIdHeader;
    let text: string;
    try {
      text = await res.body.text();
    } catch (err) {
      throw this.#networkError(err);
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    const env = EnvelopeSchema.safeParse(json);
    const retryAfterMs = parseRetryAfter(res.headers['retry-after']);
    if (!env.success) {
      // Not an envelope: a proxy or load balancer answered. Keep the HTTP status so 5xx/429 stay retryable.
      const code = res.statusCode === 429 ? Code.RATE_LIMITED : res.statusCode === 401 ? Code.INVALID_API_KEY : undefined;
      return Promise.reject(
        new ApiError(code !== undefined ? 'http' : 'bad_response', `unexpected response from the API: HTTP ${res.statusCode}`, {
          httpStatus: res.statusCode,
          ...(code !== undefined ? { code } : {}),
          ...(headerId ? { requestId: headerId } : {}),
          ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
        }),
      );
    }
    const e = env.data;
    if (res.statusCode !== 200) throw this.#codeError(e.code, e.message, e.requestId, res.statusCode, retryAfterMs);
    return e;
  }

  #networkError(err: unknown): ApiError {
    const e = err as { code?: string; message?: string; name?: string };
    const timeout = typeof e.code === 'string' && /TIMEOUT/i.test(e.code);
    const detail = scrubSecrets(e.code ?? e.message ?? String(err), [this.#token]);
    const where = safeOrigin(this.#baseUrl);
    return new ApiError(timeout ? 'timeout' : 'network', timeout ? `timed out talking to ${where} (${detail})` : `cannot reach ${where} (${detail})`);
  }
}

/** Origin and path of a URL with nothing secret in it. */
export function safeOrigin(baseUrl: string): string {
  try {
    const u = new URL(baseUrl);
    return `${u.protocol}//${u.host}${u.pathname === '/' ? '' : u.pathname}`;
  } catch {
    return 'the API';
  }
}

/** True when the error means "the token was rejected". */
export function isAuthError(err: unknown): err is ApiError {
  return err instanceof ApiError && (err.code === Code.INVALID_API_KEY || err.httpStatus === 401);
}

export function isRateLimited(err: unknown): err is ApiError {
  return err instanceof ApiError && (err.code === Code.RATE_LIMITED || err.httpStatus === 429);
}

/** Server or network trouble after which the same request may be sent again. */
export function isTransient(err: unknown): err is ApiError {
  if (!(err instanceof ApiError)) return false;
  if (err.kind === 'network' || err.kind === 'timeout') return true;
  if (err.code === Code.SYSTEM || err.code === Code.LIMITER_UNAVAILABLE) return true;
  return err.httpStatus !== undefined && err.httpStatus >= 500;
}
