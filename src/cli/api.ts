// The API client (docs/api.md) on Node's own http/https (no HTTP library to load: start-up is
// most of a command's time): envelopes decoded with the contract's zod schemas. The credential decides where it
// goes: an account token only in the `api_key` query parameter (the whitelist), an API key (`pxk_…`) only in
// `Authorization: Bearer` (every other endpoint); neither ever in an error message.
import http from 'node:http';
import https from 'node:https';
import {
  API_KEY_PARAM,
  API_PATHS,
  BatchResultSchema,
  Code,
  EnvelopeSchema,
  ListDataSchema,
  USAGE_PATHS,
  UsageDomainsDataSchema,
  UsageSeriesDataSchema,
  UsageSummaryDataSchema,
  type BatchResult,
  type ListData,
  type UsageDomainsData,
  type UsageSeriesData,
  type UsageSummaryData,
} from '../contract/index.js';
import { scrubSecrets } from './errors.js';
import { isApiKeyShaped } from './key-format.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** One answer of the customer API with a success code (200, or 10431 for a batch). */
export interface Envelope {
  code: number;
  message: string;
  requestId: string;
  data: unknown;
}

export interface RequestOptions {
  query?: Record<string, string | undefined>;
  body?: unknown;
  /** Sent as `Idempotency-Key` (writes of the customer API). */
  idempotencyKey?: string;
}

type ApiErrorKind = 'http' | 'network' | 'timeout' | 'bad_response';

/** A failed API call: business code and request id when the server answered; never carries the token. */
export class ApiError extends Error {
  readonly kind: ApiErrorKind;
  readonly code: number | undefined;
  readonly httpStatus: number | undefined;
  readonly requestId: string | undefined;
  readonly retryAfterMs: number | undefined;
  /** A network error's system code (ECONNREFUSED, …). */
  readonly errno: string | undefined;
  constructor(
    kind: ApiErrorKind,
    message: string,
    extra: { code?: number; httpStatus?: number; requestId?: string; retryAfterMs?: number; errno?: string } = {},
  ) {
    super(message);
    this.name = 'ApiError';
    this.kind = kind;
    this.code = extra.code;
    this.httpStatus = extra.httpStatus;
    this.requestId = extra.requestId;
    this.retryAfterMs = extra.retryAfterMs;
    this.errno = extra.errno;
  }
  /** Message plus code and request id in one trailing parenthesis (docs/cli.md, "Error messages"). */
  describe(): string {
    return `${this.message}${this.refs()}`;
  }

