// Idempotency-Key on the customer API's writes (docs/api.md, "Idempotency"): the first request with a key runs and
// its answer is kept (in the database: every node of a fleet sees it) for 24 h; the same key with the same method,
// path and body gets that answer again with `Idempotent-Replayed: true`, nothing done; with anything else, 409/10409.
// Two requests with one key at once: one claims it (atomically, in the store), the other waits for its answer. A kept
// answer is sealed (AES-256-GCM): a create's holds the password shown once, never stored in the clear.
//
// Spread `idempotentRoute(...)` into a route's options after its authentication hooks (`withHooks` joins them).
import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest, onSendHookHandler, preHandlerHookHandler } from 'fastify';
import { BusinessError, Code } from '../../contract/codes.js';
import { IDEMPOTENCY_KEY_HEADER, IDEMPOTENT_REPLAYED_HEADER } from '../../contract/paths.js';
import type { AnswerSealer } from '../services/context.js';
import type { Store } from '../store/index.js';
import { sendEnvelope } from './envelope.js';
import { DAY_MS, MINUTE_MS } from '../../rules/time.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The Idempotency-Key this request claimed: its answer is stored when it is sent. */
    idempotency?: { accountId: number; key: string };
  }
}

/** How long an answer is kept. */
export const IDEMPOTENCY_TTL_MS = DAY_MS;
/** A claim with no answer after this long is taken over (its node died mid-request). */
const STALE_CLAIM_MS = MINUTE_MS;
/** How long a second request waits for the first one's answer before 409. */
const WAIT_MS = 10_000;
const POLL_MS = 50;
/** 1–255 printable ASCII characters. */
const KEY_RE = /^[\x20-\x7e]{1,255}$/;
/** Answers that did nothing the client could not simply ask for again: the key is given back, not kept. */
const NOT_KEPT: ReadonlySet<number> = new Set([
  Code.RATE_LIMITED,
  Code.SYSTEM,
  Code.LIMITER_UNAVAILABLE,
  Code.INVALID_API_KEY,
]);

type Hooks = { preHandler: preHandlerHookHandler[]; onSend: onSendHookHandler[] };

/** The Idempotency-Key header's value, or null when absent; 10400 when it is not 1–255 printable characters. */
export function idempotencyKeyOf(request: FastifyRequest): string | null {
  const raw = request.headers[IDEMPOTENCY_KEY_HEADER];
  if (raw === undefined) return null;
  // Node joins a repeated header into "a, b": two keys are not one key (a key names one logical write).
  if (Array.isArray(raw) || headerCount(request, IDEMPOTENCY_KEY_HEADER) > 1) {
    throw new BusinessError(Code.INVALID_PARAMS, 'invalid parameters: Idempotency-Key (sent more than once)');
  }
  const key = raw;
  if (!KEY_RE.test(key))
    throw new BusinessError(
      Code.INVALID_PARAMS,
      'invalid parameters: Idempotency-Key (1-255 printable ASCII characters)',
    );
  return key;
}

/** How many times the request carries header `name` (lower case). */
function headerCount(request: FastifyRequest, name: string): number {
  const raw = request.raw.rawHeaders;
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() === name) n++;
  return n;
}

function bodyHash(request: FastifyRequest): string {
  const b = request.body;
  return createHash('sha256')
    .update(Buffer.isBuffer(b) ? b : typeof b === 'string' ? Buffer.from(b) : Buffer.alloc(0))
    .digest('base64url');
}

/**
 * Route hooks that make a write idempotent under an Idempotency-Key. `sealer` seals the kept answers (ApiContext's
 * `answerSealer`); `accountOf` names the caller's account (after authentication: an API key's, by default).
 */
