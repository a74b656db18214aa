// The connection log as people read it (docs/support.md): the closed list of reasons and the one record shape that
// `proxyd admin connections` prints and the console's Connections page shows.
import { formatIsoTime } from '../../contract/schemas.js';
import { canonicalIp } from '../../gateway/index.js';
import type { LogReason } from '../../gateway/types.js';
import type { ConnectionLogRow } from '../store/index.js';

/**
 * The closed list of reasons a record can carry, in the customer's words (docs/support.md has the same list).
 * Keyed by the gateway's `LogReason`: a reason added there without its line here does not compile.
 */
export const REASON_TEXT: Readonly<Record<LogReason, string>> = {
  unknown_user: 'No proxy user has this username',
  wrong_password: 'Wrong password for this proxy user',
  bad_username_params:
    'The parameters after the username are not valid: USER-country-CC-city-NAME-ip-A.B.C.D-session-ID-sesstime-MIN, CC two letters, MIN 1 to 1440',
  bad_ip_parameter:
    "The username names an address with -ip- that is not one of the account's dedicated addresses (see the IPs page)",
  user_disabled: 'This proxy user is disabled',
  account_inactive: 'The account is suspended or closed',
  not_whitelisted: 'The source IP is not on the whitelist',
  whitelist_entry_disabled: 'The source IP’s whitelist entry is disabled',
  traffic_limit: 'The traffic limit is used up',
  connection_limit: 'Too many connections at once',
  plan_expired: 'The plan has expired',
  target_forbidden: 'The target address is not allowed',
  dns_error: 'The target name could not be resolved',
  target_refused: 'The target refused or could not be reached',
  target_timeout: 'Connecting to the target timed out',
  no_exit: 'No exit node matches the request',
  malformed: 'The client sent a request the gateway could not read',
  admission_unavailable: 'The gateway could not check the login at that moment',
  target_denied: 'The account’s target rules refuse this target',
  target_denied_service: 'The service’s target rules refuse this target',
};

/** Every reason, as the filters of `proxyd admin connections` and the console offer them. */
export const LOG_REASONS = Object.keys(REASON_TEXT) as LogReason[];

/**
 * Reasons only an attempt that matched no account is refused for (a username no proxy user has, a source IP on no
 * whitelist): such records are the operator's, so no customer ever sees one.
 */
export const NO_ACCOUNT_REASONS: readonly LogReason[] = ['unknown_user', 'not_whitelisted'];

/** The reasons an account's own records can carry: the console's Reason filter. */
export const ACCOUNT_REASONS: readonly LogReason[] = LOG_REASONS.filter((r) => !NO_ACCOUNT_REASONS.includes(r));

export function isLogReason(s: string): s is LogReason {
  return Object.hasOwn(REASON_TEXT, s);
}

/** What a record says was decided; a filter value. */
export const DECISIONS = ['admitted', 'refused'] as const;
export type Decision = (typeof DECISIONS)[number];

export function isDecision(s: string): s is Decision {
  return (DECISIONS as readonly string[]).includes(s);
}

/** A record as printed and as the console shows it: one shape everywhere (docs/support.md). */
export function connectionJson(r: ConnectionLogRow) {
  return {
    time: formatIsoTime(r.startedAt),
    node: r.node,
    request_id: r.requestId,
    protocol: r.protocol,
    source_ip: r.sourceIp,
    username: r.username,
    account: r.accountEmail,
    target: r.target,
    decision: r.reason === null ? ('admitted' as const) : ('refused' as const),
    reason: r.reason,
    bytes_up: r.bytesUp,
    bytes_down: r.bytesDown,
    duration_ms: r.durationMs,
    // An entry node's records only: the exit, and the exit a moved session had before.
    ...(r.exit ? { exit: r.exit, exit_moved_from: r.exitMovedFrom ?? null } : {}),
    // A UDP association's records only: its datagrams each way.
    ...(r.datagramsUp !== undefined ? { datagrams_up: r.datagramsUp, datagrams_down: r.datagramsDown ?? 0 } : {}),
  };
}

export type ConnectionJson = ReturnType<typeof connectionJson>;

/** A source-IP filter as the records hold it (the gateway's canonical text): any spelling of an address finds them. */
export function sourceIpFilter(ip: string): string {
  return canonicalIp(ip);
}
