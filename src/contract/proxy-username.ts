// The rules for a new proxy username (admin, console, API and proxyctl alike). The name pattern, the parameter markers
// and the parse of a presented username live in the leaf, src/rules/proxy-username.ts, which the gateway imports too.

import { RESERVED_MARKERS, isProxyUsername } from '../rules/proxy-username.js';
import { KEY_PREFIX } from './key-prefix.js';

export {
  PROXY_USERNAME_PATTERN,
  RESERVED_MARKERS,
  isProxyUsername,
  parseProxyUsername,
  type ProxyUsername,
} from '../rules/proxy-username.js';

export const PROXY_USERNAME_HINT = '3-64 characters of A-Z a-z 0-9 . _ -';

const MARKER = '-session-';
const MARKERS = RESERVED_MARKERS;
/** The reserved markers in words, for forms and messages. */
export const RESERVED_MARKERS_HINT = `${RESERVED_MARKERS.slice(0, -1)
  .map((m) => `"${m}"`)
  .join(
    ', ',
  )} and "${MARKER}" are reserved: a login adds them to ask for a country, a city, one of the account's dedicated addresses or a sticky session (USER-country-CC-city-NAME-ip-A.B.C.D-session-ID)`;

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
