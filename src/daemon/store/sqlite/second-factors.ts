// second_factors, recovery_codes, passkeys (migration 16): an account's TOTP (secret sealed by the console, never
// in clear here), its one-time recovery codes by hash, its passkeys, and the lock after wrong second factors.
import { failuresAfter, toPasskey, type PasskeyRow } from '../second-factor-sql.js';
import type { AuditDraft, Passkey, SecondFactorLockRule, SecondFactorState, SecondFactorStore } from '../types.js';
import type { SqliteAuditLog } from './audit.js';
import type { Db } from './db.js';
import { stmt } from './statements.js';

interface FactorRow {
  totp_secret: string | null;
  totp_enabled_ms: number | null;
  totp_last_step: number;
  fail_times: string;
  locked_until_ms: number;
}

export class SqliteSecondFactorStore implements SecondFactorStore {
  constructor(
    private readonly db: Db,
    private readonly nowMs: () => number,
    private readonly audit: SqliteAuditLog,
  ) {}

  private row(accountId: number): FactorRow | undefined {
    return stmt<[number], FactorRow>(
      this.db,
      'SELECT totp_secret, totp_enabled_ms, totp_last_step, fail_times, locked_until_ms FROM second_factors WHERE account_id = ?',
    ).get(accountId);
  }

  private ensureRow(accountId: number): void {
    stmt(this.db, 'INSERT INTO second_factors (account_id) VALUES (?) ON CONFLICT (account_id) DO NOTHING').run(
      accountId,
    );
  }

  async state(accountId: number): Promise<SecondFactorState> {
    const r = this.row(accountId);
    const left = stmt<[number], { n: number }>(
      this.db,
      'SELECT count(*) AS n FROM recovery_codes WHERE account_id = ? AND used_ms IS NULL',
    ).get(accountId)!.n;
    const passkeys = stmt<[number], PasskeyRow>(this.db, 'SELECT * FROM passkeys WHERE account_id = ? ORDER BY id')
      .all(accountId)
      .map(toPasskey);
    return {
      totp: r?.totp_secret
        ? { sealedSecret: r.totp_secret, enabledAtMs: r.totp_enabled_ms ?? 0, lastStep: r.totp_last_step }
        : null,
      recoveryCodesLeft: left,
      passkeys,
      lockedUntilMs: r?.locked_until_ms ?? 0,
    };
  }

  private putCodes(accountId: number, hashes: readonly string[]): void {
    stmt(this.db, 'DELETE FROM recovery_codes WHERE account_id = ?').run(accountId);
    for (const h of hashes)
      stmt(this.db, 'INSERT INTO recovery_codes (account_id, code_hash) VALUES (?, ?)').run(accountId, h);
  }

  async enableTotp(
    accountId: number,
    sealedSecret: string,
    step: number,
    codeHashes: readonly string[],
    audit?: AuditDraft,
  ): Promise<void> {
    this.db
      .transaction(() => {
        this.ensureRow(accountId);
        stmt(
          this.db,
          'UPDATE second_factors SET totp_secret = ?, totp_enabled_ms = ?, totp_last_step = ? WHERE account_id = ?',
        ).run(sealedSecret, this.nowMs(), step, accountId);
        this.putCodes(accountId, codeHashes);
        if (audit) this.audit.write({ ...audit, accountId });
      })
      .immediate();
  }

  async takeTotpStep(accountId: number, step: number): Promise<boolean> {
    return (
      stmt(
        this.db,
        'UPDATE second_factors SET totp_last_step = ? WHERE account_id = ? AND totp_secret IS NOT NULL AND totp_last_step < ?',
      ).run(step, accountId, step).changes === 1
    );
  }

  async useRecoveryCode(accountId: number, codeHash: string, audit?: AuditDraft): Promise<boolean> {
    return this.audit.audited(
      accountId,
      audit ?? undefined,
      () =>
        stmt(
          this.db,
          'UPDATE recovery_codes SET used_ms = ? WHERE account_id = ? AND code_hash = ? AND used_ms IS NULL',
        ).run(this.nowMs(), accountId, codeHash).changes === 1,
      (used) => (used ? audit! : null),
    );
  }

