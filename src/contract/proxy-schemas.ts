// The customer API's proxy users, target rules and gateway (docs/api.md, "Proxy users"): the list's query, and the
// shapes of requests and answers (the daemon's /openapi.json is generated from them; proxyctl decodes with them).
// Bodies are checked field by field in the daemon (src/daemon/services/proxy-user-input.ts) so a refusal names the
// field and a batch refuses one item, not the request; these schemas describe the same fields.
import { z } from 'zod';
import { DEFAULT_PAGE_SIZE, MAX_PAGE, MAX_PAGE_SIZE } from './paths.js';
import { PROXY_USERNAME_PATTERN } from './proxy-username.js';

const positiveInt = (max: number) =>
  z
    .string()
    .regex(/^[1-9][0-9]{0,8}$/)
    .transform((s) => Number(s))
    .refine((n) => n <= max);

/** GET /openapi/v1/proxy/users: `q` is a username prefix (exact, case-sensitive). */
export const ProxyUsersQuerySchema = z.strictObject({
  page: positiveInt(MAX_PAGE).optional().default(1),
  page_size: positiveInt(MAX_PAGE_SIZE).optional().default(DEFAULT_PAGE_SIZE),
  status: z.enum(['all', 'active', 'disabled']).optional().default('all'),
  q: z
    .string()
    .regex(/^[A-Za-z0-9._-]{1,64}$/)
    .optional(),
});
export type ProxyUsersQuery = z.infer<typeof ProxyUsersQuerySchema>;

const RuleList = z
  .array(z.string())
  .describe('domain patterns (example.com: it and its subdomains; *.example.com: subdomains only) and CIDRs');

const UserSettingsShape = {
  traffic_limit: z
    .union([z.number().int().min(1), z.string(), z.null()])
    .optional()
    .describe('bytes per the account\'s period (a number, or a size such as "50GiB"); null: none'),
  max_connections: z
    .union([z.number().int().min(1), z.null()])
    .optional()
    .describe('concurrent connections, fleet-wide; null: none'),
  rate_limit: z
    .union([z.string(), z.number().int().min(8), z.null()])
    .optional()
    .describe('each way, per node ("10mbit", or bits per second); null: none'),
  expires_at: z
    .union([z.string(), z.null()])
    .optional()
    .describe('ISO 8601; past it the user is refused like an expired plan; null: never'),
  allow: RuleList.optional(),
  deny: RuleList.optional(),
};

export const NewProxyUserSchema = z.strictObject({
  username: z
    .string()
    .regex(new RegExp(`^${PROXY_USERNAME_PATTERN}$`))
    .describe('3-64 of A-Z a-z 0-9 . _ -; "-session-", "-country-", "-city-" are reserved'),
  password: z
    .union([z.string(), z.null()])
    .optional()
    .describe('at least 10 characters; absent or null: one is generated (24 characters)'),
  status: z.enum(['active', 'disabled']).optional(),
  ...UserSettingsShape,
});

export const NewProxyUsersSchema = z.strictObject({ items: z.array(NewProxyUserSchema).min(1).max(100) });

export const ProxyUserPatchSchema = z.strictObject({
  status: z.enum(['active', 'disabled']).optional(),
  ...UserSettingsShape,
});

export const PasswordBodySchema = z.strictObject({ password: z.union([z.string(), z.null()]).optional() });

export const TargetRulesBodySchema = z.strictObject({ allow: RuleList.optional(), deny: RuleList.optional() });

export const ProxyUserSchema = z.object({
  username: z.string(),
  status: z.enum(['active', 'disabled']),
  created_at: z.string(),
  traffic_limit: z.number().nullable(),
  max_connections: z.number().nullable(),
  rate_limit: z.string().nullable(),
  expires_at: z.string().nullable(),
  allow: z.array(z.string()),
  deny: z.array(z.string()),
  used: z.object({ bytes_up: z.number(), bytes_down: z.number(), period_start: z.string() }),
});
export type ProxyUserData = z.infer<typeof ProxyUserSchema>;

export const ProxyUserCreatedSchema = ProxyUserSchema.extend({ password: z.string() });

export const ProxyUsersPageSchema = z.object({
  items: z.array(ProxyUserSchema),
  page: z.number(),
  page_size: z.number(),
  total: z.number(),
});

export const ProxyUsersBatchResultSchema = z.object({
  success_count: z.number(),
  failed_count: z.number(),
  failed_items: z.array(z.object({ username: z.string().nullable(), code: z.number(), reason: z.string() })),
  created: z.array(z.object({ username: z.string(), password: z.string() })),
});
export type ProxyUsersBatchResult = z.infer<typeof ProxyUsersBatchResultSchema>;

export const PasswordDataSchema = z.object({ username: z.string(), password: z.string() });
export const DeletedUserSchema = z.object({ username: z.string() });
export const TargetRulesSchema = z.object({ allow: z.array(z.string()), deny: z.array(z.string()) });

export const GatewayDataSchema = z.object({
  http: z.string().nullable().describe('HOST:PORT of the HTTP proxy; null: not served'),
  socks5: z.string().nullable().describe('HOST:PORT of the SOCKS5 proxy; null: not served'),
  udp: z.boolean(),
  locations: z.array(z.object({ country: z.string(), cities: z.array(z.string()), exits: z.number() })),
});
export type GatewayData = z.infer<typeof GatewayDataSchema>;

/**
 * A proxy user's settings as command-line flags give them (text, before checking): `proxyctl users create|set` and
 * `proxyd admin proxy-user set` take the same six.
 */
export interface ProxyUserSettingFlags {
  trafficLimit?: string;
  maxConnections?: string;
  rateLimit?: string;
  expires?: string;
  allow?: string;
  deny?: string;
}
