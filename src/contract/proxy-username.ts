// The proxy username rule (admin, console and gateway alike) and the parameters a customer appends to it:
// targeting `-country-CC`, `-city-NAME`, a dedicated address `-ip-A.B.C.D` and a sticky session
// `-session-ID[-sesstime-MIN]` (docs/gateway.md, "Egress pools", "Entry and exit nodes", "Dedicated addresses").

import { isStrictIPv4 } from './ipv4-syntax.js';
import { KEY_PREFIX } from './key-prefix.js';

/** Proxy usernames: no `:` so HTTP Basic splits cleanly. The same rule as an HTML `pattern` (the console's form). */
export const PROXY_USERNAME_PATTERN = '[A-Za-z0-9._\\-]{3,64}';
const PROXY_USERNAME_RE = new RegExp(`^${PROXY_USERNAME_PATTERN}$`);
export const PROXY_USERNAME_HINT = '3-64 characters of A-Z a-z 0-9 . _ -';

const SESSION_MINUTES_DEFAULT = 10;
const SESSION_MINUTES_MAX = 1440;
const MARKER = '-session-';
/** The parameter markers, in the order a login writes them: reserved in new usernames. */
export const RESERVED_MARKERS = ['-country-', '-city-', '-ip-', MARKER] as const;
const MARKERS = RESERVED_MARKERS;
/** The reserved markers in words, for forms and messages. */
export const RESERVED_MARKERS_HINT = `${RESERVED_MARKERS.slice(0, -1).map((m) => `"${m}"`).join(', ')} and "${MARKER}" are reserved: a login adds them to ask for a country, a city, one of the account's dedicated addresses or a sticky session (USER-country-CC-city-NAME-ip-A.B.C.D-session-ID)`;

export function isProxyUsername(s: string): boolean {
  return PROXY_USERNAME_RE.test(s);
}

/** Why a name cannot be given to a new proxy user, or null. The parameter markers are reserved: a user named
 *  `alice-session-x` (of any account) would win over alice's session `x` at the gateway and lock alice out of it. */
export function newProxyUsernameProblem(s: string): string | null {
  if (!isProxyUsername(s)) return PROXY_USERNAME_HINT;
  // An API key fits the username rule: one pasted as a name would be shown wherever usernames are (lists, logs).
  if (s.startsWith(KEY_PREFIX)) return `"${KEY_PREFIX}" starts an API key: a username cannot start with it`;
  const marker = reservedMarkerIn(s);
  if (marker === MARKER) return `"${MARKER}" is reserved for session parameters (USER-session-ID)`;
  if (marker === '-ip-') return `"-ip-" is reserved for a dedicated address (USER-ip-A.B.C.D)`;
  if (marker) return `"${marker}" is reserved for targeting parameters (USER-country-CC-city-NAME)`;
  return null;
}

/** The reserved marker a name holds (`-session-` first), or null. */
export function reservedMarkerIn(s: string): (typeof RESERVED_MARKERS)[number] | null {
  if (s.includes(MARKER)) return MARKER;
  return MARKERS.find((m) => s.includes(m)) ?? null;
}

/**
 * What a presented username asks for: `USER[-country-CC][-city-NAME][-ip-A.B.C.D][-session-ID[-sesstime-MIN]]`,
 * in that order (`ip`: present only when asked, a strict dotted quad). `plain`: no parameters; `params`: the base user and what it asks (country and city lower-case, null
 * when not asked; the session and its length in minutes); `malformed`: it carries a marker but no split of it
 * parses, and `user` is the base user it names (the part before its first marker, when that is a username), so
 * a bad value (`alice-country-usa`) can be told to alice's account rather than taken for an unknown user. The
 * caller still tries the username as written first: an existing user of that name wins.
 */
export type ProxyUsername =
  | { kind: 'plain'; user: string }
  | { kind: 'params'; user: string; country: string | null; city: string | null; session: string | null; minutes: number; ip?: string }
  | { kind: 'malformed'; user?: string };

// What follows the base user, whole. Session IDs and city names hold no `-`, so a split parses at most one way.
const PARAMS_RE = /^(?:-country-([A-Za-z]{2}))?(?:-city-([A-Za-z0-9_]{1,64}))?(?:-ip-([0-9.]{7,15}))?(?:-session-([A-Za-z0-9_]{1,32})(?:-sesstime-([1-9][0-9]{0,3}))?)?$/;

export function parseProxyUsername(name: string): ProxyUsername {
  if (!MARKERS.some((m) => name.includes(m))) return { kind: 'plain', user: name };
  // The base user is the shortest prefix after which the rest parses (`alice-country-us-session-x` is alice
  // in the US, not a user `alice-country-us`); a base user may itself hold `-` and even a marker.
  let named: string | undefined;
  for (let i = name.indexOf('-', 1); i > 0; i = name.indexOf('-', i + 1)) {
    if (!MARKERS.some((m) => name.startsWith(m, i))) continue;
    const user = name.slice(0, i);
    if (named === undefined && isProxyUsername(user)) named = user;
    const m = PARAMS_RE.exec(name.slice(i));
    if (!m || m[0] === '') continue;
    const [, country, city, ip, session, min] = m;
    const minutes = min === undefined ? SESSION_MINUTES_DEFAULT : Number(min);
    if (minutes > SESSION_MINUTES_MAX || !isProxyUsername(user) || (ip !== undefined && !isStrictIPv4(ip))) return malformed(named);
    const params = { kind: 'params' as const, user, country: country?.toLowerCase() ?? null, city: city?.toLowerCase() ?? null, session: session ?? null, minutes };
    return ip === undefined ? params : { ...params, ip };
  }
  return malformed(named);
}

const malformed = (user: string | undefined): ProxyUsername => (user === undefined ? { kind: 'malformed' } : { kind: 'malformed', user });