  /** ` (code …, request id …)` when the API answered, else '': what ends every error line about an answer. */
  refs(): string {
    const refs = [
      this.code !== undefined && this.kind === 'http' ? `code ${this.code}` : '',
      this.requestId ? `request id ${this.requestId}` : '',
    ].filter(Boolean);
    return refs.length ? ` (${refs.join(', ')})` : '';
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

interface AddItem {
  ip: string;
  remark?: string;
}

/** The usage endpoints' query parameters, as the API takes them (docs/api.md, "Usage"). */
export interface UsageParams {
  from?: string;
  to?: string;
  user?: string;
  granularity?: 'hour' | 'day';
  limit?: number;
}

/** What commands need of the API; the batch engine and tests use this interface. */
export interface WhitelistApi {
  list(params: ListParams): Promise<{ requestId: string; data: ListData }>;
  add(items: AddItem[]): Promise<BatchResponse>;
  delete(ips: string[]): Promise<BatchResponse>;
  usageSummary(params: UsageParams): Promise<UsageSummaryData>;
  usageSeries(params: UsageParams & { granularity: 'hour' | 'day' }): Promise<UsageSeriesData>;
  usageDomains(params: UsageParams): Promise<UsageDomainsData>;
  /** Any endpoint: the envelope of a 200 or 10431 answer; anything else is an ApiError. */
  request(method: HttpMethod, path: string, opts?: RequestOptions): Promise<Envelope>;
  close(): Promise<void>;
}

interface ApiClientOptions {
  baseUrl: string;
  /** An account token (`ak….…`, sent as api_key) or an API key (`pxk_…`, sent as a Bearer credential). */
  token: string;
  /** Per request: connect, headers and body each. */
  timeoutMs?: number;
  userAgent?: string;
}

const DEFAULT_TIMEOUT_MS = 30_000;

interface RawResponse {
  statusCode: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

class TimeoutError extends Error {
  readonly code = 'ETIMEDOUT';
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
  readonly #agent: http.Agent;

  constructor(opts: ApiClientOptions) {
    this.#baseUrl = opts.baseUrl.replace(/\/+$/, '');
    this.#token = opts.token;
    this.#timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#userAgent = opts.userAgent ?? 'proxyctl';
    const Agent = this.#baseUrl.startsWith('https:') ? https.Agent : http.Agent;
    // Keep-alive: a batch run sends its requests over one connection.
    this.#agent = new Agent({ keepAlive: true, maxSockets: 1, timeout: this.#timeoutMs });
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
    if (!data.success)
      throw new ApiError('bad_response', 'the API returned a list in an unexpected shape', {
        requestId: env.requestId,
        httpStatus: 200,
      });
    return { requestId: env.requestId, data: data.data };
  }

  add(items: AddItem[]): Promise<BatchResponse> {
    return this.#batch(API_PATHS.add, { items });
  }

  usageSummary(params: UsageParams): Promise<UsageSummaryData> {
    return this.#read(USAGE_PATHS.summary, params, UsageSummaryDataSchema, 'a usage summary');
  }

  usageSeries(params: UsageParams & { granularity: 'hour' | 'day' }): Promise<UsageSeriesData> {
    return this.#read(USAGE_PATHS.series, params, UsageSeriesDataSchema, 'a usage series');
  }

  usageDomains(params: UsageParams): Promise<UsageDomainsData> {
    return this.#read(USAGE_PATHS.domains, params, UsageDomainsDataSchema, 'usage per domain');
  }

  async #read<T>(
    path: string,
    params: UsageParams,
    schema: { safeParse(v: unknown): { success: true; data: T } | { success: false } },
    what: string,
  ): Promise<T> {
    const q: Record<string, string> = {};
    for (const [k, v] of Object.entries(params)) if (v !== undefined) q[k] = String(v);
    const env = await this.#call('GET', path, q);
    if (env.code !== Code.OK) throw this.#codeError(env.code, env.message, env.requestId, 200);
    const data = schema.safeParse(env.data);
    if (!data.success)
      throw new ApiError('bad_response', `the API returned ${what} in an unexpected shape`, {
        requestId: env.requestId,
        httpStatus: 200,
      });
    return data.data;
  }

  delete(ips: string[]): Promise<BatchResponse> {
    return this.#batch(API_PATHS.delete, { ips });
  }

  async request(method: HttpMethod, path: string, opts: RequestOptions = {}): Promise<Envelope> {
    const q: Record<string, string> = {};
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) q[k] = v;
    const env = await this.#call(method, path, q, opts.body, opts.idempotencyKey);
    if (env.code !== Code.OK && env.code !== Code.PARTIAL)
      throw this.#codeError(env.code, env.message, env.requestId, 200);
    return {
      code: env.code,
      message: scrubSecrets(env.message, [this.#token]),
      requestId: env.requestId,
      data: env.data,
    };
  }

  async close(): Promise<void> {
    this.#agent.destroy();
  }

  async #batch(path: string, body: unknown): Promise<BatchResponse> {
    const env = await this.#call('POST', path, {}, body);
    if (env.code !== Code.OK && env.code !== Code.PARTIAL)
      throw this.#codeError(env.code, env.message, env.requestId, 200);
    const data = BatchResultSchema.safeParse(env.data);
    if (!data.success)
      throw new ApiError('bad_response', 'the API returned a batch result in an unexpected shape', {
        requestId: env.requestId,
        httpStatus: 200,
      });
    // Server text is shown as is, minus anything that looks like our token: the items' reasons too.
    const tokens = [this.#token];
    const failed = data.data.failed_items.map((f) => ({ ...f, reason: scrubSecrets(f.reason, tokens) }));
    return {
      code: env.code,
      message: scrubSecrets(env.message, tokens),
      requestId: env.requestId,
      data: { ...data.data, failed_items: failed },
    };
  }

  #codeError(code: number, message: string, requestId: string, httpStatus: number, retryAfterMs?: number): ApiError {
    // Server text is shown as is, minus anything that looks like our token.
    const safe = scrubSecrets(message, [this.#token]);
    return new ApiError('http', safe, {
      code,
      httpStatus,
      requestId,
      ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
    });
  }

  async #call(
    method: HttpMethod,
    path: string,
    query: Record<string, string>,
    body?: unknown,
    idempotencyKey?: string,
  ) {
    const url = new URL(this.#baseUrl + path);
    for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
    const bearer = isApiKeyShaped(this.#token);
    if (!bearer) url.searchParams.set(API_KEY_PARAM, this.#token);
    const headers: Record<string, string> = {};
    if (bearer) headers.authorization = `Bearer ${this.#token}`;
    if (idempotencyKey !== undefined) headers['idempotency-key'] = idempotencyKey;
    let res: RawResponse;
    try {
      res = await this.#send(url, method, body !== undefined ? JSON.stringify(body) : undefined, headers);
    } catch (err) {
      throw this.#networkError(err);
    }
    const requestIdHeader = res.headers['x-request-id'];
    const headerId = Array.isArray(requestIdHeader) ? requestIdHeader[0] : requestIdHeader;
    const text = res.text;
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
      const code =
        res.statusCode === 429 ? Code.RATE_LIMITED : res.statusCode === 401 ? Code.INVALID_API_KEY : undefined;
      // 407 comes from a proxy, never from the API: most likely --base-url names the gateway's port.
      const moved =
        res.statusCode >= 300 && res.statusCode < 400 ? redirectTarget(url, path, res.headers.location) : undefined;
      const what =
        res.statusCode === 407
          ? `HTTP 407 Proxy Authentication Required from ${safeOrigin(this.#baseUrl)}: this looks like the proxy port, not the API; use the API address (proxyd --api-listen, default 127.0.0.1:8080) as --base-url`
          : moved
            ? scrubSecrets(
                `HTTP ${res.statusCode} redirect to ${moved.shown}: proxyctl does not follow redirects (${bearer ? 'the API key would go to another server' : 'the token is in the URL'})${moved.baseUrl !== undefined ? `; use --base-url ${moved.baseUrl}` : ''}`,
                [this.#token],
              )
            : notProxydAnswer(res.statusCode, safeOrigin(this.#baseUrl));
      return Promise.reject(
        new ApiError(code !== undefined ? 'http' : 'bad_response', what, {
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

  /** One request; the timeout covers the connect and every wait for bytes (socket idle). */
  #send(
    url: URL,
    method: HttpMethod,
    body: string | undefined,
    extraHeaders: Record<string, string> = {},
  ): Promise<RawResponse> {
    return new Promise((resolve, reject) => {
      const request = url.protocol === 'https:' ? https.request : http.request;
      const req = request(url, {
        method,
        agent: this.#agent,
        headers: {
          accept: 'application/json',
          'user-agent': this.#userAgent,
          ...extraHeaders,
          ...(body !== undefined
            ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }
            : {}),
        },
        timeout: this.#timeoutMs,
      });
      req.once('timeout', () => req.destroy(new TimeoutError(`no answer within ${this.#timeoutMs} ms`)));
      req.once('error', reject);
      req.once('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.once('error', reject);
        res.once('aborted', () => reject(Object.assign(new Error('response aborted'), { code: 'ECONNRESET' })));
        res.once('end', () =>
          resolve({
            statusCode: res.statusCode ?? 0,
            headers: res.headers,
            text: Buffer.concat(chunks).toString('utf8'),
          }),
        );
      });
      req.end(body);
    });
  }

  #networkError(err: unknown): ApiError {
    const e = err as { code?: string; message?: string; name?: string };
    const timeout = typeof e.code === 'string' && /TIMEOUT|TIMEDOUT/i.test(e.code);
    const detail = scrubSecrets(e.code ?? e.message ?? String(err), [this.#token]);
    const where = safeOrigin(this.#baseUrl);
    return new ApiError(
      timeout ? 'timeout' : 'network',
      timeout ? `timed out talking to ${where} (${detail})` : `cannot reach ${where} (${detail})`,
      {
        ...(typeof e.code === 'string' ? { errno: e.code } : {}),
      },
    );
  }
}

/**
 * Where a redirect points, without its query or fragment (a redirect often echoes the request's, api_key
 * included), and the base URL it implies when it keeps the endpoint's path (http:// to https://, a moved API).
 */
function redirectTarget(
  requestUrl: URL,
  path: string,
  location: string | undefined,
): { shown: string; baseUrl?: string } | undefined {
  if (!location) return undefined;
  let u: URL;
  try {
    u = new URL(location, requestUrl);
  } catch {
    return undefined;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return undefined;
  const origin = `${u.protocol}//${u.host}`;
  if (u.pathname.endsWith(path)) {
    const baseUrl = origin + u.pathname.slice(0, -path.length).replace(/\/+$/, '');
    return { shown: baseUrl, baseUrl };
  }
  return { shown: origin + (u.pathname === '/' ? '' : u.pathname) };
}

/** Origin and path of a URL with nothing secret in it. */
function safeOrigin(baseUrl: string): string {
  try {
    const u = new URL(baseUrl);
    return `${u.protocol}//${u.host}${u.pathname === '/' ? '' : u.pathname}`;
  } catch {
    return 'the API';
  }
}

/**
 * Whether the server may have carried out a request that ended in this error: it answered 500, or the answer never
 * came (a timeout, a connection cut after the request went). Not when the request never left (the connection was
 * refused, the name did not resolve) or the server says it executed nothing (10503, 429, 401).
 */
export function mayHaveApplied(err: ApiError): boolean {
  if (err.kind === 'timeout') return true;
  if (err.kind === 'network') return err.errno === undefined || !NEVER_SENT.has(err.errno);
  // Not the API's envelope: a proxy's 5xx (the request may have gone on), or a success whose body we cannot read.
  if (err.kind === 'bad_response')
    return err.httpStatus === undefined || err.httpStatus >= 500 || (err.httpStatus >= 200 && err.httpStatus < 300);
  // An answer with its code says what the API did: only a system failure may have applied part of it.
  if (err.code === Code.LIMITER_UNAVAILABLE || err.code === Code.RATE_LIMITED || err.code === Code.INVALID_API_KEY)
    return false;
  return err.code === Code.SYSTEM || (err.httpStatus !== undefined && err.httpStatus >= 500);
}
/** Network errors that mean the request was never sent. */
const NEVER_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL']);

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

/**
 * An answer without proxyd's envelope, said so: a 5xx most likely from something in front of the API (retried as
 * such), anything else from a server that is not proxyd's API at all: the base URL names another server or port.
 */
function notProxydAnswer(status: number, origin: string): string {
  if (status >= 500)
    return `HTTP ${status} from ${origin} without proxyd's JSON envelope: a proxy or load balancer in front of the API answered, or --base-url names another server`;
  return `HTTP ${status} from ${origin} does not look like proxyd's API (no JSON envelope {"code","message","requestId","data"}): --base-url (or PROXYCTL_BASE_URL) must be the address proxyd serves its API on (--api-listen, default http://127.0.0.1:8080)`;
}
