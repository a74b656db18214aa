// The Account page's "Two-factor authentication" card (TOTP set-up from a secret shown once, recovery codes,
// passkeys, turning it off) and its "Sessions" card (each live session; sign out one, or every other).
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { auditDraft, sessionHandle } from '../../services/audit.js';
import {
  CHALLENGE_TTL_MS,
  PasskeyError,
  pendingProblem,
  registrationOptions,
  relyingParty,
  verifyRegistration,
} from '../../services/passkeys.js';
import {
  hashRecoveryCode,
  newRecoveryCodes,
  normalizeRecoveryCode,
  secondFactorOn,
  type TotpEnrollment,
} from '../../services/second-factor.js';
import type { Account } from '../../store/index.js';
import { accountOf, consoleAudit, field, seeOther, setFlash, type ConsoleDeps } from '../deps.js';
import type { SecurityView, SessionRow } from '../pages/account.js';
import { sensitiveAction } from '../sudo.js';

/** How long a TOTP set-up stays open in a browser. */
const ENROLL_MS = 15 * 60_000;
const PASSKEY_NAME_MAX = 64;

/** "Chrome 131 on Linux", from a User-Agent (a rough reading, for people to recognise their browsers). */
export function browserName(ua: string): string {
  if (!ua) return 'Unknown browser';
  const os = /Android/.test(ua)
    ? 'Android'
    : /iPhone|iPad|iPod/.test(ua)
      ? 'iOS'
      : /Windows/.test(ua)
        ? 'Windows'
        : /Mac OS X|Macintosh/.test(ua)
          ? 'macOS'
          : /Linux/.test(ua)
            ? 'Linux'
            : /CrOS/.test(ua)
              ? 'ChromeOS'
              : null;
  const m = /Edg\/(\d+)/.exec(ua)
    ? ['Edge', /Edg\/(\d+)/.exec(ua)![1]]
    : /OPR\/(\d+)/.exec(ua)
      ? ['Opera', /OPR\/(\d+)/.exec(ua)![1]]
      : /Firefox\/(\d+)/.exec(ua)
        ? ['Firefox', /Firefox\/(\d+)/.exec(ua)![1]]
        : /(?:Chrome|Chromium|HeadlessChrome)\/(\d+)/.exec(ua)
          ? ['Chrome', /(?:Chrome|Chromium|HeadlessChrome)\/(\d+)/.exec(ua)![1]]
          : /Version\/(\d+).*Safari/.exec(ua)
            ? ['Safari', /Version\/(\d+)/.exec(ua)![1]]
            : /^curl\/([\d.]+)/.exec(ua)
              ? ['curl', /^curl\/([\d.]+)/.exec(ua)![1]]
              : null;
  const browser = m ? `${m[0]} ${m[1]}` : ua.slice(0, 40);
  return os ? `${browser} on ${os}` : browser;
}

/** The account's live sessions for the Sessions card, this one first, then the most recently seen. */
async function sessionRows(request: FastifyRequest, deps: ConsoleDeps, accountId: number): Promise<SessionRow[]> {
  const own = request.session.sessionId;
  const rows: SessionRow[] = [];
  for (const s of await deps.sessions.listForAccount(accountId)) {
    let d: { loginAtMs?: number; seenAtMs?: number; ip?: string; ua?: string } = {};
    try {
      d = JSON.parse(s.data) as typeof d;
    } catch {
      /* unreadable: listed with what is known */
    }
    rows.push({
      handle: sessionHandle(s.sid),
      current: s.sid === own,
      createdAtMs: d.loginAtMs ?? null,
      seenAtMs: d.seenAtMs ?? null,
      ip: d.ip ?? null,
      browser: browserName(d.ua ?? ''),
    });
  }
  return rows.sort((a, b) => Number(b.current) - Number(a.current) || (b.seenAtMs ?? 0) - (a.seenAtMs ?? 0));
}

/** What the Account page's security cards show. */
export async function securityView(
  request: FastifyRequest,
  deps: ConsoleDeps,
  account: Account,
  recoveryCodes: string[] | null,
): Promise<SecurityView> {
  const state = await deps.secondFactor.state(account.id);
  let enrollment: (TotpEnrollment & { nonce: string }) | null = null;
  const e = request.session.enrollTotp;
  if (e && !state.totp) {
    const secret = e.expiresAtMs > deps.ctx.nowMs() ? deps.sealer.open(e.sealed) : null;
    if (secret) enrollment = { ...(await deps.secondFactor.enrollmentOf(account.email, secret)), nonce: e.nonce };
    else delete request.session.enrollTotp;
  }
  return {
    on: secondFactorOn(state),
    totpSinceMs: state.totp?.enabledAtMs ?? null,
    recoveryCodesLeft: state.recoveryCodesLeft,
    passkeys: state.passkeys.map((p) => ({
      id: p.id,
      name: p.name,
      createdAtMs: p.createdAtMs,
      lastUsedAtMs: p.lastUsedAtMs,
    })),
    lockedUntilMs: state.lockedUntilMs > deps.ctx.nowMs() ? state.lockedUntilMs : 0,
    enrollment,
    recoveryCodes,
    sessions: await sessionRows(request, deps, account.id),
  };
}

