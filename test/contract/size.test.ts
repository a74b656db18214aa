import { describe, expect, it } from 'vitest';
import { formatSize, formatSizeExact, parseSize } from '../../src/contract/size.js';

describe('sizes', () => {
  it.each([
    [0, '0 B'],
    [512, '512 B'],
    [1536, '1.5 KiB'],
    [310_000, '302.73 KiB'],
    [50 * 2 ** 30, '50 GiB'],
    [1.5 * 2 ** 40, '1.5 TiB'],
  ])('formats %d as %s', (n, text) => expect(formatSize(n)).toBe(text));
  it('parses what it formats back to the same size when the figure is exact', () => {
    for (const n of [512, 1536, 50 * 2 ** 30]) expect(parseSize(formatSize(n))).toBe(n);
  });

  // A form field shows the limit so that saving it unchanged keeps it: 310,000 bytes was shown as
  // "302.73KiB" and saved back as 309,996.
  it.each([
    [310_000, '310kB'],
    [309_999, '309999'],
    [50 * 2 ** 30, '50GiB'],
    [500e6, '500MB'],
    [2 ** 40, '1TiB'],
    [1, '1'],
  ])('keeps %d exact in a form field as %s', (n, text) => {
    expect(formatSizeExact(n)).toBe(text);
    expect(parseSize(text)).toBe(n);
  });
});
