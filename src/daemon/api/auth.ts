// api_key authentication and the limits that guard it (docs/api.md Authentication, Limits), run before the body is read.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Code } from '../../contract/codes.js';
import { API_KEY_PARAM, type ApiRoute } from '../../contract/paths.js';
import { parseToken } from '../../contract/token.js';
import type { ApiLimits } from '../ratelimit/api-limits.js';
import { secretMatches } from '../secrets.js';
import type { Store } from '../store/index.js';
import { sendEnvelope } from './envelope.js';
import { sourceIp } from './source-ip.js';

interface ApiCaller {
  accountId: number;
  accessKey: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    caller?: ApiCaller;
    /** Which limit refused the request, for the rate-limit metric. */
    limitedBy?: 'token' | 'source_ip';
  }
}

/** The raw query string of a request (never logged). */
export function rawQuery(request: FastifyRequest): string {
  const q = request.raw.url?.indexOf('?') ?? -1;
  return q >= 0 ? request.raw.url!.slice(q + 1) : '';
}

// Syntactically valid but never issued: unknown and malformed keys do the same lookup and hash work.
const DUMMY_ACCESS_KEY = 'ak00000000000000000000';

/** Resolves `api_key` to a caller, or null for every failure cause alike. */
export async function authenticate(store: Store, query: URLSearchParams, nowSec: number): Promise<ApiCaller | null> {
  const values = query.getAll(API_KEY_PARAM);
  const parsed = values.length === 1 ? parseToken(values[0]!) : null;
  const row = await store.tokens.findByAccessKey(parsed?.accessKey ?? DUMMY_ACCESS_KEY);
  const matches = secretMatches(parsed?.secret ?? '', row?.secret_hash ?? null);
  if (!parsed || !row || !matches) return null;
  if (row.status !== 'active' || row.account_status !== 'active') return null;
  if (row.expires_at !== null && row.expires_at <= nowSec) return null;
  return { accountId: row.account_id, accessKey: row.access_key };
}

/** The 429 text of the invalid-token lock-out: which limit, for which source, and when it ends. */
function lockOutMessage(ip: string, limit: number, retryAfterSeconds: number | undefined, nowMs: number): string {
  const secs = Math.max(1, retryAfterSeconds ?? 60);
  const until = new Date(nowMs + secs * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
  return `rate limited: invalid-token lock-out for source IP ${ip} after ${limit} invalid API keys; every request from this IP is refused until ${until}, in ${secs} s`;
}

export function makeAuthHook(store: Store, limits: ApiLimits, route: ApiRoute, nowMs: () => number = Date.now) {
  return async function authHook(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const ip = sourceIp(request);
    const lock = await limits.checkSourceIp(ip);
    if (!lock.allowed) {
      request.limitedBy = 'source_ip';
      sendEnvelope(request, reply, Code.RATE_LIMITED, null, lockOutMessage(ip, limits.settings.invalidTokenPerIp, lock.retryAfterSeconds, nowMs()), { retryAfterSeconds: lock.retryAfterSeconds });
      return reply;
    }
    const caller = await authenticate(store, new URLSearchParams(rawQuery(request)), Math.floor(nowMs() / 1000));
    if (!caller) {
      await limits.recordInvalidToken(ip);
      sendEnvelope(request, reply, Code.INVALID_API_KEY);
      return reply;
    }
    const quota = await limits.consumeToken(caller.accessKey, route);
    if (!quota.allowed) {
      request.limitedBy = 'token';
      sendEnvelope(request, reply, Code.RATE_LIMITED, null, undefined, { retryAfterSeconds: quota.retryAfterSeconds });
      return reply;
    }
    request.caller = caller;
  };
}