export default function securityRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  const { store } = deps.ctx;

  // TOTP set-up: a new secret for this browser only (sealed in its session, with a nonce its form carries back).
  app.post('/2fa/totp/start', async (request, reply) => {
    const account = accountOf(request);
    const enrollment = await deps.secondFactor.startTotp(account.email);
    request.session.enrollTotp = {
      sealed: deps.sealer.seal(enrollment.secret),
      nonce: randomBytes(12).toString('base64url'),
      expiresAtMs: deps.ctx.nowMs() + ENROLL_MS,
    };
    return seeOther(reply, '/console/account#two-factor');
  });

  app.post('/2fa/totp/cancel', async (request, reply) => {
    delete request.session.enrollTotp;
    return seeOther(reply, '/console/account#two-factor');
  });

  app.post('/2fa/totp/enable', async (request, reply) => {
    const account = accountOf(request);
    const e = request.session.enrollTotp;
    const secret =
      e && e.expiresAtMs > deps.ctx.nowMs() && e.nonce === field(request.body, 'enroll')
        ? deps.sealer.open(e.sealed)
        : null;
    if (!secret) {
      setFlash(
        request,
        'error',
        'This set-up was started in another browser or has expired. Start again: nothing was turned on.',
      );
      return seeOther(reply, '/console/account#two-factor');
    }
    const r = await deps.secondFactor.enableTotp(
      account.id,
      secret,
      field(request.body, 'code'),
      consoleAudit(request),
    );
    if (!r.ok) {
      setFlash(
        request,
        'error',
        r.problem === 'malformed'
          ? 'Enter the 6-digit code your authenticator app shows for this secret. Two-factor authentication is still off.'
          : "That code does not match the secret shown in this browser (or your phone's clock is off). Two-factor authentication is still off.",
      );
      return seeOther(reply, '/console/account#two-factor');
    }
    delete request.session.enrollTotp;
    // Signed in with the factor just proved: sensitive actions need no second prompt right away.
    request.session.authAtMs = deps.ctx.nowMs();
    request.session.reveal = { kind: 'recovery-codes', sealed: deps.sealer.seal(JSON.stringify(r.recoveryCodes)) };
    request.log.info(
      { event: 'console_2fa_on', account_id: account.id, method: 'totp' },
      'two-factor authentication turned on',
    );
    setFlash(
      request,
      'success',
      'Two-factor authentication is on. From now on, signing in asks for a code from your app.',
    );
    return seeOther(reply, '/console/account#two-factor');
  });

  sensitiveAction(
    app,
    deps,
    '/2fa/recovery-codes',
    '2fa.recovery_codes',
    { label: 'Making new recovery codes' },
    async (request, reply) => {
      const account = accountOf(request);
      if (!(await deps.secondFactor.isOn(account.id))) {
        setFlash(request, 'error', 'Two-factor authentication is off: there are no recovery codes to renew.');
        return seeOther(reply, '/console/account#two-factor');
      }
      const codes = await deps.secondFactor.renewRecoveryCodes(account.id, consoleAudit(request));
      request.session.reveal = { kind: 'recovery-codes', sealed: deps.sealer.seal(JSON.stringify(codes)) };
      setFlash(request, 'success', 'New recovery codes: the old ones no longer work.');
      return seeOther(reply, '/console/account#two-factor');
    },
  );

  sensitiveAction(
    app,
    deps,
    '/2fa/disable',
    '2fa.disable',
    { label: 'Turning two-factor authentication off', freshSecondFactor: true },
    async (request, reply) => {
      const account = accountOf(request);
      const was = await deps.secondFactor.disable(account.id, consoleAudit(request));
      request.log.info({ event: 'console_2fa_off', account_id: account.id }, 'two-factor authentication turned off');
      setFlash(
        request,
        was ? 'success' : 'info',
        was
          ? 'Two-factor authentication is off. Signing in asks for your password only.'
          : 'Two-factor authentication was already off.',
      );
      return seeOther(reply, '/console/account#two-factor');
    },
  );

  // Passkeys: registration through the browser (JSON both ways, the form's CSRF token in the body).
  app.post('/2fa/passkey/options', async (request, reply) => {
    const account = accountOf(request);
    const state = await deps.secondFactor.state(account.id);
    const options = await registrationOptions(
      relyingParty(deps.ctx.consoleOrigin, request.protocol, request.host),
      account,
      state.passkeys,
    );
    request.session.webauthn = {
      challenge: options.challenge,
      purpose: 'register',
      expiresAtMs: deps.ctx.nowMs() + CHALLENGE_TTL_MS,
    };
    return reply.send(options);
  });

  app.post('/2fa/passkey/register', async (request, reply) => {
    const account = accountOf(request);
    const pending = request.session.webauthn;
    const problem = pendingProblem(pending, 'register', deps.ctx.nowMs());
    if (problem) return reply.code(400).send({ message: `${problem} No passkey was added.` });
    delete request.session.webauthn;
    const body = request.body as { response?: unknown; name?: unknown } | null;
    const name = (typeof body?.name === 'string' ? body.name.trim() : '').slice(0, PASSKEY_NAME_MAX) || 'Passkey';
    try {
      const cred = await verifyRegistration(
        relyingParty(deps.ctx.consoleOrigin, request.protocol, request.host),
        pending!,
        body?.response,
      );
      const first = !(await deps.secondFactor.isOn(account.id));
      // The first factor of an account comes with its recovery codes (shown once, as with TOTP).
      const codes = first ? newRecoveryCodes() : null;
      const added = await store.secondFactors.addPasskey(
        { accountId: account.id, ...cred, name },
        codes && codes.map((c) => hashRecoveryCode(normalizeRecoveryCode(c)!)),
        auditDraft(consoleAudit(request), '2fa.passkey_added', name, first ? { first_factor: true } : {}),
      );
      if (added === 'exists')
        return reply.code(409).send({ message: 'That passkey is registered already. No passkey was added.' });
      if (codes) request.session.reveal = { kind: 'recovery-codes', sealed: deps.sealer.seal(JSON.stringify(codes)) };
      request.session.authAtMs = deps.ctx.nowMs();
      request.log.info({ event: 'console_passkey_added', account_id: account.id }, 'passkey added');
      setFlash(request, 'success', `Passkey "${name}" added.${first ? ' Two-factor authentication is on.' : ''}`);
      return reply.send({ ok: true, next: '/console/account#two-factor' });
    } catch (e) {
      if (!(e instanceof PasskeyError)) throw e;
      return reply.code(400).send({ message: `${e.message} No passkey was added.` });
    }
  });

  sensitiveAction(
    app,
    deps,
    '/2fa/passkey/:id/remove',
    '2fa.passkey_remove',
    { label: 'Removing a passkey', freshSecondFactor: true },
    async (request, reply, { params }) => {
      const account = accountOf(request);
      const id = /^[1-9]\d{0,15}$/.test(params.id ?? '') ? Number(params.id) : 0;
      const pk = (await deps.secondFactor.state(account.id)).passkeys.find((p) => p.id === id);
      if (
        !pk ||
        !(await store.secondFactors.removePasskey(
          account.id,
          pk.id,
          auditDraft(consoleAudit(request), '2fa.passkey_removed', pk.name),
        ))
      ) {
        setFlash(request, 'error', 'That passkey does not exist.');
      } else setFlash(request, 'success', `Passkey "${pk.name}" removed.`);
      return seeOther(reply, '/console/account#two-factor');
    },
  );

  // Sessions: each ends at once on every node (sessions are rows in the shared database, read on every request).
  app.post<{ Params: { handle: string } }>('/sessions/:handle/end', async (request, reply) => {
    const account = accountOf(request);
    const target = (await deps.sessions.listForAccount(account.id)).find(
      (s) => sessionHandle(s.sid) === request.params.handle,
    );
    if (!target) {
      setFlash(request, 'error', 'That session has ended already.');
      return seeOther(reply, '/console/account#sessions');
    }
    if (target.sid === request.session.sessionId) return seeOther(reply, '/console/account#sessions');
    await deps.sessions.destroy(
      target.sid,
      auditDraft(consoleAudit(request), 'console.session_ended', request.params.handle),
    );
    setFlash(request, 'success', 'That session is signed out.');
    return seeOther(reply, '/console/account#sessions');
  });

  app.post('/sessions/end-others', async (request, reply) => {
    const account = accountOf(request);
    const n = await deps.sessions.destroyOthers(
      account.id,
      request.session.sessionId,
      auditDraft(consoleAudit(request), 'console.sessions_ended', null, { including_this: false }),
    );
    setFlash(
      request,
      'success',
      n ? `Signed out ${n} other ${n === 1 ? 'session' : 'sessions'}.` : 'No other session was signed in.',
    );
    return seeOther(reply, '/console/account#sessions');
  });
}
