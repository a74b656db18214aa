// Strict request bodies: one JSON document with a JSON content type, nothing after it.
import type { FastifyRequest } from 'fastify';
import { BusinessError, Code } from '../../contract/codes.js';
import { findDuplicateKey } from '../../contract/json.js';

const JSON_TYPE = /^application\/json\s*(;.*)?$/i;
// A charset parameter, when given, must be UTF-8 (JSON's only encoding, RFC 8259): another one would be decoded wrongly.
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)"?/i;

export function parseJsonBody(request: FastifyRequest): unknown {
  const type = request.headers['content-type'];
  if (typeof type !== 'string' || !JSON_TYPE.test(type.trim())) {
    throw new BusinessError(Code.INVALID_PARAMS, 'invalid parameters: content-type must be application/json');
  }
  const charset = CHARSET.exec(type)?.[1];
  if (charset !== undefined && !/^utf-?8$/i.test(charset))
    throw new BusinessError(Code.INVALID_PARAMS, 'invalid parameters: content-type charset must be utf-8');
  // Nothing is decoded: a body in another encoding would be read as the JSON it is not.
  const encoding = request.headers['content-encoding'];
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity')
    throw new BusinessError(Code.INVALID_PARAMS, 'invalid parameters: content-encoding must be identity');
  const raw = request.body;
  if (!Buffer.isBuffer(raw) || raw.length === 0)
    throw new BusinessError(Code.INVALID_PARAMS, 'invalid parameters: body is required');
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(raw);
  } catch {
    throw new BusinessError(Code.INVALID_PARAMS, 'invalid parameters: body is not valid UTF-8');
  }
  let value: unknown;
  try {
    // JSON.parse rejects anything after the first value except whitespace.
    value = JSON.parse(text);
  } catch {
    throw new BusinessError(Code.INVALID_PARAMS, 'invalid parameters: body is not a single JSON document');
  }
  // JSON.parse keeps the last of duplicate keys silently; a strict API refuses the ambiguity.
  const dup = findDuplicateKey(text);
  if (dup !== null) throw new BusinessError(Code.INVALID_PARAMS, `invalid parameters: duplicate key ${safeName(dup)}`);
  return value;
}

/** A parameter name fit to echo back: short and plain, else a placeholder. */
export function safeName(key: string): string {
  return /^[A-Za-z0-9_.-]{1,32}$/.test(key) ? key : '(unprintable)';
}
