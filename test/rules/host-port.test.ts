import { describe, expect, it } from 'vitest';
import { readGatewayAddress } from '../../src/cli/proxy-lines.js';
import { bracketHost, formatHostPort, splitHostPort } from '../../src/rules/host-port.js';

describe('HOST:PORT', () => {
  it.each([
    ['127.0.0.1:0', { host: '127.0.0.1', port: 0 }],
    ['[::1]:8080', { host: '::1', port: 8080 }],
    ['exit-ny.example.net:3129', { host: 'exit-ny.example.net', port: 3129 }],
    ['10.0.0.1:65535', { host: '10.0.0.1', port: 65535 }],
  ])('reads %s, and writes it back the same', (s, hp) => {
    expect(splitHostPort(s)).toEqual(hp);
    expect(formatHostPort(hp.host, hp.port)).toBe(s);
  });
  it.each(['127.0.0.1', ':80', '127.0.0.1:65536', 'a b:1', '127.0.0.1:-1', '::1:80', '[::1]', '[::1]:123456', ''])(
    'refuses %j',
    (s) => expect(splitHostPort(s)).toBeNull(),
  );
});

// One writer for every side: the daemon's flags and ready line, the gateway's log targets, proxyctl check's lines.
describe('formatHostPort, bracketHost', () => {
  it.each([
    ['::1', 443, '[::1]:443', '[::1]'],
    ['2001:db8::7', 1080, '[2001:db8::7]:1080', '[2001:db8::7]'],
    ['203.0.113.9', 80, '203.0.113.9:80', '203.0.113.9'],
    ['example.com', 8080, 'example.com:8080', 'example.com'],
  ])('%s and %d: %s', (host, port, text, bracketed) => {
    expect(formatHostPort(host, port)).toBe(text);
    expect(bracketHost(host)).toBe(bracketed);
    expect(splitHostPort(text)).toEqual({ host, port });
  });
});

// proxyctl reads the API's gateway address with the daemon's own rule (src/cli/proxy-lines.ts).
describe("proxyctl's gateway address", () => {
  it.each([
    ['proxy.example.com:3128', { host: 'proxy.example.com', port: 3128 }],
    [' 203.0.113.7:1080 ', { host: '203.0.113.7', port: 1080 }],
    ['[2001:db8::1]:3128', { host: '[2001:db8::1]', port: 3128 }],
  ])('%j', (text, want) => expect(readGatewayAddress(text)).toEqual(want));
  it.each(['proxy.example.com', 'proxy.example.com:0', '2001:db8::1:3128', 'a b:1', ''])('refuses %j', (text) =>
    expect(readGatewayAddress(text)).toBeNull(),
  );
  it('reads back what the daemon writes', () => {
    for (const [host, port] of [
      ['::1', 3128],
      ['proxy.example.com', 8080],
    ] as const)
      expect(readGatewayAddress(formatHostPort(host, port))).toEqual({ host: bracketHost(host), port });
  });
});
