// What the customer API's proxy-user, rules and gateway routes share (docs/api.md, "Proxy users"): key
// authentication with the endpoint's scope, Idempotency-Key on writes, strict queries and bodies, 10400 naming the field.
import type { FastifyRequest } from 'fastify';
import { BusinessError, Code } from '../../../contract/codes.js';
import { isProxyUsername } from '../../../contract/proxy-username.js';
import type { ApiContext } from '../../services/context.js';
import type { UserInputProblem } from '../../services/proxy-user-input.js';
import { rawQuery } from '../auth.js';
import { parseJsonBody, safeName } from '../body.js';
import { idempotentRoute, withHooks } from '../idempotency.js';
import { keyRoute } from '../key-auth.js';

/** An endpoint's scope, as key authentication names them. */
type Scope = Exclude<Parameters<typeof keyRoute>[0], 'any'>;

/** A read under `scope` (`any`: every key). */
export function readRoute(scope: Scope | 'any') {
  return keyRoute(scope, 'read');
}

/** A write under `scope`: the key first, then its Idempotency-Key (after the body is read: its hash is part of it). */
export function writeRoute(ctx: ApiContext, scope: Scope) {
  return withHooks(keyRoute(scope, 'write'), idempotentRoute(ctx.store, ctx.answerSealer, { nowMs: ctx.nowMs }));
}

/** The key's account (keyRoute has admitted the request). */
export function accountOf(request: FastifyRequest): number {
  return request.apiKey!.accountId;
}

/** Writes and single-user reads take no query parameters. */
export function noQuery(request: FastifyRequest): void {
  for (const key of new URLSearchParams(rawQuery(request)).keys()) {
    throw new BusinessError(Code.INVALID_PARAMS, `invalid parameters: unknown query parameter ${safeName(key)}`);
  }
}

/** A refused field as 10400 naming it. */
export function invalid(p: UserInputProblem): BusinessError {
  return new BusinessError(Code.INVALID_PARAMS, `invalid parameters: ${p.field} (${p.problem})`);
}

/** The `{username}` of the path; a name no user can have is not found, like an absent one. */
export function usernameParam(request: FastifyRequest): string {
  const name = (request.params as { username?: unknown }).username;
  if (typeof name !== 'string' || !isProxyUsername(name)) throw notFound();
  return name;
}

/** Absent and another account's alike (docs/api.md). */
export function notFound(): BusinessError {
  return new BusinessError(Code.NOT_FOUND, 'not found: no such proxy user');
}

/** A strict JSON body, where an empty body may stand for `{}` (a password rotation, a delete). */
export function optionalJsonBody(request: FastifyRequest): unknown {
  const raw = request.body;
  if (raw === undefined || raw === null || (Buffer.isBuffer(raw) && raw.length === 0)) return {};
  return parseJsonBody(request);
}
