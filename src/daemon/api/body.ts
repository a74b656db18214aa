// Strict request bodies: one JSON document with a JSON content type, nothing after it.
import type { FastifyRequest } from 'fastify';
import { BusinessError, Code } from '../../contract/codes.js';

const JSON_TYPE = /^application\/json\s*(;.*)?$/i;

export function parseJsonBody(request: FastifyRequest): unknown {
  const type = request.headers['content-type'];
  if (typeof type !== 'string' || !JSON_TYPE.test(type.trim())) {
    throw new BusinessError(Code.INVALID_PARAMS, 'invalid parameters: content-type must be application/json');
  }
  const raw = request.body;
  if (!Buffer.isBuffer(raw) || raw.length === 0) throw new BusinessError(Code.INVALID_PARAMS, 'invalid parameters: body is required');
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(raw);
  } catch {
    throw new BusinessError(Code.INVALID_PARAMS, 'invalid parameters: body is not valid UTF-8');
  }
  try {
    // JSON.parse rejects anything after the first value except whitespace.
    return JSON.parse(text);
  } catch {
    throw new BusinessError(Code.INVALID_PARAMS, 'invalid parameters: body is not a single JSON document');
  }
}
