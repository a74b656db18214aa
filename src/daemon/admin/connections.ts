// `proxyd admin connections`: the connection log (docs/admin.md) for the operator, as JSON lines or a table, with
// `--follow` streaming new records from every node as they are written.
import { isIP } from 'node:net';
import { parseDurationMs, parseIsoTime, timeFlagProblem } from '../../contract/time.js';
import {
  DECISIONS,
  LOG_REASONS,
  connectionJson,
  isDecision,
  isLogReason,
  sourceIpFilter,
  type ConnectionJson,
} from '../services/connection-log.js';
import type { ConnectionLogFilter, ConnectionLogRow, Store } from '../store/index.js';
import { alignedLine, columnWidths } from '../services/text-table.js';
import { AdminError, requireAccount } from './admin-kit.js';

export interface ConnectionsOptions {
  email?: string;
  user?: string;
  ip?: string;
  id?: string;
  reason?: string;
  decision?: string;
  since?: string;
  limit?: string;
  follow?: boolean;
  format?: string;
}

/** `--since`: a duration back from now (`15m`, `2h`, `7d`, `90s`) or an ISO time. */
export function parseSince(s: string, nowMs: number): number {
  const back = parseDurationMs(s, { units: 'smhd' });
  if (back !== null) return nowMs - back;
  const t = parseIsoTime(s);
  if (t === null) throw new AdminError(timeFlagProblem('--since', s, 'a duration (15m, 2h, 7d) or an ISO time'));
  return t;
}

export async function connectionFilter(
  store: Store,
  o: ConnectionsOptions,
  nowMs: number,
): Promise<Omit<ConnectionLogFilter, 'limit'>> {
  const f: Omit<ConnectionLogFilter, 'limit'> = {};
  if (o.email !== undefined) {
    f.accountId = (await requireAccount(store, o.email)).id;
  }
  if (o.user !== undefined) f.username = o.user;
  if (o.ip !== undefined) {
    if (!isIP(o.ip)) throw new AdminError(`--ip: not an IP address: ${o.ip}`);
    f.sourceIp = sourceIpFilter(o.ip);
  }
  if (o.id !== undefined) f.requestId = o.id;
  if (o.reason !== undefined) {
    if (!isLogReason(o.reason)) throw new AdminError(`--reason: expected one of ${LOG_REASONS.join(', ')}`);
    f.reason = o.reason;
  }
  if (o.decision !== undefined) {
    if (!isDecision(o.decision)) throw new AdminError(`--decision: expected ${DECISIONS.join(' or ')}`);
    f.decision = o.decision;
  }
  if (o.since !== undefined) f.sinceMs = parseSince(o.since, nowMs);
  return f;
}

const PAGE = 5_000;
/** The table's columns: every field of a record (`exit`: the exit an entry node's connection went through). */
const COLUMNS = [
  'time',
  'node',
  'request_id',
  'protocol',
  'source_ip',
  'username',
  'account',
  'target',
  'exit',
  'decision',
  'reason',
  'bytes_up',
  'bytes_down',
  'duration_ms',
] as const;

/** Columns of numbers, aligned on the right (an account is an email: text, on the left). */
const NUMERIC = new Set<string>(['bytes_up', 'bytes_down', 'duration_ms']);
const numeric = (i: number) => NUMERIC.has(COLUMNS[i]!);

/** One row's cells for `--format table`; anything not printable is escaped (records hold what clients sent). */
function tableCells(r: ConnectionJson): string[] {
  return COLUMNS.map((c) =>
    r[c] == null
      ? '-'
      : String(r[c]).replace(/[\x00-\x1f\x7f-\x9f]/g, (ch) => `\\x${ch.charCodeAt(0).toString(16).padStart(2, '0')}`),
  );
}

/**
 * Prints the matching records (oldest first, up to --limit, default 100 of the newest), then with --follow
 * every new one as it is written, until interrupted. Follows by id, re-reading a short window behind the
 * newest id seen: on PostgreSQL ids are taken before commit, so a batch can become visible after a later one.
 */
export async function connections(
  store: Store,
  o: ConnectionsOptions,
  write: (line: string) => void,
  signal: AbortSignal,
): Promise<void> {
  const format = o.format ?? 'json';
  if (format !== 'json' && format !== 'table') throw new AdminError('--format: expected json or table');
  const limit = o.limit === undefined ? 100 : Number(o.limit);
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > 100_000)
    throw new AdminError('--limit: expected an integer 1..100000');
  const filter = await connectionFilter(store, o, Date.now());
  // The table's widths: the header's and the first records' (those printed by --follow are padded to them).
  let widths: number[] = [];
  const print = (r: ConnectionLogRow) => {
    const j = connectionJson(r);
    write(format === 'json' ? JSON.stringify(j) : alignedLine(tableCells(j), widths, numeric));
  };
  const first = (await store.connectionLog.query({ ...filter, limit })).reverse();
  if (format === 'table') {
    widths = columnWidths([COLUMNS, ...first.map((r) => tableCells(connectionJson(r)))]);
    write(alignedLine(COLUMNS, widths, numeric));
  }
  for (const r of first) print(r);
  if (!o.follow) return;
  // Ids seen recently (above `floor`), so the window re-read behind the newest id prints nothing twice.
  // Where to go on from: the newest record of all (not of the filter), so a filter that matches nothing for a
  // while does not make every poll re-read everything written since the start.
  let newest = Math.max(
    first.reduce((m, r) => Math.max(m, r.id), 0),
    await store.connectionLog.newestId(),
  );
  const seen = new Set<number>(first.map((r) => r.id));
  const marks: Array<{ at: number; id: number }> = [];
  let floor = newest;
  while (!signal.aborted) {
    await new Promise((r) => setTimeout(r, 250));
    if (signal.aborted) break;
    const top = await store.connectionLog.newestId();
    for (let from = floor; ;) {
      const rows = await store.connectionLog.query({ ...filter, afterId: from, limit: PAGE });
      for (const r of rows) {
        if (seen.has(r.id)) continue;
        seen.add(r.id);
        newest = Math.max(newest, r.id);
        print(r);
      }
      if (rows.length < PAGE) break;
      from = rows[rows.length - 1]!.id;
    }
    newest = Math.max(newest, top);
    // The floor trails the newest id by ~2 s of polls: a batch committed later than that is not waited for.
    const now = Date.now();
    marks.push({ at: now, id: newest });
    while (marks.length > 1 && now - marks[0]!.at > 2_000) floor = marks.shift()!.id;
    for (const id of seen) if (id <= floor) seen.delete(id);
  }
}
