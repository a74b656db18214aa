// What both backends share about audit records beyond the chain itself.
import type { AuditDraft } from './types.js';

/**
 * The one record of a whitelist batch: the IPs it changed in `details.ips`, in item order; null when no item
 * changed anything (nothing to record).
 */
export function batchRecord<T extends string>(draft: AuditDraft, ips: readonly string[], outcomes: readonly T[], done: T): AuditDraft | null {
  const changed = ips.filter((_, k) => outcomes[k] === done);
  if (changed.length === 0) return null;
  return { ...draft, details: { ...draft.details, ips: changed } };
}

/** The record of sessions ended at once, with how many. */
export const withCount = (d: AuditDraft, n: number): AuditDraft => ({ ...d, details: { ...d.details, sessions: n } });

/** Failures of the second step kept as a comma list of times (ms): those still in the window, the new one last. */
export function failuresAfter(stored: string, nowMs: number, windowMs: number): number[] {
  return [...stored.split(',').filter((t) => t !== '').map(Number).filter((t) => Number.isFinite(t) && t > nowMs - windowMs), nowMs];
}
