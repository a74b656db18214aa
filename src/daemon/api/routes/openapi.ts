// GET /openapi.json: OpenAPI 3.1 of the customer endpoints (whitelist, usage, and those of API keys), generated from the very zod schemas
// that validate requests (contract/schemas.ts), so the document cannot drift from the code.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { Code, HTTP_STATUS, TOP_MESSAGE } from '../../../contract/codes.js';
import {
  API_KEY_PARAM,
  API_PATHS,
  AUDIT_PATH,
  IPS_PATHS,
  KEY_LIMITS,
  DAEMON_PATHS,
  DEFAULT_DOMAINS_LIMIT,
  MAX_BATCH_ITEMS,
  MAX_DOMAINS_LIMIT,
  MAX_PAGE,
  MAX_PAGE_SIZE,
  MAX_SERIES_POINTS,
  RATE_LIMITS,
  USAGE_PATHS,
} from '../../../contract/paths.js';
import {
  AddBodySchema,
  AuditDataSchema,
  AuditQuerySchema,
  BatchResultSchema,
  DeleteBodySchema,
  IpReplaceBodySchema,
  IpReplaceDataSchema,
  IpsDataSchema,
  EnvelopeSchema,
  ListDataSchema,
  ListQuerySchema,
  UsageDomainsDataSchema,
  UsageDomainsQuerySchema,
  UsageSeriesDataSchema,
  UsageSeriesQuerySchema,
  UsageSummaryDataSchema,
  UsageSummaryQuerySchema,
} from '../../../contract/schemas.js';
import { SCOPES, type Scope } from '../../../contract/scopes.js';
import { VERSION } from '../../../contract/version.js';
import { proxyPaths } from './openapi-proxy.js';

type Json = Record<string, unknown>;

const API_KEY_EXAMPLE = '<API_KEY>';

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Json {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, {
    io,
    target: 'draft-2020-12',
    unrepresentable: 'any',
  }) as Json;
  return rest;
}

function envelope(data: z.ZodType | null, example: { code: number; message: string; data: unknown }): Json {
  const schema = data ? EnvelopeSchema.extend({ data: data.nullable() }) : EnvelopeSchema.extend({ data: z.null() });
  return {
    content: {
      'application/json': {
        schema: jsonSchema(schema, 'output'),
        example: {
          code: example.code,
          message: example.message,
          requestId: '4f6c1f3e-3a0e-4c49-9d55-0f8e1c2b7a10',
          data: example.data,
        },
      },
    },
  };
}

function errorResponse(code: number, extra: Json = {}): Json {
  return {
    description: TOP_MESSAGE[code],
    ...envelope(null, { code, message: TOP_MESSAGE[code]!, data: null }),
    ...extra,
  };
}

const RETRY_AFTER = {
  'Retry-After': { description: 'seconds until a request may succeed', schema: { type: 'integer', minimum: 1 } },
};

function commonErrors(): Json {
  return {
    [String(HTTP_STATUS[Code.INVALID_API_KEY])]: errorResponse(Code.INVALID_API_KEY),
    [String(HTTP_STATUS[Code.RATE_LIMITED])]: errorResponse(Code.RATE_LIMITED, { headers: RETRY_AFTER }),
    [String(HTTP_STATUS[Code.SYSTEM])]: errorResponse(Code.SYSTEM),
    [String(HTTP_STATUS[Code.LIMITER_UNAVAILABLE])]: errorResponse(Code.LIMITER_UNAVAILABLE),
  };
}

/**
 * What an endpoint authenticated by an API key (docs/api.md, "Authentication") declares: the `bearer` scheme with
 * the scope it needs (`any`: every key), and the 403 of a key without it. Spread into the operation.
 */
export function keyOperation(scope: Scope | 'any'): Json {
  return {
    security: [{ bearer: scope === 'any' ? [] : [scope] }],
    'x-scope': scope,
  };
}

