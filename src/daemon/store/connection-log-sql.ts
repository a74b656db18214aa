// The connection log's read side, shared by both backends: one WHERE clause per filter (`?` placeholders;
// PostgreSQL numbers them) and one row shape, so SQLite and PostgreSQL answer the same query alike.
import type { ConnectionLogFilter, ConnectionLogRow } from './types.js';

export interface ConnectionLogSqlRow {
  id: number;
  started_ms: number;
  node: string;
  request_id: string;
  protocol: string;
  source_ip: string;
  username: string | null;
  account_id: number | null;
  email: string | null;
  target: string | null;
  reason: string | null;
  bytes_up: number;
  bytes_down: number;
  duration_ms: number;
  exit: string | null;
  exit_moved_from: string | null;
  datagrams_up: number | null;
  datagrams_down: number | null;
}

export function toConnectionLogRow(r: ConnectionLogSqlRow): ConnectionLogRow {
  return {
    id: Number(r.id),
    startedAt: Number(r.started_ms),
    node: r.node,
    requestId: r.request_id,
    protocol: r.protocol,
    sourceIp: r.source_ip,
    username: r.username,
    accountId: r.account_id ?? -1,
    accountEmail: r.email,
    target: r.target,
    reason: r.reason,
    bytesUp: Number(r.bytes_up),
    bytesDown: Number(r.bytes_down),
    durationMs: Number(r.duration_ms),
    exit: r.exit ?? null,
    exitMovedFrom: r.exit_moved_from ?? null,
    ...(r.datagrams_up !== null && r.datagrams_up !== undefined
      ? { datagramsUp: Number(r.datagrams_up), datagramsDown: Number(r.datagrams_down ?? 0) }
      : {}),
  };
}

/** The WHERE clause of a filter and its parameters, in order (`?` placeholders; PostgreSQL numbers them). */
export function connectionLogWhere(f: ConnectionLogFilter): { where: string; params: Array<string | number> } {
  const conds: string[] = [];
  const params: Array<string | number> = [];
  const add = (cond: string, v: string | number) => {
    conds.push(cond);
    params.push(v);
  };
  if (f.accountId !== undefined) add('c.account_id = ?', f.accountId);
  if (f.username !== undefined) add('c.username = ?', f.username);
  if (f.sourceIp !== undefined) add('c.source_ip = ?', f.sourceIp);
  if (f.requestId !== undefined) add('c.request_id = ?', f.requestId);
  if (f.reason !== undefined) add('c.reason = ?', f.reason);
  if (f.decision === 'admitted') conds.push('c.reason IS NULL');
  if (f.decision === 'refused') conds.push('c.reason IS NOT NULL');
  if (f.sinceMs !== undefined) add('c.started_ms >= ?', f.sinceMs);
  if (f.afterId !== undefined) add('c.id > ?', f.afterId);
  return { where: conds.length ? `WHERE ${conds.join(' AND ')}` : '', params };
}

const COLUMNS =
  'c.id, c.started_ms, c.node, c.request_id, c.protocol, c.source_ip, c.username, c.account_id, a.email, c.target, c.reason, c.bytes_up, c.bytes_down, c.duration_ms, c.exit, c.exit_moved_from, c.datagrams_up, c.datagrams_down';

/**
 * The whole query of a filter (`?` placeholders). With `scanLimit` and an account, only that account's newest
 * `scanLimit` records are looked through (its index, newest first): a filter that matches nothing costs a
 * bounded read, not every record of the account (the console runs in the process that relays tunnels).
 */
export function connectionLogQuery(f: ConnectionLogFilter): { text: string; params: Array<string | number> } {
  const { where, params } = connectionLogWhere(f);
  const order = f.afterId !== undefined ? 'ORDER BY c.id ASC' : 'ORDER BY c.id DESC';
  let from = 'connection_log c';
  const pre: Array<string | number> = [];
  if (f.scanLimit !== undefined && f.accountId !== undefined) {
    from = '(SELECT * FROM connection_log WHERE account_id = ? ORDER BY id DESC LIMIT ?) c';
    pre.push(f.accountId, f.scanLimit);
  }
  return {
    text: `SELECT ${COLUMNS} FROM ${from} LEFT JOIN accounts a ON a.id = c.account_id ${where} ${order} LIMIT ?`,
    params: [...pre, ...params, f.limit],
  };
}
