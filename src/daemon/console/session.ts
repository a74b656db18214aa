// Console session: what it holds, the SQLite-backed store adapter for @fastify/session, and the signing secret.
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { FastifyReply, FastifyRequest, Session } from 'fastify';
import { randomKey } from '../secrets.js';
import type { PendingChallenge } from '../services/passkeys.js';
import type { ConsoleSessionStore, SessionRecord } from '../store/index.js';

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
    /** When the password (and the second factor, when on) was last entered: sensitive actions need it recent. */
    authAtMs?: number;
    /** The Sessions card: the browser (User-Agent, cut short), its last address, its last request (ms epoch). */
    ua?: string;
    ip?: string;
    seenAtMs?: number;
    /** The password was right and a second factor is due (the session is not signed in yet). */
    pending2fa?: { accountId: number; atMs: number; passkeyOkAtMs?: number };
    /** A TOTP set-up in progress: its secret (sealed), and the nonce its form carries. */
    enrollTotp?: { sealed: string; nonce: string; expiresAtMs: number };
    /** A passkey challenge handed to this browser. */
    webauthn?: PendingChallenge;
    /** A sensitive action waiting for the password (and second factor) again: what it was, sealed. */
    sudo?: { action: string; sealed: string; atMs: number; passwordOk?: boolean; passkeyOkAtMs?: number };
    flash?: Flash;
    addResult?: AddResult;
    /** A secret to show once (token, proxy password, webhook secret, recovery codes, an API key), sealed with a key only the daemon holds. */
    reveal?: {
      kind: 'token' | 'proxy-password' | 'webhook-secret' | 'recovery-codes' | 'api-key';
      sealed: string;
      label?: string;
    };
    _csrf?: string;
    /** Set on a session read from the store: it is written back only while it still exists there. */
    _row?: 1;
  }
}

export const SESSION_COOKIE = 'proxyd_console';

/** Ends the session cookie with the attributes it was set with (only the value and lifetime differ). */
export function clearSessionCookie(request: FastifyRequest, reply: FastifyReply): void {
  reply.clearCookie(SESSION_COOKIE, {
    path: '/console',
    httpOnly: true,
    sameSite: 'strict',
    secure: request.protocol === 'https',
  });
}
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

/**
 * Seals a secret with a key derived from the console's secret, one key per purpose: a one-time secret so the sessions
 * table never holds it in clear text (the default), or a TOTP secret at rest (`SecretSealer.TOTP`).
 */
export class RevealSealer {
  static readonly TOTP = 'proxyd console totp secret v1';
  private readonly key: Buffer;
  constructor(sessionSecret: string, purpose = 'proxyd console reveal v1') {
    this.key = createHmac('sha256', sessionSecret).update(purpose).digest();
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

/**
 * A visitor who has not logged in holds nothing but the CSRF secret of the log-in form, and that secret is derived
 * from the (signed) session id: such a session is never written to the database, and any session id the daemon
 * signed is one, on every worker and node alike. So the log-in page costs no database row, however often it is
 * fetched (it did: every anonymous visit wrote one, kept for two hours).
 */
export class AnonymousSessions {
  private readonly key: Buffer;
  constructor(secret: string) {
    this.key = createHmac('sha256', secret).update('proxyd console anonymous csrf').digest();
  }
  csrfSecret(sid: string): string {
    return createHmac('sha256', this.key).update(sid).digest('base64url');
  }
  /** A session with nothing in it but its derived CSRF secret: nothing to store. */
  isBare(sid: string, session: Session): boolean {
    if (session._row) return false;
    if (typeof session.accountId === 'number') return false;
    for (const k of Object.keys(session)) if (k !== 'cookie' && k !== '_csrf') return false;
    return session._csrf === undefined || session._csrf === this.csrfSecret(sid);
  }
}

/** The row a session is stored as (its mark of having been read from the store left out). */
export function sessionRecord(session: Session, nowMs: () => number): SessionRecord {
  const expires = session.cookie?.expires ? new Date(session.cookie.expires).getTime() : nowMs() + SESSION_IDLE_MS;
  return {
    accountId: typeof session.accountId === 'number' ? session.accountId : null,
    data: JSON.stringify(session, (k, v: unknown) => (k === '_row' ? undefined : v)),
    expiresAtSec: Math.ceil(expires / 1000),
  };
}

/** @fastify/session store over the store's console sessions (either backend). */
export class StoreSessionAdapter {
  constructor(
    private readonly sessions: ConsoleSessionStore,
    private readonly nowMs: () => number = Date.now,
    private readonly anonymous: AnonymousSessions | null = null,
  ) {}

  set(sid: string, session: Session, callback: Cb): void {
    if (this.anonymous?.isBare(sid, session)) return callback();
    const rec = sessionRecord(session, this.nowMs);
    // A session read from the store is written back only if it is still there: one signed out elsewhere while this
    // request ran stays ended (an upsert would bring it back).
    (session._row ? this.sessions.update(sid, rec).then(() => undefined) : this.sessions.set(sid, rec)).then(
      () => callback(),
      callback,
    );
  }

  get(sid: string, callback: (err: unknown, result?: Session | null) => void): void {
    this.sessions.get(sid).then(
      // Not stored: a visitor's bare session (or one that ended), which holds its derived CSRF secret only.
      (rec) =>
        callback(
          null,
          rec
            ? ({ ...(JSON.parse(rec.data) as Session), _row: 1 } as Session)
            : this.anonymous
              ? ({ _csrf: this.anonymous.csrfSecret(sid) } as Session)
              : null,
        ),
      (e: unknown) => callback(e),
    );
  }

  destroy(sid: string, callback: Cb): void {
    this.sessions.destroy(sid).then(() => callback(), callback);
  }
}