/** The errors of an API key endpoint: those of every endpoint, and 403/10403 naming the missing scope. */
export function keyErrors(scope: Scope | 'any'): Json {
  const missing = `the key lacks scope ${scope === 'any' ? 'usage:read' : scope}`;
  return {
    ...commonErrors(),
    '401': errorResponse(Code.INVALID_API_KEY, {
      headers: {
        'WWW-Authenticate': {
          description: 'Bearer realm="proxyd", the same for every cause',
          schema: { type: 'string' },
        },
      },
    }),
    ...(scope === 'any'
      ? {}
      : {
          '403': {
            description: 'the key lacks the scope',
            ...envelope(null, { code: Code.MISSING_SCOPE, message: missing, data: null }),
          },
        }),
  };
}

/** A GET endpoint's query parameters, from the zod schema that validates them. */
function queryParameters(
  schema: z.ZodType,
  examples: Record<string, unknown>,
  descriptions: Record<string, string> = {},
): Json[] {
  const q = jsonSchema(schema, 'input') as { properties: Record<string, Json>; required?: string[] };
  return Object.entries(q.properties).map(([name, s]) => ({
    name,
    in: 'query',
    required: q.required?.includes(name) ?? false,
    ...(descriptions[name] ? { description: descriptions[name] } : {}),
    schema: s,
    example: examples[name],
  }));
}

function listParameters(): Json[] {
  return queryParameters(
    ListQuerySchema,
    { page: '1', page_size: '20', status: 'active', ip: '203.0.113.7' },
    { page: `page number, 1..${MAX_PAGE}`, page_size: `entries per page, 1..${MAX_PAGE_SIZE}` },
  );
}

const RANGE_DESCRIPTIONS = {
  from: "ISO 8601 date (midnight UTC) or date-time with a zone; default: the start of the current period (the plan's, else this calendar month, UTC)",
  to: 'ISO 8601, exclusive; default: now',
  user: 'a proxy username, or ip:A.B.C.D for whitelist traffic',
};

const totals = { bytes_up: 1_234_567, bytes_down: 9_876_543, connections: 12 };

function usagePaths(): Json {
  const ok = (what: string, schema: z.ZodType, data: unknown): Json => ({
    '200': {
      description: `${what} (code 200), or 10400 naming the field of a bad query`,
      ...envelope(schema, { code: Code.OK, message: 'success', data }),
    },
    ...keyErrors('usage:read'),
  });
  return {
    [USAGE_PATHS.summary]: {
      get: {
        operationId: 'usageSummary',
        summary:
          "The account's usage over a range: totals, its plan, and per proxy user (whitelist traffic under ip:A.B.C.D)",
        ...keyOperation('usage:read'),
        parameters: [
          ...queryParameters(
            UsageSummaryQuerySchema,
            { from: '2026-11-01', to: '2026-11-21T10:00:00Z' },
            RANGE_DESCRIPTIONS,
          ),
        ],
        responses: ok('totals and users', UsageSummaryDataSchema, {
          from: '2026-11-01T00:00:00Z',
          to: '2026-11-21T10:00:01Z',
          plan: { traffic_limit: 53_687_091_200, period: 'month', max_connections: 100, expires_at: null },
          ...totals,
          users: [{ user: 'alice', ...totals }],
        }),
        'x-codeSamples': bearerCurl('GET', USAGE_PATHS.summary),
      },
    },
    [USAGE_PATHS.series]: {
      get: {
        operationId: 'usageSeries',
        summary: `Usage per hour or day, oldest first, buckets without traffic as zeros; at most ${MAX_SERIES_POINTS} points`,
        ...keyOperation('usage:read'),
        parameters: [
          ...queryParameters(
            UsageSeriesQuerySchema,
            { granularity: 'day', from: '2026-11-01', to: '2026-11-21', user: 'alice' },
            RANGE_DESCRIPTIONS,
          ),
        ],
        responses: ok('the points', UsageSeriesDataSchema, {
          granularity: 'day',
          points: [{ time: '2026-11-20T00:00:00Z', ...totals }],
        }),
        'x-codeSamples': bearerCurl('GET', USAGE_PATHS.series, undefined, '?granularity=day'),
      },
    },
    [USAGE_PATHS.domains]: {
      get: {
        operationId: 'usageDomains',
        summary:
          'Usage per registrable domain of the target (eTLD+1), largest first; those past limit are summed in other',
        ...keyOperation('usage:read'),
        parameters: [
          ...queryParameters(
            UsageDomainsQuerySchema,
            { from: '2026-11-01', to: '2026-11-21', user: 'alice', limit: '100' },
            {
              ...RANGE_DESCRIPTIONS,
              from: 'first day, YYYY-MM-DD (UTC); default: the first day of the current period',
              to: 'last day, YYYY-MM-DD (UTC), inclusive; default: today',
              limit: `how many domains by name (1..${MAX_DOMAINS_LIMIT}, default ${DEFAULT_DOMAINS_LIMIT})`,
            },
          ),
        ],
        responses: ok('the domains', UsageDomainsDataSchema, {
          domains: [{ domain: 'example.co.uk', ...totals }],
          other: { bytes_up: 1024, bytes_down: 4096, connections: 1 },
        }),
        'x-codeSamples': bearerCurl('GET', USAGE_PATHS.domains, undefined, '?limit=10'),
      },
    },
  };
}

