// Feeding helpers for the pure parsers: byte by byte, all at once, in random pieces.
import { expect } from 'vitest';
import type { ParseResult } from '../../../src/gateway/wire/parse-result.js';

type Parser<T> = (buf: Buffer) => ParseResult<T, string> | { kind: 'none' };

/** Every proper prefix is incomplete; the whole message parses and consumes exactly its length. */
export function expectByteByByte<T>(parse: Parser<T>, msg: Buffer): T {
  for (let i = 0; i < msg.length; i++) {
    const r = parse(msg.subarray(0, i));
    expect(r.kind, `prefix of ${i} bytes`).toBe('incomplete');
  }
  const r = parse(msg);
  if (r.kind !== 'ok') throw new Error(`expected ok, got ${JSON.stringify(r)}`);
  expect(r.consumed).toBe(msg.length);
  return r.value;
}

/** With trailing bytes after the message (several messages in one packet), it stops at its end. */
export function expectWithTrailer<T>(parse: Parser<T>, msg: Buffer, trailer: Buffer): T {
  const r = parse(Buffer.concat([msg, trailer]));
  if (r.kind !== 'ok') throw new Error(`expected ok, got ${JSON.stringify(r)}`);
  expect(r.consumed).toBe(msg.length);
  return r.value;
}

/** A parser never throws and always answers with one of its result kinds. */
export function expectTotal(parse: Parser<unknown>, buf: Buffer): void {
  const r = parse(buf);
  expect(['incomplete', 'error', 'ok', 'none']).toContain(r.kind);
  if (r.kind === 'ok') {
    expect(r.consumed).toBeGreaterThan(0);
    expect(r.consumed).toBeLessThanOrEqual(buf.length);
  }
}
