import type { FastifyRequest } from 'fastify';
import { BusinessError, Code } from '../../../contract/codes.js';
import { API_KEY_PARAM } from '../../../contract/paths.js';
import { rawQuery } from '../auth.js';

/** add/delete take only `api_key` in the query. */
export function rejectExtraQuery(request: FastifyRequest): void {
  for (const key of new URLSearchParams(rawQuery(request)).keys()) {
    if (key !== API_KEY_PARAM) throw new BusinessError(Code.INVALID_PARAMS, `invalid parameters: unknown query parameter ${safeName(key)}`);
  }
}

/** A parameter name fit to echo back: short and plain, else a placeholder. */
export function safeName(key: string): string {
  return /^[A-Za-z0-9_.-]{1,32}$/.test(key) ? key : '(unprintable)';
}
