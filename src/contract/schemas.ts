// zod schemas of requests and responses: validated at the daemon's edge, decoded by the CLI.
import { z } from 'zod';
import { DEFAULT_DOMAINS_LIMIT, DEFAULT_PAGE_SIZE, MAX_DOMAINS_LIMIT, MAX_PAGE, MAX_PAGE_SIZE } from './paths.js';
import { isStrictIPv4 } from './ipv4.js';
import { isoTimeProblem } from './time.js';

// ---- requests ----

const AddItemSchema = z.strictObject({
  ip: z.string(),
  remark: z.string().optional(),
});
export const AddBodySchema = z.strictObject({
  items: z.array(AddItemSchema).min(1),
});
export const DeleteBodySchema = z.strictObject({
  ips: z.array(z.string()).min(1),
});

const positiveInt = (max: number) =>
  z
    .string()
    .regex(/^[1-9][0-9]{0,8}$/)
    .transform((s) => Number(s))
    .refine((n) => n <= max);

/** Query of the list endpoint, without `api_key` (checked before this). */
export const ListQuerySchema = z.strictObject({
  page: positiveInt(MAX_PAGE).optional().default(1),
  page_size: positiveInt(MAX_PAGE_SIZE).optional().default(DEFAULT_PAGE_SIZE),
  status: z.enum(['all', 'active', 'disabled']).optional().default('all'),
  ip: z
    .string()
    .refine((s) => isStrictIPv4(s))
    .optional(),
});
export type ListQuery = z.infer<typeof ListQuerySchema>;

const ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2}))?$/;

/**
 * An ISO 8601 date (`2026-11-01`, midnight UTC) or date-time with a zone (`2026-11-01T10:00:00Z`,
 * `…+02:00`) in ms; null for anything else, impossible dates (`2026-02-30`) included.
 */
export function parseApiTime(s: string): number | null {
  const m = ISO_TIME.exec(s);
  if (!m) return null;
  const [y, mo, d, h = '0', mi = '0', sec = '0'] = m.slice(1, 7).map((x) => x ?? '0') as string[];
  const t = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(sec));
  const back = new Date(t);
  // Date.UTC rolls over (Feb 30 → Mar 2, 24:00 → next day): only a date that reads back the same is one.
  if (
    back.getUTCFullYear() !== Number(y) ||
    back.getUTCMonth() !== Number(mo) - 1 ||
    back.getUTCDate() !== Number(d) ||
    back.getUTCHours() !== Number(h) ||
    back.getUTCMinutes() !== Number(mi) ||
    back.getUTCSeconds() !== Number(sec)
  )
    return null;
  const ms = m[7] ? Math.round(Number(m[7]) * 1000) : 0;
  const zone = m[8];
  // An offset no clock has (+25:00, +05:60) is not a zone.
  if (zone && zone !== 'Z' && (Number(zone.slice(1, 3)) > 23 || Number(zone.slice(4, 6)) > 59)) return null;
  const offsetMin =
    !zone || zone === 'Z' ? 0 : (zone[0] === '-' ? -1 : 1) * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4, 6)));
  return t + ms - offsetMin * 60_000;
}

/** What the usage endpoints take as a time, and as a day (`domains`), as their refusals and proxyctl's say it. */
export const API_TIME_EXPECTED = 'an ISO 8601 date (2026-11-01) or date-time with a zone (2026-11-01T10:00:00Z)';
export const API_DAY_EXPECTED = 'a day, YYYY-MM-DD';

/** A day as the `domains` endpoint takes it (`2026-11-01`: its midnight UTC) in ms; null for anything else. */
export function parseApiDay(s: string): number | null {
  return /^\d{4}-\d{2}-\d{2}$/.test(s) ? parseApiTime(s) : null;
}

/** Why the API refuses a time, naming the part that is wrong (the 10400's words after the field). */
export function apiTimeProblem(s: string, day = false): string {
  if (day && !/^\d{4}-\d{2}-\d{2}$/.test(s)) return `expected ${API_DAY_EXPECTED}`;
  return isoTimeProblem(s, 'required') ?? `expected ${API_TIME_EXPECTED}`;
}

const isoTime = z
  .string()
  .max(40)
  // A `+` left unencoded in a URL arrives as a space: a trailing ` 02:00` is the offset `+02:00`.
  .transform((s) => s.replace(/ (\d{2}:\d{2})$/, '+$1'))
  .refine((s) => parseApiTime(s) !== null, { error: (i) => apiTimeProblem(String(i.input)) })
  .transform((s) => parseApiTime(s)!);
