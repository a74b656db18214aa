import { describe, expect, it } from 'vitest';
import { isProxyUsername, newProxyUsernameProblem, parseProxyUsername } from '../../src/contract/proxy-username.js';

describe('proxy username rule', () => {
  it.each(['abc', 'a.b-c_d', 'x'.repeat(64), 'team-session-store'])('accepts %s', (s) =>
    expect(isProxyUsername(s)).toBe(true),
  );
  it.each(['ab', 'x'.repeat(65), 'a:b', 'a b', 'ü-user', ''])('refuses %j', (s) =>
    expect(isProxyUsername(s)).toBe(false),
  );
});

describe('session parameters in the username', () => {
  it('plain names pass through', () => {
    expect(parseProxyUsername('alice')).toEqual({ kind: 'plain', user: 'alice' });
    expect(parseProxyUsername('alice-sesstime-5')).toEqual({ kind: 'plain', user: 'alice-sesstime-5' });
    expect(parseProxyUsername('alice-session')).toEqual({ kind: 'plain', user: 'alice-session' });
  });
  it('USER-session-ID defaults to 10 minutes', () => {
    expect(parseProxyUsername('alice-session-s1')).toEqual({
      kind: 'params',
      user: 'alice',
      country: null,
      city: null,
      session: 's1',
      minutes: 10,
    });
  });
  it('USER-session-ID-sesstime-MIN', () => {
    expect(parseProxyUsername('alice-session-A_9-sesstime-30')).toEqual({
      kind: 'params',
      user: 'alice',
      country: null,
      city: null,
      session: 'A_9',
      minutes: 30,
    });
    expect(parseProxyUsername('alice-session-x-sesstime-1').kind).toBe('params');
    expect(parseProxyUsername('alice-session-x-sesstime-1440')).toMatchObject({ minutes: 1440 });
  });
  it('a base user holding "-" and even "-session-" splits at the rightmost marker', () => {
    expect(parseProxyUsername('my-team-session-abc')).toEqual({
      kind: 'params',
      user: 'my-team',
      country: null,
      city: null,
      session: 'abc',
      minutes: 10,
    });
    expect(parseProxyUsername('a-session-b-session-c')).toEqual({
      kind: 'params',
      user: 'a-session-b',
      country: null,
      city: null,
      session: 'c',
      minutes: 10,
    });
    expect(parseProxyUsername('alice-session-session-sesstime-5')).toEqual({
      kind: 'params',
      user: 'alice',
      country: null,
      city: null,
      session: 'session',
      minutes: 5,
    });
    expect(parseProxyUsername('a.b-session-sesstime')).toEqual({
      kind: 'params',
      user: 'a.b',
      country: null,
      city: null,
      session: 'sesstime',
      minutes: 10,
    });
  });
  it('the longest ID (32) passes, 33 is malformed', () => {
    expect(parseProxyUsername(`alice-session-${'i'.repeat(32)}`).kind).toBe('params');
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
  ])('%s is malformed', (s) => expect(parseProxyUsername(s)).toMatchObject({ kind: 'malformed' }));
  it('a malformed name still names its base user when the part before its first marker is a username', () => {
    expect(parseProxyUsername('alice-session-x-sesstime-1441')).toEqual({ kind: 'malformed', user: 'alice' });
    expect(parseProxyUsername('my-team-session-bad.id')).toEqual({ kind: 'malformed', user: 'my-team' });
    // No username before the marker: nobody's.
    for (const s of ['ab-session-x', `${'u'.repeat(65)}-session-x`, '-session-x', 'al:ce-session-x'])
      expect(parseProxyUsername(s)).toEqual({ kind: 'malformed' });
  });
});

