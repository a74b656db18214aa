// The proxy username as the gateway reads it, and the name rule it rests on: targeting `-country-CC`, `-city-NAME`,
// a dedicated address `-ip-A.B.C.D` and a sticky session `-session-ID[-sesstime-MIN]` appended to a user's name
// (docs/gateway.md, "Egress pools", "Entry and exit nodes", "Dedicated addresses"). Parsed here, once: the gateway
// calls `parseProxyUsername` on every login; the rules for a new name (src/contract/proxy-username.ts) build on it.
import { isStrictIPv4 } from './ipv4-syntax.js';

/** Proxy usernames: no `:` so HTTP Basic splits cleanly. The same rule as an HTML `pattern` (the console's form). */
export const PROXY_USERNAME_PATTERN = '[A-Za-z0-9._\\-]{3,64}';
const PROXY_USERNAME_RE = new RegExp(`^${PROXY_USERNAME_PATTERN}$`);

const SESSION_MINUTES_DEFAULT = 10;
const SESSION_MINUTES_MAX = 1440;
/** The parameter markers, in the order a login writes them: reserved in new usernames. */
export const RESERVED_MARKERS = ['-country-', '-city-', '-ip-', '-session-'] as const;
const MARKERS = RESERVED_MARKERS;

export function isProxyUsername(s: string): boolean {
  return PROXY_USERNAME_RE.test(s);
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
  | {
      kind: 'params';
      user: string;
      country: string | null;
      city: string | null;
      session: string | null;
      minutes: number;
      ip?: string;
    }
  | { kind: 'malformed'; user?: string };

// What follows the base user, whole. Session IDs and city names hold no `-`, so a split parses at most one way.
const PARAMS_RE =
  /^(?:-country-([A-Za-z]{2}))?(?:-city-([A-Za-z0-9_]{1,64}))?(?:-ip-([0-9.]{7,15}))?(?:-session-([A-Za-z0-9_]{1,32})(?:-sesstime-([1-9][0-9]{0,3}))?)?$/;

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
    if (minutes > SESSION_MINUTES_MAX || !isProxyUsername(user) || (ip !== undefined && !isStrictIPv4(ip)))
      return malformed(named);
    const params = {
      kind: 'params' as const,
      user,
      country: country?.toLowerCase() ?? null,
      city: city?.toLowerCase() ?? null,
      session: session ?? null,
      minutes,
    };
    return ip === undefined ? params : { ...params, ip };
  }
  return malformed(named);
}

const malformed = (user: string | undefined): ProxyUsername =>
  user === undefined ? { kind: 'malformed' } : { kind: 'malformed', user };
