// How the admission view stores its proxy users and IPs as ByteTable entries (byte-table.ts): one module, so the
// view and the reload worker (reload-worker.ts), which builds the tables on a thread of its own, write the same bytes.
import type { ByteTable } from './byte-table.js';
import type { AdmissionIpRow, AdmissionUserRow } from '../store/index.js';

/**
 * A proxy user in the view: its username is the key of a ByteTable entry (byte-table.ts) whose value is a flags
 * byte, the account id (6 bytes) and the password hash exactly as stored, in UTF-8, less the standard scrypt
 * parameters' prefix when it has them (a flag says so). Nothing per user is a JS object; userForAuth()
 * materializes one on lookup. (Raw salt and key bytes would save 18 bytes a user, but decoding base64 for a
 * million rows cost a second of the load.)
 */
const USER_ACTIVE = 1;
const USER_STANDARD_PREFIX = 2;
const ACCOUNT_BYTES = 6;
const STANDARD_PREFIX = 'scrypt$16384$8$1$';

export function putUser(t: ByteTable, r: AdmissionUserRow): void {
  const std = r.password_hash.startsWith(STANDARD_PREFIX);
  const text = std ? r.password_hash.slice(STANDARD_PREFIX.length) : r.password_hash;
  const flags = (r.status === 'active' ? USER_ACTIVE : 0) | (std ? USER_STANDARD_PREFIX : 0);
  // false: a name no client could present as written (over 1 KiB, or not well-formed text); it admits no one, so
  // leaving it out changes no answer.
  t.set(r.username, 1 + ACCOUNT_BYTES + Buffer.byteLength(text), (b, o) => {
    b[o] = flags;
    b.writeUIntLE(r.account_id, o + 1, ACCOUNT_BYTES);
    b.write(text, o + 1 + ACCOUNT_BYTES, 'utf8');
  });
}

export function getUser(t: ByteTable, username: string): { accountId: number; hash: string; active: boolean } | null {
  const e = t.find(username);
  if (e < 0) return null;
  const b = t.chunkOf(e);
  const o = t.valueAt(e);
  const flags = b[o]!;
  const text = b.toString('utf8', o + 1 + ACCOUNT_BYTES, o + t.valueLength(e));
  return {
    accountId: b.readUIntLE(o + 1, ACCOUNT_BYTES),
    hash: flags & USER_STANDARD_PREFIX ? STANDARD_PREFIX + text : text,
    active: (flags & USER_ACTIVE) !== 0,
  };
}

/** An IP in the view: the key of an entry whose value is the entry's status (1 active) and the account id. */
export function putIp(t: ByteTable, r: AdmissionIpRow): void {
  t.set(r.ip, 1 + ACCOUNT_BYTES, (b, o) => {
    b[o] = r.status === 1 ? 1 : 0;
    b.writeUIntLE(r.account_id, o + 1, ACCOUNT_BYTES);
  });
}

export function getIp(t: ByteTable, ip: string): { accountId: number; active: boolean } | null {
  const e = t.find(ip);
  if (e < 0) return null;
  const b = t.chunkOf(e);
  const o = t.valueAt(e);
  return { accountId: b.readUIntLE(o + 1, ACCOUNT_BYTES), active: b[o] === 1 };
}