export function idempotentRoute(
  store: Store,
  sealer: () => Promise<AnswerSealer>,
  opts: { accountOf?: (r: FastifyRequest) => number | null; nowMs?: () => number } = {},
): Hooks {
  const accountOf =
    opts.accountOf ??
    ((r: FastifyRequest) => (r as FastifyRequest & { apiKey?: { accountId: number } }).apiKey?.accountId ?? null);
  const now = opts.nowMs ?? Date.now;
  const preHandler: preHandlerHookHandler = async function (request: FastifyRequest, reply: FastifyReply) {
    const key = idempotencyKeyOf(request);
    if (key === null) return;
    const accountId = accountOf(request);
    if (accountId === null) return;
    const claim = {
      accountId,
      key,
      method: request.method,
      path: request.url.split('?')[0]!,
      bodyHash: bodyHash(request),
      ttlMs: IDEMPOTENCY_TTL_MS,
      staleMs: STALE_CLAIM_MS,
    };
    const deadline = now() + WAIT_MS;
    for (;;) {
      const c = await store.idempotency.claim({ ...claim, nowMs: now() });
      if (c.kind === 'claimed') {
        request.idempotency = { accountId, key };
        return;
      }
      if (c.kind === 'mismatch') {
        return sendEnvelope(
          request,
          reply,
          Code.CONFLICT,
          null,
          'conflict: this Idempotency-Key was used with another request (method, path or body)',
        );
      }
      if (c.kind === 'replay') {
        const body = (await sealer()).open(c.body);
        // Sealed under a secret this node no longer has: the answer cannot be given, and the request is not run again.
        if (body === null)
          return sendEnvelope(
            request,
            reply,
            Code.CONFLICT,
            null,
            'conflict: the answer kept for this Idempotency-Key cannot be read; use a new key',
          );
        reply.businessCode = codeOf(body);
        reply.header(IDEMPOTENT_REPLAYED_HEADER, 'true');
        // The first answer's request id, as its body says (the envelope's rule, docs/api.md: the X-Request-Id header and the body's requestId name the same id).
        reply.header('x-request-id', requestIdOf(body) ?? request.id);
        return reply.code(c.status).type('application/json; charset=utf-8').send(body);
      }
      // Its first request is still running (here or on another node): wait for its answer.
      if (now() >= deadline)
        return sendEnvelope(
          request,
          reply,
          Code.CONFLICT,
          null,
          'conflict: a request with this Idempotency-Key is still in progress',
        );
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  };
  const onSend: onSendHookHandler = async function (request, reply, payload) {
    const claimed = request.idempotency;
    if (!claimed) return payload;
    // Stored once, whatever happens to the connection: a client that gave up resends and gets this answer.
    request.idempotency = undefined;
    const code = reply.businessCode;
    try {
      if (code === undefined || NOT_KEPT.has(code) || typeof payload !== 'string')
        await store.idempotency.release(claimed.accountId, claimed.key);
      else
        await store.idempotency.finish(
          claimed.accountId,
          claimed.key,
          reply.statusCode,
          (await sealer()).seal(payload),
        );
    } catch (e) {
      request.log.warn(
        { event: 'idempotency_store_failed', err: e instanceof Error ? e.message : String(e) },
        'Idempotency-Key answer not stored',
      );
    }
    return payload;
  };
  return { preHandler: [preHandler], onSend: [onSend] };
}

function requestIdOf(body: string): string | undefined {
  try {
    const id = (JSON.parse(body) as { requestId?: unknown }).requestId;
    return typeof id === 'string' && /^[\x21-\x7e]{1,200}$/.test(id) ? id : undefined;
  } catch {
    return undefined;
  }
}

function codeOf(body: string): number | undefined {
  try {
    const c = (JSON.parse(body) as { code?: unknown }).code;
    return typeof c === 'number' ? c : undefined;
  } catch {
    return undefined;
  }
}

type HookValue = unknown;

/** Route options' hooks joined (each hook name's lists in order): `withHooks(keyRoute(...), idempotentRoute(...))`. */
export function withHooks(...parts: ReadonlyArray<Record<string, HookValue>>): Record<string, HookValue[]> {
  const out: Record<string, HookValue[]> = {};
  for (const p of parts) {
    for (const [name, v] of Object.entries(p)) (out[name] ??= []).push(...(Array.isArray(v) ? v : [v]));
  }
  return out;
}
