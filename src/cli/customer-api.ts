// The customer API behind the API key (docs/api.md "Proxy users", "Gateway"): typed calls over WhitelistApi.request,
// and writes that carry an Idempotency-Key, resent with the same key after a timeout, a cut connection or a 5xx, so
// that a resend is exact (the server answers a repeat with its first answer).
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { ApiError, isRateLimited, isTransient, mayHaveApplied, type HttpMethod, type WhitelistApi } from './api.js';
import type { Clock } from './pacer.js';

export const CUSTOMER_PATHS = {
  users: '/openapi/v1/proxy/users',
  usersBatch: '/openapi/v1/proxy/users/batch',
  gateway: '/openapi/v1/proxy/gateway',
} as const;

export const userPath = (username: string): string => `${CUSTOMER_PATHS.users}/${encodeURIComponent(username)}`;

const nullableNum = z.number().nullable().optional();

export const UserSchema = z
  .object({
    username: z.string(),
    status: z.string(),
    created_at: z.string().optional(),
    traffic_limit: nullableNum,
    max_connections: nullableNum,
    rate_limit: z.string().nullable().optional(),
    expires_at: z.string().nullable().optional(),
    allow: z.array(z.string()).optional(),
    deny: z.array(z.string()).optional(),
    used: z.object({ bytes_up: z.number(), bytes_down: z.number(), period_start: z.string().nullable().optional() }).partial().nullable().optional(),
    password: z.string().optional(),
  })
  .passthrough();
export type User = z.infer<typeof UserSchema>;

export const UserListSchema = z.object({ items: z.array(UserSchema), page: z.number(), page_size: z.number(), total: z.number() });
export type UserList = z.infer<typeof UserListSchema>;

const CredentialSchema = z.object({ username: z.string(), password: z.string() });
export type Credential = z.infer<typeof CredentialSchema>;

export const UserBatchSchema = z.object({
  success_count: z.number(),
  failed_count: z.number(),
  failed_items: z.array(z.object({ username: z.string(), code: z.number(), reason: z.string() }).passthrough()),
  created: z.array(CredentialSchema).default([]),
});
export type UserBatch = z.infer<typeof UserBatchSchema>;

export const GatewaySchema = z
  .object({
    http: z.string(),
    socks5: z.string().nullable().optional(),
    udp: z.boolean().optional(),
    locations: z.array(z.object({ country: z.string(), cities: z.array(z.string()).default([]), exits: z.number().optional() })).default([]),
  })
  .passthrough();
export type Gateway = z.infer<typeof GatewaySchema>;

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

function parse<T>(schema: { safeParse(v: unknown): { success: true; data: T } | { success: false } }, data: unknown, what: string): T {
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
      if (err instanceof ApiError && isTransient(err) && mayHaveApplied(err)) maybeDone = true;
      if (isRateLimited(err)) {
        const ms = err.retryAfterMs ?? 1000;
        opts.onWait?.(ms, 'retry-after');
        await opts.clock.sleep(ms);
        continue;
      }
      if (!isTransient(err)) throw err;
      const ms = backoff(attempt + 1);
      opts.onWait?.(ms, 'backoff');
      await opts.clock.sleep(ms);
    }
  }
}

export async function listUsers(api: WhitelistApi, q: { page?: number; page_size?: number; status?: string; q?: string }): Promise<UserList> {
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
  return parse(GatewaySchema, (await api.request('GET', CUSTOMER_PATHS.gateway)).data, 'the gateway');
}

export async function createUser(api: WhitelistApi, username: string, fields: UserFields, opts: WriteOptions): Promise<User> {
  return parse(UserSchema, (await write(api, 'POST', CUSTOMER_PATHS.users, { username, ...fields }, opts))!.data, 'a user');
}

export async function patchUser(api: WhitelistApi, username: string, fields: UserFields, opts: WriteOptions): Promise<User> {
  return parse(UserSchema, (await write(api, 'PATCH', userPath(username), fields, opts))!.data, 'a user');
}

export async function setPassword(api: WhitelistApi, username: string, password: string | undefined, opts: WriteOptions): Promise<Credential> {
  const body = password !== undefined ? { password } : {};
  return parse(CredentialSchema, (await write(api, 'POST', `${userPath(username)}/password`, body, opts))!.data, 'a password');
}

export async function deleteUser(api: WhitelistApi, username: string, opts: WriteOptions): Promise<void> {
  // A resend after a lost answer may find it gone: our own first request deleted it.
  await write(api, 'DELETE', userPath(username), undefined, opts, undefined, (err) => err instanceof ApiError && err.httpStatus === 404);
}

export function parseUserBatch(data: unknown): UserBatch {
  return parse(UserBatchSchema, data, 'a batch result');
}
