// /openapi.json's entries for the proxy users, target rules and gateway endpoints (docs/api.md, "Proxy users"), from
// the contract's schemas (contract/proxy-schemas.ts). openapi.ts hands its helpers over (no import back: no cycle).
import type { z } from 'zod';
import { Code, HTTP_STATUS } from '../../../contract/codes.js';
import { MAX_BATCH_ITEMS, MAX_PAGE, MAX_PAGE_SIZE, PROXY_PATHS } from '../../../contract/paths.js';
import {
  DeletedUserSchema,
  GatewayDataSchema,
  NewProxyUserSchema,
  NewProxyUsersSchema,
  PasswordBodySchema,
  PasswordDataSchema,
  ProxyUserCreatedSchema,
  ProxyUserPatchSchema,
  ProxyUserSchema,
  ProxyUsersBatchResultSchema,
  ProxyUsersPageSchema,
  ProxyUsersQuerySchema,
  TargetRulesBodySchema,
  TargetRulesSchema,
} from '../../../contract/proxy-schemas.js';

type Json = Record<string, unknown>;
type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface OpenApiHelpers {
  envelope(data: z.ZodType | null, example: { code: number; message: string; data: unknown }): Json;
  jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Json;
  queryParameters(schema: z.ZodType, examples: Record<string, unknown>, descriptions?: Record<string, string>): Json[];
  keyOperation(scope: string): Json;
  keyErrors(scope: string): Json;
  bearerCurl(method: Method, path: string, body?: unknown, query?: string): Json[];
}

const USER_EXAMPLE = {
  username: 'alice',
  status: 'active',
  created_at: '2026-11-21T10:00:00Z',
  traffic_limit: 53_687_091_200,
  max_connections: 20,
  rate_limit: '10mbit',
  expires_at: null,
  allow: [],
  deny: ['*.example.net'],
  used: { bytes_up: 1_234_567, bytes_down: 9_876_543, period_start: '2026-11-01T00:00:00Z' },
};

const USERNAME_PARAM = { name: 'username', in: 'path', required: true, schema: { type: 'string' }, example: 'alice' };
const IDEMPOTENCY_PARAM = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    '1-255 printable characters: within 24 h the same key with the same method, path and body returns the first answer again (header Idempotent-Replayed: true) without doing anything; with another body, 409/10409',
  schema: { type: 'string', minLength: 1, maxLength: 255 },
  example: '6f1c2d9e-6a53-4e0b-8c55-4b1d0f0f7a21',
};

