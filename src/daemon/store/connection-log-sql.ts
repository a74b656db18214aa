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

export const CONNECTION_LOG_SELECT =
  'SELECT c.id, c.started_ms, c.node, c.request_id, c.protocol, c.source_ip, c.username, c.account_id, a.email, c.target, c.reason, c.bytes_up, c.bytes_down, c.duration_ms FROM connection_log c LEFT JOIN accounts a ON a.id = c.account_id';