const isoDay = z
  .string()
  .max(40)
  .refine((s) => parseApiDay(s) !== null, { error: (i) => apiTimeProblem(String(i.input), true) })
  .transform((s) => parseApiDay(s)!);
/** A proxy username, or `ip:A.B.C.D` for whitelist traffic; neither holds a control character (PostgreSQL's text holds no NUL). */
const usageUser = z
  .string()
  .min(1)
  .max(128)
  .refine((s) => !/[\u0000-\u001f\u007f]/.test(s));

/** Query of /usage/summary, without `api_key`: times in ms, `to` exclusive. */
export const UsageSummaryQuerySchema = z.strictObject({
  from: isoTime.optional(),
  to: isoTime.optional(),
});
export type UsageSummaryQuery = z.infer<typeof UsageSummaryQuerySchema>;

export const UsageSeriesQuerySchema = z.strictObject({
  granularity: z.enum(['hour', 'day']),
  from: isoTime.optional(),
  to: isoTime.optional(),
  user: usageUser.optional(),
});
export type UsageSeriesQuery = z.infer<typeof UsageSeriesQuerySchema>;

/** Query of /usage/domains: `from` and `to` are days, both inclusive. */
export const UsageDomainsQuerySchema = z.strictObject({
  from: isoDay.optional(),
  to: isoDay.optional(),
  user: usageUser.optional(),
  limit: positiveInt(MAX_DOMAINS_LIMIT).optional().default(DEFAULT_DOMAINS_LIMIT),
});
export type UsageDomainsQuery = z.infer<typeof UsageDomainsQuerySchema>;

/** Query of /audit: a time range [from, to) (ISO 8601), an action or a family of them (`whitelist`), a page. */
export const AuditQuerySchema = z.strictObject({
  from: isoTime.optional(),
  to: isoTime.optional(),
  action: z
    .string()
    .regex(/^[a-z0-9_]{1,32}(\.[a-z0-9_]{1,32})?$/, {
      error: 'expected an action such as whitelist.added, or a family such as whitelist',
    })
    .optional(),
  page: positiveInt(MAX_PAGE).optional().default(1),
  page_size: positiveInt(MAX_PAGE_SIZE).optional().default(DEFAULT_PAGE_SIZE),
});
export type AuditQuery = z.infer<typeof AuditQuerySchema>;

// ---- responses ----

export const EnvelopeSchema = z.object({
  code: z.number().int(),
  message: z.string(),
  requestId: z.string(),
  data: z.unknown().nullable(),
});

const WhitelistItemSchema = z.object({
  whitelist_id: z.number().int(),
  ip: z.string(),
  remark: z.string(),
  status: z.union([z.literal(1), z.literal(2)]),
  created_at: z.string(),
});
export type WhitelistItem = z.infer<typeof WhitelistItemSchema>;

export const ListDataSchema = z.object({
  items: z.array(WhitelistItemSchema),
  page: z.number().int(),
  page_size: z.number().int(),
  total: z.number().int(),
});
export type ListData = z.infer<typeof ListDataSchema>;

const FailedItemSchema = z.object({
  ip: z.string(),
  code: z.number().int(),
  reason: z.string(),
});
export type FailedItem = z.infer<typeof FailedItemSchema>;

export const BatchResultSchema = z.object({
  success_count: z.number().int(),
  failed_count: z.number().int(),
  failed_items: z.array(FailedItemSchema),
});
export type BatchResult = z.infer<typeof BatchResultSchema>;

const UsageTotalsSchema = z.object({
  bytes_up: z.number().int(),
  bytes_down: z.number().int(),
  connections: z.number().int(),
});
export type UsageTotals = z.infer<typeof UsageTotalsSchema>;

