// The proxy username rule (admin, console and gateway alike) and the session parameters a customer
// appends to it: `USER-session-ID` or `USER-session-ID-sesstime-MIN` (docs/gateway.md, "Egress pools").

/** Proxy usernames: no `:` so HTTP Basic splits cleanly. The same rule as an HTML `pattern` (the console's form). */
export const PROXY_USERNAME_PATTERN = '[A-Za-z0-9._\\-]{3,64}';
const PROXY_USERNAME_RE = new RegExp(`^${PROXY_USERNAME_PATTERN}$`);
export const PROXY_USERNAME_HINT = '3-64 characters of A-Z a-z 0-9 . _ -';

const SESSION_MINUTES_DEFAULT = 10;
const SESSION_MINUTES_MAX = 1440;
const MARKER = '-session-';

export function isProxyUsername(s: string): boolean {
  return PROXY_USERNAME_RE.test(s);
}

/** Why a name cannot be given to a new proxy user, or null. The session marker is reserved: a user named
 *  `alice-session-x` (of any account) would win over alice's session `x` at the gateway and lock alice out of it. */
export function newProxyUsernameProblem(s: string): string | null {
  if (!isProxyUsername(s)) return PROXY_USERNAME_HINT;
  if (s.includes(MARKER)) return `"${MARKER}" is reserved for session parameters (USER-session-ID)`;
  return null;
}

/**
 * What a presented username asks for. `plain`: no session parameters; `session`: the base user, the session
 * ID and its length in minutes; `malformed`: it carries `-session-` but no split of it parses.
 * The caller still tries the username as written first: an existing user of that name wins.
 */
type ProxyUsername =
  | { kind: 'plain'; user: string }
  | { kind: 'session'; user: string; session: string; minutes: number }
  | { kind: 'malformed' };

// Greedy USER: the rightmost `-session-` after which the rest parses (IDs hold no `-`, so at most one does).
const SESSION_RE = /^(.+)-session-([A-Za-z0-9_]{1,32})(?:-sesstime-([1-9][0-9]{0,3}))?$/;

export function parseProxyUsername(name: string): ProxyUsername {
  if (!name.includes(MARKER)) return { kind: 'plain', user: name };
  const m = SESSION_RE.exec(name);
  if (!m) return { kind: 'malformed' };
  const [, user = '', session = '', min] = m;
  const minutes = min === undefined ? SESSION_MINUTES_DEFAULT : Number(min);
  if (minutes > SESSION_MINUTES_MAX || !isProxyUsername(user)) return { kind: 'malformed' };
  return { kind: 'session', user, session, minutes };
}
