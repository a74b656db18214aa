// zod schemas of requests and responses: validated at the daemon's edge, decoded by the CLI.
import { z } from 'zod';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from './paths.js';
import { isStrictIPv4 } from './ipv4.js';

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
  page: positiveInt(1_000_000_000).optional().default(1),
  page_size: positiveInt(MAX_PAGE_SIZE).optional().default(DEFAULT_PAGE_SIZE),
  status: z.enum(['all', 'active', 'disabled']).optional().default('all'),
  ip: z
    .string()
    .refine((s) => isStrictIPv4(s))
    .optional(),
});
export type ListQuery = z.infer<typeof ListQuerySchema>;

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

// A path segment fit to echo back in a message: short and plain (client keys can hold any bytes).
const plainSegment = (s: PropertyKey): string => (/^[A-Za-z0-9_-]{1,32}$/.test(String(s)) ? String(s) : '(unprintable)');

// isoSeconds' answers: entries of one batch share a second, so a small cache saves most of the formatting.
const isoCache = new Map<number, string>();

/** Unix seconds as ISO 8601 UTC with whole seconds and a `Z` (`2026-11-21T10:00:00Z`). */
export function isoSeconds(unixSeconds: number): string {
  let s = isoCache.get(unixSeconds);
  if (s === undefined) {
    s = new Date(unixSeconds * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
    if (isoCache.size >= 4096) isoCache.clear();
    isoCache.set(unixSeconds, s);
  }
  return s;
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
