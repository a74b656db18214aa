// The connection log as people read it (SPEC 12): the closed list of reasons and the one record shape that
// `proxyd admin connections` prints and the console's Connections page shows.
import type { ConnectionLogRow } from '../store/index.js';

/** The closed list of reasons a record can carry (docs/support.md). */
export const LOG_REASONS = [
  'unknown_user',
  'wrong_password',
  'user_disabled',
  'account_inactive',
  'not_whitelisted',
  'whitelist_entry_disabled',
  'traffic_limit',
  'connection_limit',
  'plan_expired',
  'target_forbidden',
  'dns_error',
  'target_refused',
  'target_timeout',
  'no_exit',
  'malformed',
  'admission_unavailable',
] as const;

/** The reasons the console offers as a filter: every one (entry/exit fleets produce `no_exit`). */
export const PRODUCED_REASONS = LOG_REASONS;

/** A record as printed and as the console shows it: one shape everywhere (docs/support.md). */
export function connectionJson(r: ConnectionLogRow) {
  return {
    time: new Date(r.startedAt).toISOString(),
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
    // An entry node's records only (SPEC 13): the exit, and the exit a moved session had before.
    ...(r.exit ? { exit: r.exit, exit_moved_from: r.exitMovedFrom ?? null } : {}),
  };
}

export type ConnectionJson = ReturnType<typeof connectionJson>;
