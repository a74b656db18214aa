import type { FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { BusinessError, Code } from '../../../contract/codes.js';
import { API_KEY_PARAM } from '../../../contract/paths.js';
import { assertBatchSize } from '../../services/whitelist.js';
import { UsageQueryError } from '../../services/usage.js';
import { firstIssueDetail, firstIssueField } from '../../../contract/schemas.js';
import { rawQuery } from '../auth.js';
import { safeName } from '../body.js';

/**
 * A GET query without `api_key`, by `schema`: a repeated or unknown parameter, or a bad value, is 10400 naming it.
 */
export function parseStrictQuery<S extends z.ZodType>(raw: string, schema: S): z.infer<S> {
  const params = new URLSearchParams(raw);
  // No prototype: `__proto__=1` must become a key (an unknown parameter), not the object's prototype.
  const obj: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const key of new Set(params.keys())) {
    if (key === API_KEY_PARAM) continue;
    const values = params.getAll(key);
    if (values.length > 1)
      throw new BusinessError(Code.INVALID_PARAMS, `invalid parameters: ${safeName(key)} is repeated`);
    obj[key] = values[0]!;
  }
  const r = schema.safeParse(obj);
  if (!r.success) {
    const detail = firstIssueDetail(r.error);
    throw new BusinessError(
      Code.INVALID_PARAMS,
      `invalid parameters: ${safeName(firstIssueField(r.error))}${detail ? ` (${detail})` : ''}`,
    );
  }
  return r.data;
}

/** A usage service's answer, its refused query (UsageQueryError) as 10400 naming the field. */
export async function asInvalidParams<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (e) {
    if (e instanceof UsageQueryError)
      throw new BusinessError(
        Code.INVALID_PARAMS,
        `invalid parameters: ${e.field} (${e.message.slice(e.field.length + 2)})`,
      );
    throw e;
  }
}

/** add/delete take only `api_key` in the query. */
export function rejectExtraQuery(request: FastifyRequest): void {
  for (const key of new URLSearchParams(rawQuery(request)).keys()) {
    if (key !== API_KEY_PARAM)
      throw new BusinessError(Code.INVALID_PARAMS, `invalid parameters: unknown query parameter ${safeName(key)}`);
  }
}

/** An add/delete body: more than 100 elements in `key` is 10413 (checked first), else the schema decides (10400). */
export function parseBatchBody<S extends z.ZodType>(body: unknown, key: 'items' | 'ips', schema: S): z.infer<S> {
  const list = (body as Record<string, unknown> | null)?.[key];
  if (Array.isArray(list)) assertBatchSize(list.length);
  const r = schema.safeParse(body);
  if (!r.success) throw new BusinessError(Code.INVALID_PARAMS, `invalid parameters: ${firstIssueField(r.error)}`);
  return r.data;
}