describe('targeting in the username', () => {
  const p = (user: string, o: { country?: string; city?: string; session?: string; minutes?: number }) => ({
    kind: 'params',
    user,
    country: o.country ?? null,
    city: o.city ?? null,
    session: o.session ?? null,
    minutes: o.minutes ?? 10,
  });
  it('country, city and session, in that order', () => {
    expect(parseProxyUsername('alice-country-us')).toEqual(p('alice', { country: 'us' }));
    expect(parseProxyUsername('alice-country-DE-city-Berlin')).toEqual(p('alice', { country: 'de', city: 'berlin' }));
    expect(parseProxyUsername('alice-city-new_york')).toEqual(p('alice', { city: 'new_york' }));
    expect(parseProxyUsername('alice-country-us-city-nyc-session-s1-sesstime-30')).toEqual(
      p('alice', { country: 'us', city: 'nyc', session: 's1', minutes: 30 }),
    );
    expect(parseProxyUsername('my-team-country-gb-session-x')).toEqual(p('my-team', { country: 'gb', session: 'x' }));
  });
  it('out of order, the earlier parameters stay in the base user (no such user can be created: 407)', () => {
    expect(parseProxyUsername('alice-session-x-country-us')).toMatchObject({
      user: 'alice-session-x',
      country: 'us',
      session: null,
    });
    expect(parseProxyUsername('alice-city-nyc-country-us')).toMatchObject({
      user: 'alice-city-nyc',
      country: 'us',
      city: null,
    });
    expect(newProxyUsernameProblem('alice-session-x')).not.toBeNull();
  });
  it.each([
    'alice-country-usa',
    'alice-country-',
    'alice-country-u1',
    'alice-city-',
    'alice-city-new-york',
    'alice-country-us-sesstime-5',
  ])('%s is malformed, naming its base user alice', (s) =>
    expect(parseProxyUsername(s)).toEqual({ kind: 'malformed', user: 'alice' }),
  );
});

describe('names for new proxy users', () => {
  it.each(['alice', 'my-team', 'a.b_c', 'alice-sesstime-5', 'alice-session', 'alice-SESSION-x'])(
    '%s may be created',
    (s) => expect(newProxyUsernameProblem(s)).toBeNull(),
  );
  // Such a name, as written, wins at the gateway: it would take the session `x` of user `alice` away from alice.
  it.each(['alice-session-x', 'team-session-store', 'a-session-b-sesstime-5', 'alice-session-'])(
    '%s is refused (session marker reserved)',
    (s) => expect(newProxyUsernameProblem(s)).toMatch(/"-session-" is reserved/),
  );
  it.each(['alice-country-us', 'alice-city-x'])('%s is refused (targeting markers reserved)', (s) =>
    expect(newProxyUsernameProblem(s)).toMatch(/is reserved for targeting parameters/),
  );
  it('the username rule still comes first', () =>
    expect(newProxyUsernameProblem('a b')).toBe('3-64 characters of A-Z a-z 0-9 . _ -'));
});

describe('the dedicated-address marker -ip- (after -city-, before -session-)', () => {
  it('parses a strict dotted quad in its place', () => {
    expect(parseProxyUsername('alice-ip-203.0.113.10')).toEqual({
      kind: 'params',
      user: 'alice',
      country: null,
      city: null,
      session: null,
      minutes: 10,
      ip: '203.0.113.10',
    });
    expect(parseProxyUsername('alice-country-us-city-nyc-ip-203.0.113.10-session-s1-sesstime-30')).toEqual({
      kind: 'params',
      user: 'alice',
      country: 'us',
      city: 'nyc',
      session: 's1',
      minutes: 30,
      ip: '203.0.113.10',
    });
    expect(parseProxyUsername('my.team-ip-10.0.0.1')).toMatchObject({ user: 'my.team', ip: '10.0.0.1' });
  });
  it.each(['alice-ip-203.0.113.010', 'alice-ip-203.0.113', 'alice-ip-1.2.3.4.5', 'alice-ip-256.0.0.1', 'alice-ip-'])(
    '%s is malformed, naming its base user alice',
    (s) => expect(parseProxyUsername(s)).toEqual({ kind: 'malformed', user: 'alice' }),
  );
  it('out of order, the part before the last marker that parses is the base user (an unknown user at the gateway)', () => {
    expect(parseProxyUsername('alice-session-s1-ip-1.2.3.4')).toMatchObject({
      kind: 'params',
      user: 'alice-session-s1',
      ip: '1.2.3.4',
    });
    expect(parseProxyUsername('alice-ip-1.2.3.4-country-us')).toMatchObject({
      kind: 'params',
      user: 'alice-ip-1.2.3.4',
      country: 'us',
    });
  });
  it('is reserved in new names', () =>
    expect(newProxyUsernameProblem('bob-ip-x')).toMatch(/"-ip-" is reserved for a dedicated address/));
  it('a name shaped like an API key (pxk_…) is refused, so a pasted key never becomes a username shown in lists and logs', () => {
    expect(newProxyUsernameProblem('pxk_a1b2c3d4e5f6_AbCdEfGhIjKlMnOpQrStUvWxYz012345')).toMatch(
      /"pxk_" starts an API key/,
    );
    expect(newProxyUsernameProblem('pxk_alice')).toMatch(/"pxk_"/);
    expect(newProxyUsernameProblem('alice_pxk_x')).toBeNull();
  });
});
