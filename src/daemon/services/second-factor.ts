// The console's second factor (docs/security.md): TOTP turned on from a secret shown once in the page (its QR code
// drawn here, as an inline SVG), ten one-time recovery codes kept as hashes, a code accepted once (its time step
// is taken), and the lock: 5 wrong second factors within 15 min lock the second step for 15 min. The TOTP secret
// is stored sealed with the console's key (never in clear, never logged); passkeys are in passkeys.ts.
import { createHash, randomBytes } from 'node:crypto';
import QRCode from 'qrcode';
import type { SecondFactorLockRule, SecondFactorState, Store } from '../store/index.js';
import { auditDraft, type AuditContext } from './audit.js';
import { base32Decode, base32Encode, matchingStep, newTotpSecret, normalizeCode, otpauthUri } from './totp.js';

export const RECOVERY_CODE_COUNT = 10;
export const SECOND_FACTOR_LOCK: SecondFactorLockRule = { max: 5, windowMs: 15 * 60_000, lockMs: 15 * 60_000 };
const ISSUER = 'proxyd';

/** What seals the TOTP secret at rest (the console's key: src/daemon/console/session.ts `SecretSealer`). */
export interface Sealer {
  seal(plain: string): string;
  open(sealed: string): string | null;
}

/** `abcd-efgh-ijkm-npqr`: 16 base32 characters (80 random bits), grouped for reading. */
export function newRecoveryCodes(n = RECOVERY_CODE_COUNT): string[] {
  return Array.from({ length: n }, () => base32Encode(randomBytes(10)).toLowerCase().match(/.{4}/g)!.join('-'));
}

/** A recovery code as typed (any case, dashes and spaces ignored); null when it cannot be one. */
export function normalizeRecoveryCode(typed: string): string | null {
  const c = typed.replace(/[\s-]/g, '').toLowerCase();
  return /^[a-z2-7]{16}$/.test(c) ? c : null;
}

/** Codes have 80 random bits: a fast hash is enough (no guessing list to try against it). */
export const hashRecoveryCode = (normalized: string): string =>
  createHash('sha256').update(`proxyd recovery ${normalized}`).digest('hex');

export const secondFactorOn = (s: SecondFactorState): boolean => s.totp !== null || s.passkeys.length > 0;

export type CheckResult =
  | { ok: true; method: 'totp' | 'recovery_code' | 'passkey'; recoveryCodesLeft?: number }
  | { ok: false; problem: 'locked'; untilMs: number }
  | { ok: false; problem: 'malformed' | 'wrong' | 'replayed'; lockedUntilMs: number };

/** What the console shows to turn TOTP on: the secret (text), its otpauth URI and the QR code of it. */
export interface TotpEnrollment {
  secret: string;
  uri: string;
  svg: string;
}

export class SecondFactorService {
  constructor(
    private readonly store: Store,
    private readonly sealer: Sealer,
    private readonly nowMs: () => number,
  ) {}

  state(accountId: number): Promise<SecondFactorState> {
    return this.store.secondFactors.state(accountId);
  }

  async isOn(accountId: number): Promise<boolean> {
    return secondFactorOn(await this.state(accountId));
  }

  /** A new secret for `email`'s authenticator app, not stored yet: the console keeps it (sealed) in the session until a code proves it. */
  async startTotp(email: string): Promise<TotpEnrollment> {
    const secret = newTotpSecret();
    const uri = otpauthUri(ISSUER, email, secret);
    const svg = await QRCode.toString(uri, { type: 'svg', errorCorrectionLevel: 'M', margin: 2 });
    return { secret, uri, svg };
  }

  /** The QR code of an enrollment's secret again (the page reloaded). */
  async enrollmentOf(email: string, secret: string): Promise<TotpEnrollment> {
    const uri = otpauthUri(ISSUER, email, secret);
    return { secret, uri, svg: await QRCode.toString(uri, { type: 'svg', errorCorrectionLevel: 'M', margin: 2 }) };
  }

