import { describe, expect, it } from 'vitest';
import { isProxyUsername, newProxyUsernameProblem, parseProxyUsername } from '../../src/contract/proxy-username.js';

describe('proxy username rule', () => {
  it.each(['abc', 'a.b-c_d', 'x'.repeat(64), 'team-session-store'])('accepts %s', (s) => expect(isProxyUsername(s)).toBe(true));
  it.each(['ab', 'x'.repeat(65), 'a:b', 'a b', 'ü-user', ''])('refuses %j', (s) => expect(isProxyUsername(s)).toBe(false));
});

describe('session parameters in the username', () => {
  it('plain names pass through', () => {
    expect(parseProxyUsername('alice')).toEqual({ kind: 'plain', user: 'alice' });
    expect(parseProxyUsername('alice-sesstime-5')).toEqual({ kind: 'plain', user: 'alice-sesstime-5' });
    expect(parseProxyUsername('alice-session')).toEqual({ kind: 'plain', user: 'alice-session' });
  });
  it('USER-session-ID defaults to 10 minutes', () => {
    expect(parseProxyUsername('alice-session-s1')).toEqual({ kind: 'session', user: 'alice', session: 's1', minutes: 10 });
  });
  it('USER-session-ID-sesstime-MIN', () => {
    expect(parseProxyUsername('alice-session-A_9-sesstime-30')).toEqual({ kind: 'session', user: 'alice', session: 'A_9', minutes: 30 });
    expect(parseProxyUsername('alice-session-x-sesstime-1').kind).toBe('session');
    expect(parseProxyUsername('alice-session-x-sesstime-1440')).toMatchObject({ minutes: 1440 });
  });
  it('a base user holding "-" and even "-session-" splits at the rightmost marker', () => {
    expect(parseProxyUsername('my-team-session-abc')).toEqual({ kind: 'session', user: 'my-team', session: 'abc', minutes: 10 });
    expect(parseProxyUsername('a-session-b-session-c')).toEqual({ kind: 'session', user: 'a-session-b', session: 'c', minutes: 10 });
    expect(parseProxyUsername('alice-session-session-sesstime-5')).toEqual({ kind: 'session', user: 'alice', session: 'session', minutes: 5 });
    expect(parseProxyUsername('a.b-session-sesstime')).toEqual({ kind: 'session', user: 'a.b', session: 'sesstime', minutes: 10 });
  });
  it('the longest ID (32) passes, 33 is malformed', () => {
    expect(parseProxyUsername(`alice-session-${'i'.repeat(32)}`).kind).toBe('session');
    expect(parseProxyUsername(`alice-session-${'i'.repeat(33)}`).kind).toBe('malformed');
  });
  it.each([
    'alice-session-',
    'alice-session-bad.id',
    'alice-session-bad-id',
    'alice-session-x-sesstime-',
    'alice-session-x-sesstime-0',
    'alice-session-x-sesstime-05',
    'alice-session-x-sesstime-1441',
    'alice-session-x-sesstime-99999',
    'alice-session-x-sesstime-abc',
    'alice-session-x-sesstime-5-extra',
    'ab-session-x', // base user shorter than the rule
    `${'u'.repeat(65)}-session-x`,
    '-session-x',
    'al:ce-session-x',
  ])('%s is malformed', (s) => expect(parseProxyUsername(s)).toEqual({ kind: 'malformed' }));
});

describe('names for new proxy users', () => {
  it.each(['alice', 'my-team', 'a.b_c', 'alice-sesstime-5', 'alice-session', 'alice-SESSION-x'])('%s may be created', (s) =>
    expect(newProxyUsernameProblem(s)).toBeNull(),
  );
  // Such a name, as written, wins at the gateway: it would take the session `x` of user `alice` away from alice.
  it.each(['alice-session-x', 'team-session-store', 'a-session-b-sesstime-5', 'alice-session-'])('%s is refused (session marker reserved)', (s) =>
    expect(newProxyUsernameProblem(s)).toMatch(/"-session-" is reserved/),
  );
  it('the username rule still comes first', () => expect(newProxyUsernameProblem('a b')).toBe('3-64 characters of A-Z a-z 0-9 . _ -'));
});
