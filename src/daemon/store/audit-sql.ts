// What both backends share about audit records beyond the chain itself: the row as stored, read back.
import type { AuditChainRow, AuditDraft, AuditRecord } from './types.js';

/** An audit_log row as either backend returns it. */
export interface AuditRow {
  id: number;
  account_id: number;
  seq: number;
  time_ms: number;
  actor_type: AuditRecord['actor']['type'];
  actor_id: string | null;
  source_ip: string | null;
  request_id: string | null;
  action: string;
  target: string | null;
  details: string;
  prev_hash: string;
  hash: string;
}

/** The row as the chain check reads it: `details` as its stored text. */
export function chainRow(r: AuditRow): AuditChainRow {
  return {
    id: r.id,
    accountId: r.account_id,
    seq: r.seq,
    timeMs: r.time_ms,
    actor: { type: r.actor_type, id: r.actor_id },
    sourceIp: r.source_ip,
    requestId: r.request_id,
    action: r.action,
    target: r.target,
    detailsJson: r.details,
    prevHash: r.prev_hash,
    hash: r.hash,
  };
}

export function auditRecord(r: AuditRow): AuditRecord {
  const { detailsJson, ...rest } = chainRow(r);
  return { ...rest, details: JSON.parse(detailsJson) as Record<string, unknown> };
}

/** A chain's head row. */
export interface HeadRow {
  account_id: number;
  seq: number;
  hash: string;
  anchor_seq: number;
  anchor_hash: string;
}

export const headOf = (h: HeadRow) => ({
  accountId: h.account_id,
  seq: h.seq,
  hash: h.hash,
  anchorSeq: h.anchor_seq,
  anchorHash: h.anchor_hash,
});

/**
 * The one record of a whitelist batch: the IPs it changed in `details.ips`, in item order; null when no item
 * changed anything (nothing to record).
 */
export function batchRecord<T extends string>(
  draft: AuditDraft,
  ips: readonly string[],
  outcomes: readonly T[],
  done: T,
): AuditDraft | null {
  const changed = ips.filter((_, k) => outcomes[k] === done);
  if (changed.length === 0) return null;
  return { ...draft, details: { ...draft.details, ips: changed } };
}

/** The record of sessions ended at once, with how many. */
export const withCount = (d: AuditDraft, n: number): AuditDraft => ({ ...d, details: { ...d.details, sessions: n } });
