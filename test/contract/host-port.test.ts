import { describe, expect, it } from 'vitest';
import { formatHostPort, splitHostPort } from '../../src/contract/host-port.js';

describe('HOST:PORT', () => {
  it.each([
    ['127.0.0.1:0', { host: '127.0.0.1', port: 0 }],
    ['[::1]:8080', { host: '::1', port: 8080 }],
    ['exit-ny.example.net:3129', { host: 'exit-ny.example.net', port: 3129 }],
    ['10.0.0.1:65535', { host: '10.0.0.1', port: 65535 }],
  ])('reads %s, and writes it back the same', (s, hp) => {
    expect(splitHostPort(s)).toEqual(hp);
    expect(formatHostPort(hp)).toBe(s);
  });
  it.each(['127.0.0.1', ':80', '127.0.0.1:65536', 'a b:1', '127.0.0.1:-1', '::1:80', '[::1]', '[::1]:123456', ''])('refuses %j', (s) =>
    expect(splitHostPort(s)).toBeNull(),
  );
});
