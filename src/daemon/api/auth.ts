// api_key authentication and the limits that guard it (docs/api.md Authentication, Limits), run before the body is read.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Code } from '../../contract/codes.js';
import { API_KEY_PARAM, type LimitedRoute } from '../../contract/paths.js';
import { parseToken } from '../../contract/token.js';
import { badTokenKey, tokenRouteKey, type ApiLimits } from '../ratelimit/api-limits.js';
import { LimiterUnavailableError } from '../ratelimit/limiter.js';
import { secretMatches, sha256 } from '../secrets.js';
import type { ListFilter, Store, WhitelistPage } from '../store/index.js';
import type { AuditContext } from '../services/audit.js';
import { sendEnvelope } from './envelope.js';
import { sourceIp, sourceLimitKey } from '../services/source-ip.js';

interface ApiCaller {
  accountId: number;
  accessKey: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    caller?: ApiCaller;
    /** Which limit refused the request, for the rate-limit metric. */
    limitedBy?: 'token' | 'source_ip' | 'key';
    /** A list call's page, read in the same round trip as its admission. */
    prefetchedPage?: WhitelistPage;
  }
}

/**
 * Who acts in an authenticated API call, for its audit record: the token by its access key (never the token), from
 * the caller's address, in this request. An endpoint authenticated by an API key names `{ type: 'key', id: <key id> }`.
 */
export function callerAudit(request: FastifyRequest): AuditContext {
  return {
    actor: { type: 'token', id: request.caller!.accessKey },
    sourceIp: sourceIp(request),
    requestId: request.id,
  };
}

/** The raw query string of a request (never logged). */
export function rawQuery(request: FastifyRequest): string {
  const q = request.raw.url?.indexOf('?') ?? -1;
  return q >= 0 ? request.raw.url!.slice(q + 1) : '';
}

// Syntactically valid but never issued: unknown and malformed keys do the same lookup and hash work.
const DUMMY_ACCESS_KEY = 'ak00000000000000000000';

/** The one `api_key` value, parsed; null when it is missing, repeated or malformed. */
function presentedToken(query: URLSearchParams) {
  const values = query.getAll(API_KEY_PARAM);
  return values.length === 1 ? parseToken(values[0]!) : null;
}

/** Resolves `api_key` to a caller, or null for every failure cause alike. */
export async function authenticate(store: Store, query: URLSearchParams, nowSec: number): Promise<ApiCaller | null> {
  const parsed = presentedToken(query);
  const row = await store.tokens.findByAccessKey(parsed?.accessKey ?? DUMMY_ACCESS_KEY);
  const matches = secretMatches(parsed?.secret ?? '', row?.secret_hash ?? null);
  if (!parsed || !row || !matches) return null;
  if (row.status !== 'active' || row.account_status !== 'active') return null;
  if (row.expires_at !== null && row.expires_at <= nowSec) return null;
  return { accountId: row.account_id, accessKey: row.access_key };
}

