// The second factor on PostgreSQL (migration 20): the same rows as SQLite's. A TOTP step and a recovery code are
// taken by one conditional UPDATE each, so two nodes given the same code accept it once.
import { failuresAfter, toPasskey, type PasskeyRow } from '../second-factor-sql.js';
import type { AuditDraft, Passkey, SecondFactorLockRule, SecondFactorState, SecondFactorStore } from '../types.js';
import { appendAudit, audited } from './audit.js';
import { guard, type Sql } from './db.js';
import { PgFamily } from './family.js';

export class PgSecondFactorStore extends PgFamily implements SecondFactorStore {
  async state(accountId: number): Promise<SecondFactorState> {
    const [[f], [c], keys] = await Promise.all([
      guard(
        () => this.sql<
          {
            totp_secret: string | null;
            totp_enabled_ms: number | null;
            totp_last_step: number;
            locked_until_ms: number;
          }[]
        >`
        SELECT totp_secret, totp_enabled_ms, totp_last_step, locked_until_ms FROM second_factors WHERE account_id = ${accountId}`,
      ),
      guard(
        () =>
          this.sql<
            { n: number }[]
          >`SELECT count(*)::int AS n FROM recovery_codes WHERE account_id = ${accountId} AND used_ms IS NULL`,
      ),
      guard(() => this.sql<PasskeyRow[]>`SELECT * FROM passkeys WHERE account_id = ${accountId} ORDER BY id`),
    ]);
    return {
      totp: f?.totp_secret
        ? { sealedSecret: f.totp_secret, enabledAtMs: f.totp_enabled_ms ?? 0, lastStep: f.totp_last_step }
        : null,
      recoveryCodesLeft: c!.n,
      passkeys: keys.map(toPasskey),
      lockedUntilMs: f?.locked_until_ms ?? 0,
    };
  }

  private async putCodes(q: Sql, accountId: number, hashes: readonly string[]): Promise<void> {
    await q`DELETE FROM recovery_codes WHERE account_id = ${accountId}`;
    if (hashes.length)
      await q`INSERT INTO recovery_codes (account_id, code_hash) SELECT ${accountId}, jsonb_array_elements_text(${JSON.stringify(hashes)}::text::jsonb)`;
  }

  private tx<T>(work: (q: Sql) => Promise<T>): Promise<T> {
    return guard(() => this.sql.begin((tx) => work(tx as unknown as Sql)) as Promise<T>);
  }

  async enableTotp(
    accountId: number,
    sealedSecret: string,
    step: number,
    codeHashes: readonly string[],
    audit?: AuditDraft,
  ): Promise<void> {
    await this.tx(async (q) => {
      await q`INSERT INTO second_factors (account_id, totp_secret, totp_enabled_ms, totp_last_step) VALUES (${accountId}, ${sealedSecret}, ${this.nowMs()}, ${step})
              ON CONFLICT (account_id) DO UPDATE SET totp_secret = excluded.totp_secret, totp_enabled_ms = excluded.totp_enabled_ms, totp_last_step = excluded.totp_last_step`;
      await this.putCodes(q, accountId, codeHashes);
      if (audit) await appendAudit(q, this.nowMs(), { ...audit, accountId });
    });
  }

  async takeTotpStep(accountId: number, step: number): Promise<boolean> {
    const r = await guard(
      () =>
        this
          .sql`UPDATE second_factors SET totp_last_step = ${step} WHERE account_id = ${accountId} AND totp_secret IS NOT NULL AND totp_last_step < ${step}`,
    );
    return r.count === 1;
  }

  async useRecoveryCode(accountId: number, codeHash: string, audit?: AuditDraft): Promise<boolean> {
    const r = await audited(
      this.sql,
      this.nowMs,
      accountId,
      audit,
      (q) =>
        q`UPDATE recovery_codes SET used_ms = ${this.nowMs()} WHERE account_id = ${accountId} AND code_hash = ${codeHash} AND used_ms IS NULL`,
      (r) => (r.count === 1 ? audit! : null),
    );
    return r.count === 1;
  }

