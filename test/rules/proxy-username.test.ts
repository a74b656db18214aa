// The proxy username is parsed where its rule lives, once (src/rules/proxy-username.ts): the gateway calls it on
// every login (no option to inject it; test/gateway/dial/targeting.test.ts starts a gateway with none), and the
// contract's rules for new names re-export the same functions.
import { describe, expect, it } from 'vitest';
import * as contract from '../../src/contract/proxy-username.js';
import {
  PROXY_USERNAME_PATTERN,
  RESERVED_MARKERS,
  isProxyUsername,
  parseProxyUsername,
} from '../../src/rules/proxy-username.js';

describe('proxy username: one parse', () => {
  it("the contract hands out the leaf's functions, not copies", () => {
    expect(contract.parseProxyUsername).toBe(parseProxyUsername);
    expect(contract.isProxyUsername).toBe(isProxyUsername);
    expect(contract.RESERVED_MARKERS).toBe(RESERVED_MARKERS);
    expect(contract.PROXY_USERNAME_PATTERN).toBe(PROXY_USERNAME_PATTERN);
  });

  it('reads targeting, a dedicated address and a session', () => {
    expect(parseProxyUsername('alice-country-US-session-abc')).toEqual({
      kind: 'params',
      user: 'alice',
      country: 'us',
      city: null,
      session: 'abc',
      minutes: 10,
    });
    expect(parseProxyUsername('alice-ip-203.0.113.9')).toEqual({
      kind: 'params',
      user: 'alice',
      country: null,
      city: null,
      session: null,
      minutes: 10,
      ip: '203.0.113.9',
    });
    expect(parseProxyUsername('alice-ip-203.0.113.09')).toEqual({ kind: 'malformed', user: 'alice' });
    expect(parseProxyUsername('alice')).toEqual({ kind: 'plain', user: 'alice' });
  });

  it('a new name that holds a marker is refused by the contract', () => {
    for (const m of RESERVED_MARKERS) expect(contract.newProxyUsernameProblem(`bob${m}x`)).not.toBeNull();
  });
});
