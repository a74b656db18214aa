import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ChunkedScanner } from '../../../src/gateway/wire/chunked.js';

function scanAll(parts: Buffer[]): { body: number; done: boolean } | { error: string } {
  const s = new ChunkedScanner();
  let body = 0;
  for (const p of parts) {
    const r = s.feed(p);
    if ('error' in r) return { error: r.error };
    body += r.consumed;
    if (r.done) return { body, done: true };
  }
  return { body, done: false };
}

function encode(chunks: Buffer[], trailers = ''): Buffer {
  return Buffer.concat([
    ...chunks.flatMap((c) => [Buffer.from(`${c.length.toString(16)};ext=1\r\n`), c, Buffer.from('\r\n')]),
    Buffer.from(`0\r\n${trailers}\r\n`),
  ]);
}

describe('chunked body scanner', () => {
  const body = encode([Buffer.from('hello'), Buffer.alloc(300, 0x0d)], 'X-T: 1\r\n');
  it('finds the end all at once and byte by byte, leaving what follows', () => {
    const extra = Buffer.from('GET http://next/ HTTP/1.1\r\n\r\n');
    expect(scanAll([Buffer.concat([body, extra])])).toEqual({ body: body.length, done: true });
    expect(scanAll([...body].map((b) => Buffer.from([b])))).toEqual({ body: body.length, done: true });
    expect(scanAll([body.subarray(0, body.length - 1)])).toEqual({ body: body.length - 1, done: false });
  });
  it('rejects bad sizes and framing', () => {
    for (const bad of [
      'x\r\n',
      '\r\n',
      '5\r\nhello\n',
      '5\r\nhelloXY',
      '1 0\r\n',
      'fffffffffffff\r\n',
      '0\r\nbad\ntrailer\r\n\r\n',
    ]) {
      expect(scanAll([Buffer.from(bad)]), JSON.stringify(bad)).toHaveProperty('error');
    }
  });
  it('same answer for any split; never throws on junk', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ minLength: 1, maxLength: 40 }), { maxLength: 6 }),
        fc.array(fc.nat(), { maxLength: 6 }),
        (chunks, cuts) => {
          const msg = encode(chunks.map((c) => Buffer.from(c)));
          const points = [...new Set(cuts.map((c) => c % msg.length))].sort((a, b) => a - b);
          const parts: Buffer[] = [];
          let last = 0;
          for (const p of points) {
            parts.push(msg.subarray(last, p));
            last = p;
          }
          parts.push(msg.subarray(last));
          expect(scanAll(parts)).toEqual({ body: msg.length, done: true });
        },
      ),
    );
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (junk) => {
        const r = scanAll([Buffer.from(junk)]);
        expect(typeof r).toBe('object');
      }),
      { numRuns: 3000 },
    );
  });
});
