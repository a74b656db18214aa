// Password hashing (scrypt) and API token minting/verification. No secret ever leaves this module in a log.
import { createHash, randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { KEY_PREFIX } from '../contract/scopes.js';
import { ACCESS_KEY_BYTES, ACCESS_KEY_PREFIX, SECRET_BYTES, formatToken, type ParsedToken } from '../contract/token.js';

const SCRYPT = { N: 16384, r: 8, p: 1, keylen: 32 } as const;

function scrypt(password: string, salt: Buffer, keylen: number, opts: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scryptCb(password, salt, keylen, { ...opts, maxmem: 64 * 1024 * 1024 }, (err, key) =>
      err ? reject(err) : resolve(key),
    ),
  );
}

/** `scrypt$N$r$p$salt$hash` (base64url parts). */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password, salt, SCRYPT.keylen, { N: SCRYPT.N, r: SCRYPT.r, p: SCRYPT.p });
  return ['scrypt', SCRYPT.N, SCRYPT.r, SCRYPT.p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

// Verifying against this costs the same as a real hash, so unknown users take as long as known ones.
const DUMMY_HASH = `scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${Buffer.alloc(16).toString('base64url')}$${Buffer.alloc(32).toString('base64url')}`;

export async function verifyPassword(password: string, stored: string | null): Promise<boolean> {
  const parts = (stored ?? DUMMY_HASH).split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [, n, r, p, saltB64, keyB64] = parts as [string, string, string, string, string, string];
  const expected = Buffer.from(keyB64, 'base64url');
  const key = await scrypt(password, Buffer.from(saltB64, 'base64url'), expected.length, {
    N: Number(n),
    r: Number(r),
    p: Number(p),
  });
  return timingSafeEqual(key, expected) && stored !== null;
}

export function sha256(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

interface MintedToken extends ParsedToken {
  token: string;
  secretHash: Buffer;
}

export function mintToken(): MintedToken {
  const accessKey = `${ACCESS_KEY_PREFIX}${randomBytes(ACCESS_KEY_BYTES).toString('hex')}`;
  const secret = randomKey();
  return { accessKey, secret, token: formatToken({ accessKey, secret }), secretHash: sha256(secret) };
}

interface MintedApiKey {
  /** The public id: 16 hex digits (64 random bits; a collision is retried by the caller). */
  id: string;
  /** `pxk_<id>_<secret>`: shown once. */
  key: string;
  /** SHA-256 of the secret (256 random bits, base64url): all that is stored. */
  secretHash: Buffer;
}

export function mintApiKey(): MintedApiKey {
  const id = randomBytes(8).toString('hex');
  const secret = randomKey();
  return { id, key: `${KEY_PREFIX}${id}_${secret}`, secretHash: sha256(secret) };
}

/** 32 random bytes, base64url: a token's secret, the console's cookie key, a fleet secret. */
export function randomKey(): string {
  return randomBytes(SECRET_BYTES).toString('base64url');
}

const DUMMY_SECRET_HASH = sha256('no such token');

/** Constant-time check of a presented secret against the stored hash (or a dummy when the key is unknown). */
export function secretMatches(secret: string, storedHash: Buffer | null): boolean {
  const presented = sha256(secret);
  const ok = timingSafeEqual(presented, storedHash && storedHash.length === 32 ? storedHash : DUMMY_SECRET_HASH);
  return ok && storedHash !== null;
}

/** A random password for generated proxy users: 24 chars from a URL-safe alphabet (~143 bits). */
export function generatePassword(): string {
  return randomBytes(18).toString('base64url');
}