function auditPaths(): Json {
  return {
    [AUDIT_PATH]: {
      get: {
        operationId: 'auditLog',
        summary: "The account's audit log, newest first: who changed what, from where (the account is the key's)",
        ...keyOperation('audit:read'),
        parameters: queryParameters(
          AuditQuerySchema,
          { from: '2026-11-01', to: '2026-11-21T10:00:00Z', action: 'whitelist', page: '1', page_size: '20' },
          {
            from: 'ISO 8601 date or date-time with a zone; records at or after it',
            to: 'ISO 8601, exclusive',
            action: 'an action (whitelist.added) or a family (whitelist: every whitelist.*)',
            page: `page number, 1..${MAX_PAGE}`,
            page_size: `records per page, 1..${MAX_PAGE_SIZE}`,
          },
        ),
        responses: {
          '200': {
            description: 'a page of records (code 200), or 10400 naming the field of a bad query',
            ...envelope(AuditDataSchema, {
              code: Code.OK,
              message: 'success',
              data: {
                items: [
                  {
                    id: 812,
                    time: '2026-11-21T10:00:00.112Z',
                    account: 'owner@example.com',
                    actor: { type: 'token', id: 'ak0123456789abcdef0123' },
                    source_ip: '203.0.113.7',
                    request_id: '4f6c1f3e-3a0e-4c49-9d55-0f8e1c2b7a10',
                    action: 'whitelist.added',
                    target: null,
                    details: { ips: ['203.0.113.7'] },
                    seq: 41,
                    hash: 'c0ffee…',
                  },
                ],
                page: 1,
                page_size: 20,
                total: 1,
              },
            }),
          },
          ...keyErrors('audit:read'),
        },
        'x-codeSamples': bearerCurl('GET', AUDIT_PATH, undefined, '?action=whitelist&page_size=50'),
      },
    },
  };
}