  async replaceRecoveryCodes(accountId: number, codeHashes: readonly string[], audit?: AuditDraft): Promise<void> {
    await this.tx(async (q) => {
      await this.putCodes(q, accountId, codeHashes);
      if (audit) await appendAudit(q, this.nowMs(), { ...audit, accountId });
    });
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
    return this.tx(async (q): Promise<Passkey | 'exists'> => {
      const [r] = await q<PasskeyRow[]>`
        INSERT INTO passkeys (account_id, credential_id, public_key, counter, transports, name, created_ms)
        VALUES (${p.accountId}, ${p.credentialId}, ${p.publicKey}, ${p.counter}, ${p.transports.join(',')}, ${p.name}, ${this.nowMs()})
        ON CONFLICT (credential_id) DO NOTHING RETURNING *`;
      if (!r) return 'exists';
      if (recoveryCodeHashes) await this.putCodes(q, p.accountId, recoveryCodeHashes);
      if (audit) await appendAudit(q, this.nowMs(), { ...audit, accountId: p.accountId });
      return toPasskey(r);
    });
  }

  async passkeyByCredential(credentialId: string): Promise<Passkey | null> {
    const [r] = await guard(() => this.sql<PasskeyRow[]>`SELECT * FROM passkeys WHERE credential_id = ${credentialId}`);
    return r ? toPasskey(r) : null;
  }

  async passkeyUsed(id: number, counter: number): Promise<void> {
    await guard(
      () => this.sql`UPDATE passkeys SET counter = ${counter}, last_used_ms = ${this.nowMs()} WHERE id = ${id}`,
    );
  }

  async removePasskey(accountId: number, id: number, audit?: AuditDraft): Promise<boolean> {
    const r = await audited(
      this.sql,
      this.nowMs,
      accountId,
      audit,
      (q) => q`DELETE FROM passkeys WHERE id = ${id} AND account_id = ${accountId}`,
      (r) => (r.count === 1 ? audit! : null),
    );
    return r.count === 1;
  }

  async disable(accountId: number, audit?: AuditDraft): Promise<boolean> {
    return this.tx(async (q) => {
      const totp =
        await q`UPDATE second_factors SET totp_secret = NULL, totp_enabled_ms = NULL, totp_last_step = 0, fail_times = '', locked_until_ms = 0
                           WHERE account_id = ${accountId} AND totp_secret IS NOT NULL`;
      const keys = await q`DELETE FROM passkeys WHERE account_id = ${accountId}`;
      await q`DELETE FROM recovery_codes WHERE account_id = ${accountId}`;
      const was = totp.count + keys.count > 0;
      if (was && audit) await appendAudit(q, this.nowMs(), { ...audit, accountId });
      return was;
    });
  }

  async fail(accountId: number, rule: SecondFactorLockRule, audit?: AuditDraft): Promise<number> {
    return this.tx(async (q) => {
      // The row lock serialises two nodes counting one account's failures.
      const [r] = await q<{ fail_times: string; locked_until_ms: number }[]>`
        INSERT INTO second_factors (account_id) VALUES (${accountId}) ON CONFLICT (account_id) DO UPDATE SET account_id = excluded.account_id
        RETURNING fail_times, locked_until_ms`;
      const now = this.nowMs();
      let times = failuresAfter(r!.fail_times, now, rule.windowMs);
      let lockedUntil = r!.locked_until_ms > now ? r!.locked_until_ms : 0;
      if (times.length >= rule.max) {
        lockedUntil = now + rule.lockMs;
        times = [];
      }
      await q`UPDATE second_factors SET fail_times = ${times.join(',')}, locked_until_ms = ${lockedUntil} WHERE account_id = ${accountId}`;
      if (audit)
        await appendAudit(q, now, {
          ...audit,
          accountId,
          details: { ...audit.details, ...(lockedUntil ? { locked_until: new Date(lockedUntil).toISOString() } : {}) },
        });
      return lockedUntil;
    });
  }
}