  async replaceRecoveryCodes(accountId: number, codeHashes: readonly string[], audit?: AuditDraft): Promise<void> {
    this.db
      .transaction(() => {
        this.putCodes(accountId, codeHashes);
        if (audit) this.audit.write({ ...audit, accountId });
      })
      .immediate();
  }

  async addPasskey(
    p: {
      accountId: number;
      credentialId: string;
      publicKey: Buffer;
      counter: number;
      transports: string[];
      name: string;
    },
    recoveryCodeHashes: readonly string[] | null,
    audit?: AuditDraft,
  ): Promise<Passkey | 'exists'> {
    return this.db
      .transaction((): Passkey | 'exists' => {
        if (stmt(this.db, 'SELECT 1 FROM passkeys WHERE credential_id = ?').get(p.credentialId)) return 'exists';
        const info = stmt(
          this.db,
          'INSERT INTO passkeys (account_id, credential_id, public_key, counter, transports, name, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?)',
        ).run(p.accountId, p.credentialId, p.publicKey, p.counter, p.transports.join(','), p.name, this.nowMs());
        if (recoveryCodeHashes) this.putCodes(p.accountId, recoveryCodeHashes);
        if (audit) this.audit.write({ ...audit, accountId: p.accountId });
        return toPasskey(
          stmt<[number], PasskeyRow>(this.db, 'SELECT * FROM passkeys WHERE id = ?').get(Number(info.lastInsertRowid))!,
        );
      })
      .immediate();
  }

  async passkeyByCredential(credentialId: string): Promise<Passkey | null> {
    const r = stmt<[string], PasskeyRow>(this.db, 'SELECT * FROM passkeys WHERE credential_id = ?').get(credentialId);
    return r ? toPasskey(r) : null;
  }

  async passkeyUsed(id: number, counter: number): Promise<void> {
    stmt(this.db, 'UPDATE passkeys SET counter = ?, last_used_ms = ? WHERE id = ?').run(counter, this.nowMs(), id);
  }

  async removePasskey(accountId: number, id: number, audit?: AuditDraft): Promise<boolean> {
    return this.audit.audited(
      accountId,
      audit,
      () => stmt(this.db, 'DELETE FROM passkeys WHERE id = ? AND account_id = ?').run(id, accountId).changes === 1,
      (removed) => (removed ? audit! : null),
    );
  }

  async disable(accountId: number, audit?: AuditDraft): Promise<boolean> {
    return this.db
      .transaction(() => {
        const totp = stmt(
          this.db,
          'UPDATE second_factors SET totp_secret = NULL, totp_enabled_ms = NULL, totp_last_step = 0, fail_times = ?, locked_until_ms = 0 WHERE account_id = ? AND totp_secret IS NOT NULL',
        ).run('', accountId).changes;
        const keys = stmt(this.db, 'DELETE FROM passkeys WHERE account_id = ?').run(accountId).changes;
        stmt(this.db, 'DELETE FROM recovery_codes WHERE account_id = ?').run(accountId);
        const was = totp + keys > 0;
        if (was && audit) this.audit.write({ ...audit, accountId });
        return was;
      })
      .immediate();
  }

  async fail(accountId: number, rule: SecondFactorLockRule, audit?: AuditDraft): Promise<number> {
    return this.db
      .transaction(() => {
        this.ensureRow(accountId);
        const now = this.nowMs();
        const r = this.row(accountId)!;
        let times = failuresAfter(r.fail_times, now, rule.windowMs);
        let lockedUntil = r.locked_until_ms > now ? r.locked_until_ms : 0;
        if (times.length >= rule.max) {
          lockedUntil = now + rule.lockMs;
          times = [];
        }
        stmt(this.db, 'UPDATE second_factors SET fail_times = ?, locked_until_ms = ? WHERE account_id = ?').run(
          times.join(','),
          lockedUntil,
          accountId,
        );
        if (audit)
          this.audit.write({
            ...audit,
            accountId,
            details: {
              ...audit.details,
              ...(lockedUntil ? { locked_until: new Date(lockedUntil).toISOString() } : {}),
            },
          });
        return lockedUntil;
      })
      .immediate();
  }
}
