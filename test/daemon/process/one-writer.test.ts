import { describe, expect, it } from 'vitest';
import { packRecord, unpackRecord } from '../../../src/daemon/process/one-writer.js';
import type { ConnectionRecord } from '../../../src/gateway/types.js';

describe('connection-log records on their way to the primary', () => {
  const base: ConnectionRecord = {
    startedAt: 1_790_000_000_123,
    requestId: 'pxd-00001a',
    protocol: 'connect',
    sourceIp: '203.0.113.7',
    username: 'alice-session-x1',
    accountId: 42,
    target: 'example.com:443',
    reason: null,
    bytesUp: 10,
    bytesDown: 2_000_000,
    durationMs: 1234,
  };
  it.each([
    ['an admitted tunnel', base],
    [
      'a refusal with no account or user',
      { ...base, username: null, accountId: -1, target: null, reason: 'not_whitelisted' as const },
    ],
    [
      "an entry node's record (its exit, and the one its session had)",
      { ...base, exit: 'exit-b', exitMovedFrom: 'exit-a' },
    ],
    ["an entry node's record whose session never moved", { ...base, exit: 'exit-b', exitMovedFrom: null }],
    // The datagram counts were left out of the tuple: with workers on SQLite a UDP record lost them.
    [
      'a UDP association (its datagrams each way)',
      { ...base, protocol: 'socks5-udp' as const, target: null, datagramsUp: 3, datagramsDown: 2 },
    ],
  ])('%s arrives as the worker had it, through JSON', (_what, r) => {
    expect(unpackRecord(JSON.parse(JSON.stringify(packRecord(r))))).toEqual(r);
  });
});
