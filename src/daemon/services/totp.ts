// TOTP (RFC 6238 over RFC 4226's HOTP): HMAC-SHA-1, 6 digits, 30 s steps, one step either side accepted; secrets in
// RFC 4648 base32 as authenticator apps read them. On node:crypto alone (test/daemon/services/totp.test.ts runs the RFC's vectors).
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export const TOTP_STEP_SEC = 30;
export const TOTP_DIGITS = 6;
/** Steps accepted either side of now: a phone's clock a little off, a code typed as it turned. */
export const TOTP_WINDOW = 1;
/** 160 bits, the size RFC 4226 recommends (and HMAC-SHA-1's block). */
const SECRET_BYTES = 20;

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

export function base32Encode(b: Buffer): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of b) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += ALPHABET[(value << (5 - bits)) & 31];
  return out;
}

/** Base32 as people type it (spaces, lower case, padding allowed); null when it is not base32. */
export function base32Decode(s: string): Buffer | null {
  const clean = s.replace(/[\s=-]/g, '').toUpperCase();
  if (clean === '' || /[^A-Z2-7]/.test(clean)) return null;
  const out: number[] = [];
  let bits = 0;
  let value = 0;
  for (const c of clean) {
    value = (value << 5) | ALPHABET.indexOf(c);
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 255);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}

/** HOTP (RFC 4226): the `digits`-digit code of `counter`; `algorithm` sha1 unless a test vector says otherwise. */
export function hotp(key: Buffer, counter: number, digits = TOTP_DIGITS, algorithm = 'sha1'): string {
  const msg = Buffer.alloc(8);
  msg.writeBigUInt64BE(BigInt(counter));
  const mac = createHmac(algorithm, key).update(msg).digest();
  const offset = mac[mac.length - 1]! & 0x0f;
  const bin = ((mac[offset]! & 0x7f) << 24) | (mac[offset + 1]! << 16) | (mac[offset + 2]! << 8) | mac[offset + 3]!;
  return String(bin % 10 ** digits).padStart(digits, '0');
}

/** The time step of a moment (ms epoch). */
export const totpStep = (nowMs: number): number => Math.floor(nowMs / 1000 / TOTP_STEP_SEC);

export function totp(key: Buffer, nowMs: number, digits = TOTP_DIGITS, algorithm = 'sha1'): string {
  return hotp(key, totpStep(nowMs), digits, algorithm);
}

/** A code as typed: six digits, spaces allowed between them; null when it is not one. */
export function normalizeCode(typed: string): string | null {
  const c = typed.replace(/\s/g, '');
  return /^\d{6}$/.test(c) ? c : null;
}

/** The step whose code `code` is, within the window around now (the newest first); null when none. */
export function matchingStep(key: Buffer, code: string, nowMs: number): number | null {
  const now = totpStep(nowMs);
  const given = Buffer.from(code);
  for (const step of [now + TOTP_WINDOW, now, now - TOTP_WINDOW]) {
    const want = Buffer.from(hotp(key, step));
    if (want.length === given.length && timingSafeEqual(want, given)) return step;
  }
  return null;
}

export function newTotpSecret(): string {
  return base32Encode(randomBytes(SECRET_BYTES));
}

/** The otpauth:// URI authenticator apps scan (Google's Key Uri Format). */
export function otpauthUri(issuer: string, account: string, secret: string): string {
  const label = `${encodeURIComponent(issuer)}:${encodeURIComponent(account)}`;
  return `otpauth://totp/${label}?secret=${secret}&issuer=${encodeURIComponent(issuer)}&algorithm=SHA1&digits=${TOTP_DIGITS}&period=${TOTP_STEP_SEC}`;
}