function ipsPaths(): Json {
  const replaceExample = { address: '203.0.113.10' };
  return {
    [IPS_PATHS.list]: {
      get: {
        operationId: 'listDedicatedIps',
        summary:
          "The account's dedicated egress addresses: country, city, since when, bytes in the usage summary's default period, replacements used this month",
        ...keyOperation('users:read'),
        responses: {
          '200': {
            description: 'the addresses (code 200)',
            ...envelope(IpsDataSchema, {
              code: Code.OK,
              message: 'success',
              data: {
                items: [
                  {
                    address: '203.0.113.10',
                    country: 'us',
                    city: 'nyc',
                    since: '2026-11-02T09:00:00Z',
                    bytes_up: 1_234_567,
                    bytes_down: 9_876_543,
                  },
                ],
                total: 1,
                period_start: '2026-11-01T00:00:00Z',
                replacements: { used: 1, limit: 3 },
              },
            }),
          },
          ...keyErrors('users:read'),
        },
        'x-codeSamples': bearerCurl('GET', IPS_PATHS.list),
      },
    },
    [IPS_PATHS.replace]: {
      post: {
        operationId: 'replaceDedicatedIp',
        summary:
          "Swap one of the account's dedicated addresses for a free one of the same node (else the same country); the old one is quarantined, its open connections end within 2 s",
        ...keyOperation('users:write'),
        requestBody: {
          required: true,
          content: {
            'application/json': { schema: jsonSchema(IpReplaceBodySchema, 'input'), example: replaceExample },
          },
        },
        responses: {
          '200': {
            description: 'replaced (code 200), or 10400 naming the field of a bad body',
            ...envelope(IpReplaceDataSchema, {
              code: Code.OK,
              message: 'success',
              data: { old: '203.0.113.10', new: '203.0.113.11' },
            }),
          },
          '404': {
            description: "not one of the account's addresses",
            ...envelope(null, {
              code: Code.NOT_FOUND,
              message: "not found: 203.0.113.10 is not one of the account's dedicated addresses",
              data: null,
            }),
          },
          ...keyErrors('users:write'),
          '429': {
            description:
              "the month's replacements are used (Retry-After: seconds to the next month, UTC), or the key's rate limit",
            ...envelope(null, {
              code: Code.RATE_LIMITED,
              message: 'rate limited: 3 replacements a calendar month, used',
              data: null,
            }),
            headers: RETRY_AFTER,
          },
          '503': {
            description: 'no free address to replace with (nothing changed)',
            ...envelope(null, {
              code: Code.LIMITER_UNAVAILABLE,
              message: 'no free address to replace with',
              data: null,
            }),
          },
        },
        'x-codeSamples': bearerCurl('POST', IPS_PATHS.replace, replaceExample),
      },
    },
  };
}

const apiKeyParam = {
  name: API_KEY_PARAM,
  in: 'query',
  required: true,
  description: 'account API token `<accessKey>.<secret>` (exactly one; headers are never read)',
  schema: { type: 'string', minLength: 1 },
  example: API_KEY_EXAMPLE,
};

const batchOk = (what: string) =>
  ({
    description: `${what}: 200 when every item succeeded, 10431 when some failed, 10400/10413 when nothing was processed`,
    ...envelope(BatchResultSchema, {
      code: Code.PARTIAL,
      message: '1 succeeded, 1 failed',
      data: {
        success_count: 1,
        failed_count: 1,
        failed_items: [{ ip: '10.0.0.1', code: 10421, reason: 'not a public IPv4 address' }],
      },
    }),
  }) as Json;

function curl(method: 'GET' | 'POST', path: string, body?: unknown, extraQuery = ''): Json[] {
  const url = `http://127.0.0.1:8080${path}?${API_KEY_PARAM}=${API_KEY_EXAMPLE}${extraQuery}`;
  const source =
    method === 'GET'
      ? `curl -s '${url}'`
      : `curl -s -X POST '${url}' -H 'Content-Type: application/json' -d '${JSON.stringify(body)}'`;
  return [{ lang: 'shell', label: 'curl', source }];
}

/** curl of an API key endpoint: the key in the Authorization header, never in the URL. */
export function bearerCurl(
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
  path: string,
  body?: unknown,
  query = '',
): Json[] {
  const url = `http://127.0.0.1:8080${path}${query}`;
  const head = `curl -s${method === 'GET' ? '' : ` -X ${method}`} -H 'Authorization: Bearer ${API_KEY_EXAMPLE}'`;
  const source =
    body === undefined
      ? `${head} '${url}'`
      : `${head} -H 'Content-Type: application/json' '${url}' -d '${JSON.stringify(body)}'`;
  return [{ lang: 'shell', label: 'curl', source }];
}

