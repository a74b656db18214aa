// The customer API behind the API key (docs/api.md "Proxy users", "Gateway"): typed calls over WhitelistApi.request,
// and writes that carry an Idempotency-Key, resent with the same key after a timeout, a cut connection or a 5xx, so
// that a resend is exact (the server answers a repeat with its first answer).
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { PROXY_PATHS } from '../contract/paths.js';
import {
  GatewayDataSchema,
  PasswordDataSchema,
  ProxyUserSchema,
  ProxyUsersBatchResultSchema,
  ProxyUsersPageSchema,
  type GatewayData,
  type ProxyUsersBatchResult,
} from '../contract/proxy-schemas.js';
import { ApiError, isRateLimited, isTransient, mayHaveApplied, type HttpMethod, type WhitelistApi } from './api.js';
import type { Clock } from './pacer.js';

export const CUSTOMER_PATHS = PROXY_PATHS;

export const userPath = (username: string): string => `${PROXY_PATHS.users}/${encodeURIComponent(username)}`;

// The contract's shapes (proxyd answers with them); a made password rides on a created user.
export const UserSchema = ProxyUserSchema.extend({ password: z.string().optional() });
export type User = z.infer<typeof UserSchema>;
export const UserListSchema = ProxyUsersPageSchema;
export type UserList = { items: User[]; page: number; page_size: number; total: number };
export type Credential = z.infer<typeof PasswordDataSchema>;
export type UserBatch = ProxyUsersBatchResult;
export type Gateway = GatewayData;

/** The writable fields of a user (create and PATCH). */
export interface UserFields {
  password?: string;
  status?: 'active' | 'disabled';
  traffic_limit?: number | null;
  max_connections?: number | null;
  rate_limit?: string | null;
  expires_at?: string | null;
  allow?: string[];
  deny?: string[];
}

export class BadShape extends Error {}

function parse<T>(
  schema: { safeParse(v: unknown): { success: true; data: T } | { success: false } },
  data: unknown,
  what: string,
): T {
  const r = schema.safeParse(data);
  if (!r.success) throw new BadShape(`the API returned ${what} in an unexpected shape`);
  return r.data;
}

export interface WriteOptions {
  clock: Clock;
  /** Resends after a timeout, a cut connection or a 5xx (same Idempotency-Key), and after a 429. Default 3. */
  retry?: number;
  backoffMs?: (n: number) => number;
  /** Told before each wait. */
  onWait?: (ms: number, why: 'retry-after' | 'backoff') => void;
}

const defaultBackoff = (n: number) => Math.min(30_000, 1000 * 2 ** Math.max(0, n - 1));

/**
 * The API's answer to a resend whose first request is still running (it waited 10 s for it): 409 "still in
 * progress". The same request under the same key is sent again after a pause; it gets the first answer once there.
 */
export function isStillInProgress(err: unknown): err is ApiError {
  return err instanceof ApiError && err.httpStatus === 409 && /still in progress/i.test(err.message);
}

/** A fresh Idempotency-Key: one per logical write. */
export const newIdempotencyKey = (): string => `proxyctl-${randomUUID()}`;

/**
 * One logical write: the same method, path, body and Idempotency-Key on every resend. A 429 (nothing done) waits
 * Retry-After; a timeout, network error or 5xx (perhaps done) resends the same request, which the server answers
 * with its first answer if it had done it.
 */
export async function write(
  api: WhitelistApi,
  method: HttpMethod,
  path: string,
  body: unknown,
  opts: WriteOptions,
  key = newIdempotencyKey(),
  /** After a resend of a request that may have been done: an error that means it was (a DELETE's 404). */
  doneIf?: (err: unknown) => boolean,
) {
  const retry = opts.retry ?? 3;
  const backoff = opts.backoffMs ?? defaultBackoff;
  let maybeDone = false;
  for (let attempt = 0; ; attempt++) {
    try {
      return await api.request(method, path, { ...(body !== undefined ? { body } : {}), idempotencyKey: key });
    } catch (err) {
      if (maybeDone && doneIf?.(err)) return null;
      if (attempt >= retry) throw err;
      if (err instanceof ApiError && ((isTransient(err) && mayHaveApplied(err)) || isStillInProgress(err)))
        maybeDone = true;
      if (isRateLimited(err)) {
        const ms = err.retryAfterMs ?? 1000;
        opts.onWait?.(ms, 'retry-after');
        await opts.clock.sleep(ms);
        continue;
      }
      if (!isTransient(err) && !isStillInProgress(err)) throw err;
      const ms = backoff(attempt + 1);
      opts.onWait?.(ms, 'backoff');
      await opts.clock.sleep(ms);
    }
  }
}

export async function listUsers(
  api: WhitelistApi,
  q: { page?: number; page_size?: number; status?: string; q?: string },
): Promise<UserList> {
  const query: Record<string, string | undefined> = {
    page: q.page?.toString(),
    page_size: q.page_size?.toString(),
    status: q.status,
    q: q.q,
  };
  const env = await api.request('GET', CUSTOMER_PATHS.users, { query });
  return parse(UserListSchema, env.data, 'a user list');
}

export async function getUser(api: WhitelistApi, username: string): Promise<User> {
  return parse(UserSchema, (await api.request('GET', userPath(username))).data, 'a user');
}

export async function getGateway(api: WhitelistApi): Promise<Gateway> {
  return parse(GatewayDataSchema, (await api.request('GET', CUSTOMER_PATHS.gateway)).data, 'the gateway');
}

export async function createUser(
  api: WhitelistApi,
  username: string,
  fields: UserFields,
  opts: WriteOptions,
): Promise<User> {
  return parse(
    UserSchema,
    (await write(api, 'POST', CUSTOMER_PATHS.users, { username, ...fields }, opts))!.data,
    'a user',
  );
}

export async function patchUser(
  api: WhitelistApi,
  username: string,
  fields: UserFields,
  opts: WriteOptions,
): Promise<User> {
  return parse(UserSchema, (await write(api, 'PATCH', userPath(username), fields, opts))!.data, 'a user');
}

export async function setPassword(
  api: WhitelistApi,
  username: string,
  password: string | undefined,
  opts: WriteOptions,
): Promise<Credential> {
  const body = password !== undefined ? { password } : {};
  return parse(
    PasswordDataSchema,
    (await write(api, 'POST', `${userPath(username)}/password`, body, opts))!.data,
    'a password',
  );
}

export async function deleteUser(api: WhitelistApi, username: string, opts: WriteOptions): Promise<void> {
  // A resend after a lost answer may find it gone: our own first request deleted it.
  await write(
    api,
    'DELETE',
    userPath(username),
    undefined,
    opts,
    undefined,
    (err) => err instanceof ApiError && err.httpStatus === 404,
  );
}

export function parseUserBatch(data: unknown): UserBatch {
  return parse(ProxyUsersBatchResultSchema, data, 'a batch result');
}
