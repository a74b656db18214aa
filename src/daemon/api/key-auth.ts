// API key authentication (docs/api.md, "Authentication"): every customer endpoint but the three whitelist ones.
// Only `Authorization: Bearer pxk_…` is read; every refusal is the one 10401 body, checked in constant time, and
// counts in the per-source invalid-credential budget the whitelist's tokens use. No cache: each request reads its
// key's row, so a revocation or expiry holds on every node of a fleet at its next request. On PostgreSQL the
// lock-out, the key, its scope and its limits are one database call (proxyd_key_admit), as for tokens.
import { isIP } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Code } from '../../contract/codes.js';
import { API_KEY_PARAM, type LimitedRoute } from '../../contract/paths.js';
import { parseApiKey, sourceAllowed, type ParsedApiKey, type Scope } from '../../contract/scopes.js';
import { badTokenKey, keyKindKey, keyRouteKey, type ApiLimits } from '../ratelimit/api-limits.js';
import { LimiterUnavailableError } from '../ratelimit/limiter.js';
import { secretMatches, sha256 } from '../secrets.js';
import type { AuditContext } from '../services/audit.js';
import { sourceIp, sourceLimitKey } from '../services/source-ip.js';
import type { Store } from '../store/index.js';
import { lockOutMessage, rawQuery } from './auth.js';
import { sendEnvelope } from './envelope.js';

export interface ApiKeyCaller {
  id: string;
  accountId: number;
  scopes: Scope[];
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The API key a request was authenticated by (keyRoute). */
    apiKey?: ApiKeyCaller;
  }
  interface FastifyInstance {
    /** What keyRoute's hooks check keys with (buildApp decorates the app with it). */
    keyAuth: KeyAuthenticator;
  }
}

// Syntactically a key id, never issued (ids are 16 hex digits): a malformed key does the same lookup and hash work.
const DUMMY_KEY_ID = 'none0000000000000000';
/** A key's use is written at most once a minute per node (or when its source changes, at most once a second). */
const TOUCH_EVERY_MS = 60_000;
const TOUCH_NEW_SOURCE_MS = 1_000;
const MAX_TOUCHED = 10_000;

/** The key of `Authorization: Bearer <key>` (scheme case-insensitive); null for anything else, a repeated header too. */
function bearerKey(request: FastifyRequest): string | null {
  const h = request.headers.authorization;
  if (typeof h !== 'string') return null;
  // Node keeps the first of two Authorization headers and drops the other: two credentials are none (as a repeated
  // api_key is: docs/api.md, "Authentication"), whichever comes first.
  const raw = request.raw.rawHeaders;
  let seen = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() === 'authorization' && ++seen > 1) return null;
  const m = /^Bearer +([!-~]+) *$/i.exec(h);
  return m ? m[1]! : null;
}

/** What the checks before a handler decided, in the order they apply (docs/api.md, "Authentication"). */
type KeyVerdict =
  | { kind: 'locked'; retryAfterSeconds: number }
  | { kind: 'invalid' }
  | { kind: 'scope'; caller: ApiKeyCaller }
  | { kind: 'api_key_param'; caller: ApiKeyCaller }
  | { kind: 'limited'; caller: ApiKeyCaller; retryAfterSeconds: number }
  | { kind: 'ok'; caller: ApiKeyCaller };

/** What a route asks of its key. */
interface KeyNeed {
  scope: Scope | 'any';
  kind: 'read' | 'write';
  route: LimitedRoute | undefined;
}

export class KeyAuthenticator {
  private readonly touched = new Map<string, { atMs: number; ip: string }>();
  private readonly checkCall: NonNullable<Store['apiKeys']['checkCall']> | undefined;

  constructor(
    private readonly store: Store,
    readonly limits: ApiLimits,
    readonly nowMs: () => number = Date.now,
  ) {
    // One round trip only when the limits' window log is this store's own database (PostgreSQL, no Redis).
    this.checkCall = limits.storeKind === 'postgres' ? store.apiKeys.checkCall?.bind(store.apiKeys) : undefined;
  }

  /** Every check before the handler: in one database call on PostgreSQL, else step by step (the same answers). */
  async admit(request: FastifyRequest, ip: string, source: string, need: KeyNeed): Promise<KeyVerdict> {
    const raw = bearerKey(request);
    const parsed = raw === null ? null : parseApiKey(raw);
    const apiKeyParam = new URLSearchParams(rawQuery(request)).has(API_KEY_PARAM);
    // A stray api_key parameter is refused between the scope and the limit: rare, so it takes the stepwise path.
    if (this.checkCall && !apiKeyParam) return this.admitInOne(parsed, ip, source, need);
    const lock = await this.limits.checkSourceIp(source);
    if (!lock.allowed) return { kind: 'locked', retryAfterSeconds: lock.retryAfterSeconds };
    const row = await this.store.apiKeys.forAuth(parsed?.id ?? DUMMY_KEY_ID);
    const matches = secretMatches(parsed?.secret ?? '', row?.secret_hash ?? null);
    const nowSec = Math.floor(this.nowMs() / 1000);
    const live =
      row !== null &&
      row.revoked_at === null &&
      (row.expires_at === null || row.expires_at > nowSec) &&
      row.account_status === 'active' &&
      sourceAllowed(ip, row.allowed_ips);
    if (!parsed || !row || !matches || !live) {
      await this.limits.recordInvalidToken(source);
      return { kind: 'invalid' };
    }
    const caller: ApiKeyCaller = { id: row.id, accountId: row.account_id, scopes: row.scopes as Scope[] };
    if (need.scope !== 'any' && !caller.scopes.includes(need.scope)) return { kind: 'scope', caller };
    // The account token's parameter is never read here; a key put there would sit in access logs: say so.
    if (apiKeyParam) return { kind: 'api_key_param', caller };
    const quota = await this.limits.consumeKey(caller.id, need.kind, need.route);
    if (!quota.allowed) return { kind: 'limited', caller, retryAfterSeconds: quota.retryAfterSeconds };
    return { kind: 'ok', caller };
  }