export const UsageSummaryDataSchema = z.object({
  from: z.string(),
  to: z.string(),
  plan: z
    .object({
      traffic_limit: z.number().int().nullable(),
      period: z.enum(['day', 'month', 'lifetime']),
      max_connections: z.number().int().nullable(),
      expires_at: z.string().nullable(),
    })
    .nullable(),
  ...UsageTotalsSchema.shape,
  users: z.array(z.object({ user: z.string(), ...UsageTotalsSchema.shape })),
  /** By dedicated egress address, when the account holds any (docs/api.md). */
  ips: z.array(z.object({ address: z.string(), ...UsageTotalsSchema.shape })).optional(),
});
/** `GET /openapi/v1/proxy/ips`: the account's dedicated addresses, bytes in the usage summary's default period. */
export const IpsDataSchema = z.object({
  items: z.array(
    z.object({
      address: z.string(),
      country: z.string().nullable(),
      city: z.string().nullable(),
      since: z.string(),
      bytes_up: z.number().int(),
      bytes_down: z.number().int(),
    }),
  ),
  total: z.number().int(),
  period_start: z.string(),
  replacements: z.object({ used: z.number().int(), limit: z.number().int() }),
});
export type IpsData = z.infer<typeof IpsDataSchema>;

/** `POST /openapi/v1/proxy/ips/replace`. */
export const IpReplaceBodySchema = z.strictObject({ address: z.string() });
export const IpReplaceDataSchema = z.object({ old: z.string(), new: z.string() });

export type UsageSummaryData = z.infer<typeof UsageSummaryDataSchema>;

export const UsageSeriesDataSchema = z.object({
  granularity: z.enum(['hour', 'day']),
  points: z.array(z.object({ time: z.string(), ...UsageTotalsSchema.shape })),
});
export type UsageSeriesData = z.infer<typeof UsageSeriesDataSchema>;

export const UsageDomainsDataSchema = z.object({
  domains: z.array(z.object({ domain: z.string(), ...UsageTotalsSchema.shape })),
  other: UsageTotalsSchema,
});
export type UsageDomainsData = z.infer<typeof UsageDomainsDataSchema>;

export const AuditDataSchema = z.object({
  items: z.array(
    z.object({
      id: z.number().int(),
      time: z.string(),
      account: z.string().nullable(),
      actor: z.object({ type: z.enum(['console', 'token', 'key', 'operator', 'system']), id: z.string().nullable() }),
      source_ip: z.string().nullable(),
      request_id: z.string().nullable(),
      action: z.string(),
      target: z.string().nullable(),
      details: z.record(z.string(), z.unknown()),
      seq: z.number().int(),
      hash: z.string(),
    }),
  ),
  page: z.number().int(),
  page_size: z.number().int(),
  total: z.number().int(),
});
export type AuditData = z.infer<typeof AuditDataSchema>;

// A path segment fit to echo back in a message: short and plain (client keys can hold any bytes).
const plainSegment = (s: PropertyKey): string =>
  /^[A-Za-z0-9_-]{1,32}$/.test(String(s)) ? String(s) : '(unprintable)';

// isoSeconds' answers: entries of one batch share a second, so a small cache saves most of the formatting.
const isoCache = new Map<number, string>();

/**
 * An instant (ms) as the API and `proxyd admin` write it: ISO 8601 UTC with a `Z`, whole seconds unless it has
 * milliseconds (`2026-11-21T10:00:00Z`, `2026-11-21T10:00:00.112Z`), never a `.000Z`.
 */
export function formatIsoTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.000Z$/, 'Z');
}

/** Unix seconds as ISO 8601 UTC with whole seconds and a `Z` (`2026-11-21T10:00:00Z`). */
export function isoSeconds(unixSeconds: number): string {
  let s = isoCache.get(unixSeconds);
  if (s === undefined) {
    s = formatIsoTime(unixSeconds * 1000);
    if (isoCache.size >= 4096) isoCache.clear();
    isoCache.set(unixSeconds, s);
  }
  return s;
}

/**
 * What is wrong with the first offending field of a zod error, when one of our refinements said it (`November
 * 2026 has 30 days`), for a 10400 message after the field's name; zod's own words stay out (types, not fixes).
 */
export function firstIssueDetail(err: z.ZodError): string | null {
  const issue = err.issues[0];
  return issue?.code === 'custom' && issue.message && issue.message !== 'Invalid input' ? issue.message : null;
}

/** Name of the first offending field in a zod error, for a 10400 message. */
export function firstIssueField(err: z.ZodError): string {
  const issue = err.issues[0];
  if (!issue) return 'body';
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0] ?? '';
    return [...issue.path, key].map(plainSegment).join('.');
  }
  return issue.path.length ? issue.path.map(plainSegment).join('.') : 'body';
}
