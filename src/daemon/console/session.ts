// Console session: what it holds, the SQLite-backed store adapter for @fastify/session, and the signing secret.
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Session } from 'fastify';
import { randomKey } from '../secrets.js';
import type { ConsoleSessionStore } from '../store/index.js';

type FlashKind = 'success' | 'error' | 'info' | 'warn';

export interface Flash {
  kind: FlashKind;
  text: string;
}

/** Result of the last whitelist add, shown once after the redirect. */
export interface AddResult {
  successCount: number;
  failedItems: Array<{ ip: string; code: number; reason: string }>;
}

declare module 'fastify' {
  interface Session {
    accountId?: number;
    /** When the user logged in (ms epoch): sessions end after an absolute lifetime. */
    loginAtMs?: number;
    flash?: Flash;
    addResult?: AddResult;
    /** A secret to show once (token or proxy password), sealed with a key only the daemon holds. */
    reveal?: { kind: 'token' | 'proxy-password' | 'webhook-secret'; sealed: string; label?: string };
    _csrf?: string;
  }
}

export const SESSION_COOKIE = 'proxyd_console';
/** Idle timeout: each request pushes the expiry this far out. */
export const SESSION_IDLE_MS = 2 * 60 * 60 * 1000;
/** Absolute lifetime of a login. */
export const SESSION_MAX_MS = 12 * 60 * 60 * 1000;
const SECRET_FILE = 'console-session.key';

/**
 * The cookie-signing secret, one per data dir, in a file (mode 0600) next to the database so every
 * worker sharing the data dir signs alike. An in-memory database gets a per-process secret.
 */
export function loadSessionSecret(dbFile: string): string {
  if (!dbFile || dbFile === ':memory:' || dbFile.startsWith('file::memory:')) return randomKey();
  const file = path.join(path.dirname(dbFile), SECRET_FILE);
  const fresh = randomKey();
  try {
    writeFileSync(file, `${fresh}\n`, { flag: 'wx', mode: 0o600 });
    return fresh;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  // Another worker may be writing it right now: wait until the secret is complete.
  for (let i = 0; i < 50; i++) {
    const s = readFileSync(file, 'utf8').trim();
    if (s.length >= 32) {
      try {
        chmodSync(file, 0o600);
      } catch {
        /* not ours to fix */
      }
      return s;
    }
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
  }
  throw new Error(`console session secret in ${file} is unreadable or too short`);
}

/** Seals a one-time secret so the sessions table never holds it in clear text. */
export class RevealSealer {
  private readonly key: Buffer;
  constructor(sessionSecret: string) {
    this.key = createHmac('sha256', sessionSecret).update('proxyd console reveal v1').digest();
  }
  seal(plain: string): string {
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
    return [iv, c.getAuthTag(), body].map((b) => b.toString('base64url')).join('.');
  }
  open(sealed: string): string | null {
    try {
      const [iv, tag, body] = sealed.split('.').map((p) => Buffer.from(p, 'base64url'));
      if (!iv || !tag || !body) return null;
      const d = createDecipheriv('aes-256-gcm', this.key, iv);
      d.setAuthTag(tag);
      return Buffer.concat([d.update(body), d.final()]).toString('utf8');
    } catch {
      return null;
    }
  }
}

type Cb = (err?: unknown) => void;

/** @fastify/session store over the store's console sessions (either backend). */
export class StoreSessionAdapter {
  constructor(
    private readonly sessions: ConsoleSessionStore,
    private readonly nowMs: () => number = Date.now,
  ) {}

  set(sid: string, session: Session, callback: Cb): void {
    const expires = session.cookie?.expires ? new Date(session.cookie.expires).getTime() : this.nowMs() + SESSION_IDLE_MS;
    this.sessions
      .set(sid, {
        accountId: typeof session.accountId === 'number' ? session.accountId : null,
        data: JSON.stringify(session),
        expiresAtSec: Math.ceil(expires / 1000),
      })
      .then(() => callback(), callback);
  }

  get(sid: string, callback: (err: unknown, result?: Session | null) => void): void {
    this.sessions.get(sid).then(
      (rec) => callback(null, rec ? (JSON.parse(rec.data) as Session) : null),
      (e: unknown) => callback(e),
    );
  }

  destroy(sid: string, callback: Cb): void {
    this.sessions.destroy(sid).then(() => callback(), callback);
  }
}