export function proxyPaths(h: OpenApiHelpers): Json {
  const ok = (what: string, schema: z.ZodType, data: unknown, scope: string, extra: Json = {}): Json => ({
    '200': {
      description: `${what} (code 200); 10400 naming the field of a bad request`,
      ...h.envelope(schema, { code: Code.OK, message: 'success', data }),
    },
    ...h.keyErrors(scope),
    ...extra,
  });
  const notFound = {
    [String(HTTP_STATUS[Code.NOT_FOUND])]: {
      description: "no such proxy user: absent and another account's alike",
      ...h.envelope(null, { code: Code.NOT_FOUND, message: 'not found: no such proxy user', data: null }),
    },
  };
  const conflict = (why: string) => ({
    [String(HTTP_STATUS[Code.CONFLICT])]: {
      description: why,
      ...h.envelope(null, { code: Code.CONFLICT, message: 'conflict: username alice is taken', data: null }),
    },
  });
  const body = (schema: z.ZodType, example: unknown, required = true): Json => ({
    requestBody: { required, content: { 'application/json': { schema: h.jsonSchema(schema, 'input'), example } } },
  });
  const write = (scope: string): Json => ({ ...h.keyOperation(scope) });
  const createExample = { username: 'alice', traffic_limit: '50GiB', max_connections: 20, deny: ['*.example.net'] };
  return {
    [PROXY_PATHS.users]: {
      get: {
        operationId: 'listProxyUsers',
        summary: "A page of the account's proxy users, by username",
        ...h.keyOperation('users:read'),
        parameters: h.queryParameters(
          ProxyUsersQuerySchema,
          { page: '1', page_size: '20', status: 'active', q: 'ali' },
          {
            page: `page number, 1..${MAX_PAGE}`,
            page_size: `users per page, 1..${MAX_PAGE_SIZE}`,
            q: 'usernames starting with this (exact, case-sensitive)',
          },
        ),
        responses: ok(
          'a page of users',
          ProxyUsersPageSchema,
          { items: [USER_EXAMPLE], page: 1, page_size: 20, total: 1 },
          'users:read',
        ),
        'x-codeSamples': h.bearerCurl('GET', PROXY_PATHS.users, undefined, '?status=active'),
      },
      post: {
        operationId: 'createProxyUser',
        summary: 'Create a proxy user; its password (given, or generated: 24 characters) is in the answer once',
        ...write('users:write'),
        parameters: [IDEMPOTENCY_PARAM],
        ...body(NewProxyUserSchema, createExample),
        responses: ok(
          'the user and its password',
          ProxyUserCreatedSchema,
          { ...USER_EXAMPLE, password: 'q3J9xV0b2mKpL7sT1wYzA4cE' },
          'users:write',
          conflict('the username is taken (or the Idempotency-Key was used with another request)'),
        ),
        'x-codeSamples': h.bearerCurl('POST', PROXY_PATHS.users, createExample),
      },
    },
    [PROXY_PATHS.usersBatch]: {
      post: {
        operationId: 'createProxyUsers',
        summary: `Create 1..${MAX_BATCH_ITEMS} proxy users, each on its own; the batch result plus each created user's password`,
        ...write('users:write'),
        parameters: [IDEMPOTENCY_PARAM],
        ...body(NewProxyUsersSchema, { items: [{ username: 'alice' }, { username: 'bob', max_connections: 5 }] }),
        responses: ok(
          '200 when every item succeeded, 10431 when some failed (failed_items: 10400 a bad value naming the field, 10409 taken, 10500 retry the item); 10400/10413 when nothing was processed',
          ProxyUsersBatchResultSchema,
          {
            success_count: 1,
            failed_count: 1,
            failed_items: [{ username: 'bob', code: 10409, reason: 'username taken' }],
            created: [{ username: 'alice', password: 'q3J9xV0b2mKpL7sT1wYzA4cE' }],
          },
          'users:write',
        ),
        'x-codeSamples': h.bearerCurl('POST', PROXY_PATHS.usersBatch, { items: [{ username: 'alice' }] }),
      },
    },
    [PROXY_PATHS.user.replace(':username', '{username}')]: {
      get: {
        operationId: 'showProxyUser',
        summary: 'One proxy user',
        ...h.keyOperation('users:read'),
        parameters: [USERNAME_PARAM],
        responses: ok('the user', ProxyUserSchema, USER_EXAMPLE, 'users:read', notFound),
        'x-codeSamples': h.bearerCurl('GET', PROXY_PATHS.user.replace(':username', 'alice')),
      },
      patch: {
        operationId: 'changeProxyUser',
        summary:
          'Change any field but username and password; null clears a limit; status disabled refuses new connections and closes open ones on every node within 2 s',
        ...write('users:write'),
        parameters: [USERNAME_PARAM, IDEMPOTENCY_PARAM],
        ...body(ProxyUserPatchSchema, { status: 'disabled', traffic_limit: null }),
        responses: ok(
          'the user',
          ProxyUserSchema,
          { ...USER_EXAMPLE, status: 'disabled', traffic_limit: null },
          'users:write',
          notFound,
        ),
        'x-codeSamples': h.bearerCurl('PATCH', PROXY_PATHS.user.replace(':username', 'alice'), { status: 'disabled' }),
      },
      delete: {
        operationId: 'deleteProxyUser',
        summary:
          "Delete a proxy user: its open connections are closed within 2 s; its usage stays in the account's history",
        ...write('users:write'),
        parameters: [USERNAME_PARAM, IDEMPOTENCY_PARAM],
        responses: ok('the user deleted', DeletedUserSchema, { username: 'alice' }, 'users:write', notFound),
        'x-codeSamples': h.bearerCurl('DELETE', PROXY_PATHS.user.replace(':username', 'alice')),
      },
    },
    [PROXY_PATHS.userPassword.replace(':username', '{username}')]: {
      post: {
        operationId: 'rotateProxyUserPassword',
        summary: 'A new password (given, or generated), in the answer once; the old one fails on every node within 1 s',
        ...write('users:write'),
        parameters: [USERNAME_PARAM, IDEMPOTENCY_PARAM],
        ...body(PasswordBodySchema, {}, false),
        responses: ok(
          'the new password',
          PasswordDataSchema,
          { username: 'alice', password: 'q3J9xV0b2mKpL7sT1wYzA4cE' },
          'users:write',
          notFound,
        ),
        'x-codeSamples': h.bearerCurl('POST', PROXY_PATHS.userPassword.replace(':username', 'alice')),
      },
    },
    [PROXY_PATHS.rules]: {
      get: {
        operationId: 'getTargetRules',
        summary: "The account's target rules",
        ...h.keyOperation('rules:read'),
        responses: ok(
          'the rules',
          TargetRulesSchema,
          { allow: [], deny: ['*.example.net', '192.0.2.0/24'] },
          'rules:read',
        ),
        'x-codeSamples': h.bearerCurl('GET', PROXY_PATHS.rules),
      },
      put: {
        operationId: 'setTargetRules',
        summary:
          'Set the target rules: each list given replaces that list ([] empties it), a list not given keeps its value; one bad item changes nothing (10400 naming it)',
        ...write('rules:write'),
        parameters: [IDEMPOTENCY_PARAM],
        ...body(TargetRulesBodySchema, { deny: ['*.example.net', '192.0.2.0/24'], allow: [] }),
        responses: ok(
          'the rules now',
          TargetRulesSchema,
          { allow: [], deny: ['*.example.net', '192.0.2.0/24'] },
          'rules:write',
        ),
        'x-codeSamples': h.bearerCurl('PUT', PROXY_PATHS.rules, { deny: ['*.example.net'] }),
      },
    },
    [PROXY_PATHS.gateway]: {
      get: {
        operationId: 'gateway',
        summary:
          'What a customer needs to build proxy URLs: the addresses customers reach, UDP, and the locations connections can exit from',
        ...h.keyOperation('any'),
        responses: ok(
          'the gateway',
          GatewayDataSchema,
          {
            http: 'proxy.example.com:3128',
            socks5: 'proxy.example.com:1080',
            udp: true,
            locations: [{ country: 'us', cities: ['nyc'], exits: 2 }],
          },
          'any',
        ),
        'x-codeSamples': h.bearerCurl('GET', PROXY_PATHS.gateway),
      },
    },
  };
}
