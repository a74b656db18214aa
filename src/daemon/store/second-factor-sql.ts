// What both backends share about the second factor's rows: a passkey as stored, and the wrong attempts' times.
import type { Passkey } from './types.js';

export interface PasskeyRow {
  id: number;
  account_id: number;
  credential_id: string;
  public_key: Buffer;
  counter: number;
  transports: string;
  name: string;
  created_ms: number;
  last_used_ms: number | null;
}

export const toPasskey = (r: PasskeyRow): Passkey => ({
  id: r.id,
  accountId: r.account_id,
  credentialId: r.credential_id,
  publicKey: Buffer.from(r.public_key),
  counter: r.counter,
  transports: r.transports ? r.transports.split(',') : [],
  name: r.name,
  createdAtMs: r.created_ms,
  lastUsedAtMs: r.last_used_ms,
});

/** Failures of the second step kept as a comma list of times (ms): those still in the window, the new one last. */
export function failuresAfter(stored: string, nowMs: number, windowMs: number): number[] {
  return [
    ...stored
      .split(',')
      .filter((t) => t !== '')
      .map(Number)
      .filter((t) => Number.isFinite(t) && t > nowMs - windowMs),
    nowMs,
  ];
}