  /** Turns TOTP on when `typed` is a current code of `secret`: the recovery codes, shown once; else why not (nothing changed). */
  async enableTotp(
    accountId: number,
    secret: string,
    typed: string,
    ctx: AuditContext,
  ): Promise<{ ok: true; recoveryCodes: string[] } | { ok: false; problem: 'malformed' | 'wrong' }> {
    const code = normalizeCode(typed);
    const key = base32Decode(secret);
    if (!code || !key) return { ok: false, problem: 'malformed' };
    const step = matchingStep(key, code, this.nowMs());
    if (step === null) return { ok: false, problem: 'wrong' };
    const codes = newRecoveryCodes();
    await this.store.secondFactors.enableTotp(
      accountId,
      this.sealer.seal(secret),
      step,
      codes.map((c) => hashRecoveryCode(normalizeRecoveryCode(c)!)),
      auditDraft(ctx, '2fa.enabled', 'totp', { method: 'totp' }),
    );
    return { ok: true, recoveryCodes: codes };
  }

  /** Ten new recovery codes, replacing the old ones; shown once. */
  async renewRecoveryCodes(accountId: number, ctx: AuditContext): Promise<string[]> {
    const codes = newRecoveryCodes();
    await this.store.secondFactors.replaceRecoveryCodes(
      accountId,
      codes.map((c) => hashRecoveryCode(normalizeRecoveryCode(c)!)),
      auditDraft(ctx, '2fa.recovery_codes_renewed'),
    );
    return codes;
  }

  /**
   * Checks a second factor typed at log-in or to confirm an action: a TOTP code (accepted once: its step is taken)
   * or a recovery code (spent, recorded). A wrong or replayed one counts towards the lock, recorded as a failed
   * log-in; while locked nothing is checked.
   */
  async check(accountId: number, typed: string, ctx: AuditContext, during: 'login' | 'confirm'): Promise<CheckResult> {
    const state = await this.state(accountId);
    const now = this.nowMs();
    if (state.lockedUntilMs > now) return { ok: false, problem: 'locked', untilMs: state.lockedUntilMs };
    const code = normalizeCode(typed);
    const recovery = code ? null : normalizeRecoveryCode(typed);
    if (!code && !recovery) return { ok: false, problem: 'malformed', lockedUntilMs: 0 };
    if (code && state.totp) {
      const secret = this.sealer.open(state.totp.sealedSecret);
      const key = secret ? base32Decode(secret) : null;
      const step = key ? matchingStep(key, code, now) : null;
      if (step !== null) {
        if (await this.store.secondFactors.takeTotpStep(accountId, step)) return { ok: true, method: 'totp' };
        return this.failed(accountId, ctx, during, 'replayed');
      }
    }
    if (recovery) {
      const left = state.recoveryCodesLeft - 1;
      if (
        await this.store.secondFactors.useRecoveryCode(
          accountId,
          hashRecoveryCode(recovery),
          auditDraft(ctx, '2fa.recovery_code_used', null, { left }),
        )
      ) {
        return { ok: true, method: 'recovery_code', recoveryCodesLeft: left };
      }
    }
    return this.failed(accountId, ctx, during, 'wrong');
  }

  /** A wrong second factor of any kind (a passkey that did not verify too): counted, recorded; the lock's end if it locked. */
  async failed(
    accountId: number,
    ctx: AuditContext,
    during: 'login' | 'confirm',
    problem: 'wrong' | 'replayed',
    method?: string,
  ): Promise<{ ok: false; problem: 'wrong' | 'replayed'; lockedUntilMs: number }> {
    const until = await this.store.secondFactors.fail(
      accountId,
      SECOND_FACTOR_LOCK,
      auditDraft(ctx, 'console.login_failed', null, {
        step: 'second_factor',
        during,
        reason: problem === 'replayed' ? 'code_reused' : 'wrong_code',
        ...(method ? { method } : {}),
      }),
    );
    return { ok: false, problem, lockedUntilMs: until };
  }

  /** Every second factor off (TOTP, passkeys, recovery codes); false when none was on. */
  disable(accountId: number, ctx: AuditContext): Promise<boolean> {
    return this.store.secondFactors.disable(accountId, auditDraft(ctx, '2fa.disabled'));
  }
}

/** "until 14:05 UTC" (the date too when not today). */
export function untilText(ms: number, nowMs: number): string {
  const iso = new Date(ms).toISOString();
  const sameDay = iso.slice(0, 10) === new Date(nowMs).toISOString().slice(0, 10);
  return `${sameDay ? '' : `${iso.slice(0, 10)} `}${iso.slice(11, 16)} UTC`;
}