export function buildOpenApiDocument(version: string): Json {
  const addExample = { items: [{ ip: '203.0.113.7', remark: 'office' }] };
  const deleteExample = { ips: ['203.0.113.7'] };
  return {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    info: {
      title: 'proxyd customer API',
      version,
      description:
        `Every response is the envelope {code, message, requestId, data}; the request id is also in X-Request-Id. ` +
        `The three whitelist endpoints take the account API token in the api_key query parameter (security scheme api_key); ` +
        `every other endpoint takes an API key pxk_… in Authorization: Bearer (scheme bearer), holding the scope the ` +
        `endpoint names (x-scope; 403/10403 names a missing one). The token and a key never open each other's endpoints. ` +
        `Limits per token per rolling 60 s: list ${RATE_LIMITS.list}, add ${RATE_LIMITS.add}, delete ${RATE_LIMITS.delete}; ` +
        `per API key: ${KEY_LIMITS.reads} reads and ${KEY_LIMITS.writes} writes (operator's --key-limits), the usage endpoints ${RATE_LIMITS.usage} together. ` +
        `Batches hold 1..${MAX_BATCH_ITEMS} items, each committed on its own.`,
    },
    // Relative: resolved against where the document was fetched, so it names this daemon, not the default address.
    servers: [{ url: '/', description: 'the daemon this document was fetched from' }],
    components: {
      securitySchemes: {
        api_key: {
          type: 'apiKey',
          in: 'query',
          name: API_KEY_PARAM,
          description: 'the account API token <accessKey>.<secret>: the three whitelist endpoints only',
        },
        bearer: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'pxk_<id>_<secret>',
          description: `an API key with scopes (${SCOPES.join(', ')}): every other endpoint`,
        },
      },
    },
    paths: {
      [API_PATHS.list]: {
        get: {
          operationId: 'listWhitelist',
          security: [{ api_key: [] }],
          summary: "List the account's whitelist, newest first",
          parameters: [apiKeyParam, ...listParameters()],
          responses: {
            '200': {
              description: 'a page of entries (code 200), or 10400 for a bad query',
              ...envelope(ListDataSchema, {
                code: Code.OK,
                message: 'success',
                data: {
                  items: [
                    {
                      whitelist_id: 42,
                      ip: '203.0.113.7',
                      remark: 'office',
                      status: 1,
                      created_at: '2026-11-21T10:00:00Z',
                    },
                  ],
                  page: 1,
                  page_size: 20,
                  total: 1,
                },
              }),
            },
            ...commonErrors(),
          },
          'x-codeSamples': curl('GET', API_PATHS.list),
        },
      },
      [API_PATHS.add]: {
        post: {
          operationId: 'addWhitelist',
          security: [{ api_key: [] }],
          summary: 'Add IPv4 addresses to the whitelist',
          parameters: [apiKeyParam],
          requestBody: {
            required: true,
            content: { 'application/json': { schema: jsonSchema(AddBodySchema, 'input'), example: addExample } },
          },
          responses: {
            '200': batchOk('added'),
            [String(HTTP_STATUS[Code.NOT_VERIFIED])]: errorResponse(Code.NOT_VERIFIED),
            ...commonErrors(),
          },
          'x-codeSamples': curl('POST', API_PATHS.add, addExample),
        },
      },
      [API_PATHS.delete]: {
        post: {
          operationId: 'deleteWhitelist',
          security: [{ api_key: [] }],
          summary: 'Remove IPv4 addresses from the whitelist',
          parameters: [apiKeyParam],
          requestBody: {
            required: true,
            content: { 'application/json': { schema: jsonSchema(DeleteBodySchema, 'input'), example: deleteExample } },
          },
          responses: { '200': batchOk('deleted'), ...commonErrors() },
          'x-codeSamples': curl('POST', API_PATHS.delete, deleteExample),
        },
      },
      ...usagePaths(),
      ...proxyPaths({ envelope, jsonSchema, queryParameters, keyOperation, keyErrors, bearerCurl }),
      ...auditPaths(),
      ...ipsPaths(),
    },
  };
}

let cached: string | null = null;

function documentText(): string {
  if (cached) return cached;
  cached = JSON.stringify(buildOpenApiDocument(VERSION));
  return cached;
}

export default function openapiRoute(app: FastifyInstance): void {
  app.get(DAEMON_PATHS.openapi, async (_request, reply) =>
    reply.type('application/json; charset=utf-8').header('cache-control', 'no-cache').send(documentText()),
  );
}