  private async admitInOne(
    parsed: ParsedApiKey | null,
    ip: string,
    source: string,
    need: KeyNeed,
  ): Promise<KeyVerdict> {
    const s = this.limits.settings;
    const now = this.nowMs();
    const keyId = parsed?.id ?? DUMMY_KEY_ID;
    const r = await this.checkCall!({
      badKey: badTokenKey(source),
      badLimit: s.invalidTokenPerIp,
      keyId,
      secretHash: sha256(parsed?.secret ?? ''),
      source: isIP(ip) ? ip : null,
      scope: need.scope === 'any' ? null : need.scope,
      rateKey: keyKindKey(keyId, need.kind),
      rateLimit: need.kind === 'read' ? s.keyReads : s.keyWrites,
      rate2Key: need.route === undefined ? null : keyRouteKey(keyId, need.route),
      rate2Limit: need.route === undefined ? 0 : s.perRoute[need.route],
      windowMs: s.windowMs,
      nowMs: now,
    });
    if (r === 'busy') throw new LimiterUnavailableError('busy');
    if (r.kind === 'locked') return { kind: 'locked', retryAfterSeconds: this.limits.retryAfter(r.oldestAtMs, now) };
    if (r.kind === 'invalid' || !parsed) return { kind: 'invalid' };
    const caller: ApiKeyCaller = { id: r.keyId, accountId: r.accountId, scopes: r.scopes as Scope[] };
    if (r.kind === 'limited')
      return { kind: 'limited', caller, retryAfterSeconds: this.limits.retryAfter(r.oldestAtMs, now) };
    return { kind: r.kind, caller };
  }

  /** Records the key's last use, throttled: not a write per request. */
  touch(keyId: string, ip: string): void {
    const now = this.nowMs();
    const prev = this.touched.get(keyId);
    if (prev && (prev.ip === ip ? now - prev.atMs < TOUCH_EVERY_MS : now - prev.atMs < TOUCH_NEW_SOURCE_MS)) return;
    if (this.touched.size >= MAX_TOUCHED) this.touched.clear();
    this.touched.set(keyId, { atMs: now, ip });
    this.store.apiKeys.touch(keyId, Math.floor(now / 1000), ip).catch(() => {
      /* busy or unreachable: the next use records itself */
    });
  }
}

/**
 * The one answer of a refused key: 401, 10401, `invalid api key`, whatever the cause; the challenge of RFC 6750
 * names the scheme only (its `error` attribute would tell a missing key from a bad one).
 */
function refuse(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  reply.header('www-authenticate', 'Bearer realm="proxyd"');
  return sendEnvelope(request, reply, Code.INVALID_API_KEY);
}

/**
 * Route options (spread them into a route's) that authenticate the request by its API key and admit it when the key
 * holds `scope` (`any`: every key) and has requests of this `kind` left. `opts.route`: a limit of the route's own
 * per key on top (the usage endpoints' 60 per minute). Sets `request.apiKey`.
 */
export function keyRoute(scope: Scope | 'any', kind: 'read' | 'write', opts: { route?: LimitedRoute } = {}) {
  async function keyAuthHook(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    const auth = (request.server as FastifyInstance).keyAuth;
    const ip = sourceIp(request);
    // Counted by source (an IPv6 one by its /64), as invalid tokens are: one budget for both.
    const source = sourceLimitKey(ip);
    const a = await auth.admit(request, ip, source, { scope, kind, route: opts.route });
    if (a.kind === 'locked') {
      request.limitedBy = 'source_ip';
      const message = lockOutMessage(ip, auth.limits.settings.invalidTokenPerIp, a.retryAfterSeconds, auth.nowMs());
      return sendEnvelope(request, reply, Code.RATE_LIMITED, null, message, { retryAfterSeconds: a.retryAfterSeconds });
    }
    if (a.kind === 'invalid') return refuse(request, reply);
    // From here the key is known: the log line names it (by its id).
    request.apiKey = a.caller;
    if (a.kind === 'scope')
      return sendEnvelope(request, reply, Code.MISSING_SCOPE, null, `the key lacks scope ${scope}`);
    if (a.kind === 'api_key_param') {
      return sendEnvelope(
        request,
        reply,
        Code.INVALID_PARAMS,
        null,
        `invalid parameters: ${API_KEY_PARAM} (not read here: send the API key in Authorization: Bearer, never in the URL)`,
      );
    }
    if (a.kind === 'limited') {
      request.limitedBy = 'key';
      return sendEnvelope(request, reply, Code.RATE_LIMITED, null, undefined, {
        retryAfterSeconds: a.retryAfterSeconds,
      });
    }
    auth.touch(a.caller.id, ip);
    return undefined;
  }
  return { onRequest: [keyAuthHook] };
}

/** Who acts in a key-authenticated call, for its audit record: the key by its id (never the key), from where, in which request. */
export function keyAudit(request: FastifyRequest): AuditContext {
  return { actor: { type: 'key', id: request.apiKey!.id }, sourceIp: sourceIp(request), requestId: request.id };
}
