import type { FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { BusinessError, Code } from '../../../contract/codes.js';
import { API_KEY_PARAM } from '../../../contract/paths.js';
import { assertBatchSize } from '../../services/whitelist.js';
import { firstIssueField } from '../../../contract/schemas.js';
import { rawQuery } from '../auth.js';
import { safeName } from '../body.js';

/** add/delete take only `api_key` in the query. */
export function rejectExtraQuery(request: FastifyRequest): void {
  for (const key of new URLSearchParams(rawQuery(request)).keys()) {
    if (key !== API_KEY_PARAM) throw new BusinessError(Code.INVALID_PARAMS, `invalid parameters: unknown query parameter ${safeName(key)}`);
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