/** The 429 text of the invalid-token lock-out: which limit, for which source, and when it ends. */
export function lockOutMessage(
  ip: string,
  limit: number,
  retryAfterSeconds: number | undefined,
  nowMs: number,
): string {
  const secs = Math.max(1, retryAfterSeconds ?? 60);
  const until = new Date(nowMs + secs * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
  return `rate limited: invalid-token lock-out for source IP ${ip} after ${limit} invalid API keys; every request from this IP is refused until ${until}, in ${secs} s`;
}

/** What the checks before a handler decided: in the order the limits apply (docs/api.md Limits). */
type CallerCheck =
  | { kind: 'locked'; retryAfterSeconds: number }
  | { kind: 'invalid' }
  | { kind: 'limited'; retryAfterSeconds: number }
  | { kind: 'ok'; caller: ApiCaller; page?: WhitelistPage | undefined };

/** Lock-out, token, and the token's limit, one step each (limits in memory, Redis or SQLite). */
async function checkStepwise(
  store: Store,
  limits: ApiLimits,
  ip: string,
  query: URLSearchParams,
  route: LimitedRoute,
  nowMs: number,
): Promise<CallerCheck> {
  const lock = await limits.checkSourceIp(ip);
  if (!lock.allowed) return { kind: 'locked', retryAfterSeconds: lock.retryAfterSeconds };
  const caller = await authenticate(store, query, Math.floor(nowMs / 1000));
  if (!caller) {
    await limits.recordInvalidToken(ip);
    return { kind: 'invalid' };
  }
  const quota = await limits.consumeToken(caller.accessKey, route);
  if (!quota.allowed) return { kind: 'limited', retryAfterSeconds: quota.retryAfterSeconds };
  return { kind: 'ok', caller };
}

/** The same checks as one database call, where the limits live in the store's own database (PostgreSQL). */
async function checkInOne(
  checkCall: NonNullable<Store['tokens']['checkCall']>,
  limits: ApiLimits,
  ip: string,
  query: URLSearchParams,
  route: LimitedRoute,
  nowMs: number,
  list: ListFilter | undefined,
): Promise<CallerCheck> {
  const parsed = presentedToken(query);
  const r = await checkCall({
    badKey: badTokenKey(ip),
    badLimit: limits.settings.invalidTokenPerIp,
    accessKey: parsed?.accessKey ?? DUMMY_ACCESS_KEY,
    secretHash: sha256(parsed?.secret ?? ''),
    rateKey: tokenRouteKey(parsed?.accessKey ?? DUMMY_ACCESS_KEY, route),
    rateLimit: limits.settings.perRoute[route],
    windowMs: limits.settings.windowMs,
    nowMs,
    ...(list ? { list } : {}),
  });
  if (r === 'busy') throw new LimiterUnavailableError('busy');
  if (r.kind === 'locked') return { kind: 'locked', retryAfterSeconds: limits.retryAfter(r.oldestAtMs, nowMs) };
  if (r.kind === 'invalid' || !parsed) return { kind: 'invalid' };
  if (r.kind === 'limited') return { kind: 'limited', retryAfterSeconds: limits.retryAfter(r.oldestAtMs, nowMs) };
  return { kind: 'ok', caller: { accountId: r.accountId, accessKey: r.accessKey }, page: r.page };
}

/** `prefetchList`: for the list route, the filter of a valid query, so its page can come with the admission. */
export function makeAuthHook(
  store: Store,
  limits: ApiLimits,
  route: LimitedRoute,
  nowMs: () => number = Date.now,
  prefetchList?: (request: FastifyRequest) => ListFilter | undefined,
) {
  const checkCall = store.tokens.checkCall?.bind(store.tokens);
  // One round trip only when the limits' window log is this store's own database (windowStoreFor: PostgreSQL, no Redis).
  const inOne = checkCall !== undefined && limits.storeKind === 'postgres';
  return async function authHook(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const ip = sourceIp(request);
    const now = nowMs();
    const query = new URLSearchParams(rawQuery(request));
    // Counted by source (an IPv6 one by its /64); the message names the caller's own address.
    const source = sourceLimitKey(ip);
    const a = inOne
      ? await checkInOne(checkCall!, limits, source, query, route, now, prefetchList?.(request))
      : await checkStepwise(store, limits, source, query, route, now);
    if (a.kind === 'locked') {
      request.limitedBy = 'source_ip';
      sendEnvelope(
        request,
        reply,
        Code.RATE_LIMITED,
        null,
        lockOutMessage(ip, limits.settings.invalidTokenPerIp, a.retryAfterSeconds, now),
        { retryAfterSeconds: a.retryAfterSeconds },
      );
      return reply;
    }
    if (a.kind === 'invalid') {
      sendEnvelope(request, reply, Code.INVALID_API_KEY);
      return reply;
    }
    if (a.kind === 'limited') {
      request.limitedBy = 'token';
      sendEnvelope(request, reply, Code.RATE_LIMITED, null, undefined, { retryAfterSeconds: a.retryAfterSeconds });
      return reply;
    }
    request.caller = a.caller;
    if (a.page) request.prefetchedPage = a.page;
  };
}
