// Re-authentication before sensitive actions ("sudo mode", docs/console.md): resetting the API token, making or
// revoking API keys, changing the password or email, turning the second factor off, setting webhooks. Each is
// allowed within 10 min of a password (and second factor, when on) entry; otherwise its form's fields are kept
// (sealed) in the session, the console asks again on /console/confirm, then carries out that very action.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { verifyPassword } from '../secrets.js';
import {
  assertionCredential,
  authenticationOptions,
  CHALLENGE_TTL_MS,
  PasskeyError,
  pendingProblem,
  relyingParty,
  verifyAssertion,
} from '../services/passkeys.js';
import { secondFactorOn, untilText } from '../services/second-factor.js';
import { sourceIp, sourceLimitKey } from '../services/source-ip.js';
import { accountOf, consoleAudit, field, seeOther, sendHtml, type ConsoleDeps } from './deps.js';
import { LoginLimiter } from './login-limiter.js';
import { confirmPage } from './pages/confirm.js';
import type { Flash } from './session.js';

/** How long a password (and second factor) entry opens sensitive actions. */
export const SUDO_WINDOW_MS = 10 * 60_000;
/** How long a pending action waits for the confirmation. */
const PENDING_MS = 10 * 60_000;
// Passwords set before the one rule could be up to 1024 characters: still checked.
const MAX_VERIFIED_LENGTH = 1024;

/** What a sensitive action receives: its form's fields and its route's parameters, as first posted. */
export interface SensitiveInput {
  fields: Record<string, string>;
  params: Record<string, string>;
}

export type SensitiveHandler = (
  request: FastifyRequest,
  reply: FastifyReply,
  input: SensitiveInput,
) => Promise<FastifyReply>;

interface SensitiveAction {
  /** What the confirmation page says is waiting ("Reset your API token"). */
  label: string;
  /** Also a second factor entered for this very action, however recent the last one (turning the second factor off). */
  freshSecondFactor: boolean;
  handler: SensitiveHandler;
}

const ACTIONS = new Map<string, SensitiveAction>();

function formFields(body: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (body && typeof body === 'object') {
    for (const [k, v] of Object.entries(body as Record<string, unknown>)) {
      if (k === '_csrf') continue;
      if (typeof v === 'string') out[k] = v;
      // A field sent more than once (checkboxes sharing a name): its values, comma-separated.
      else if (Array.isArray(v) && v.every((x) => typeof x === 'string')) out[k] = v.join(',');
    }
  }
  return out;
}

/** The session's last password (+ second factor) entry is recent enough for a sensitive action. */
export function recentlyAuthenticated(request: FastifyRequest, nowMs: number): boolean {
  return nowMs - (request.session.authAtMs ?? 0) <= SUDO_WINDOW_MS;
}

/**
 * Registers `POST path` as a sensitive action named `name`: carried out at once within the re-authentication window,
 * else after /console/confirm. The hook every sensitive console form goes through (the API keys card too: call it
 * with the card's create and revoke handlers).
 */
export function sensitiveAction(
  app: FastifyInstance,
  deps: ConsoleDeps,
  path: string,
  name: string,
  o: { label: string; freshSecondFactor?: boolean },
  handler: SensitiveHandler,
): void {
  ACTIONS.set(name, { label: o.label, freshSecondFactor: o.freshSecondFactor === true, handler });
  app.post(path, async (request, reply) => {
    const input: SensitiveInput = {
      fields: formFields(request.body),
      params: { ...((request.params as Record<string, string> | undefined) ?? {}) },
    };
    const now = deps.ctx.nowMs();
    if (!o.freshSecondFactor && recentlyAuthenticated(request, now)) return handler(request, reply, input);
    request.session.sudo = { action: name, sealed: deps.sealer.seal(JSON.stringify(input)), atMs: now };
    return seeOther(reply, '/console/confirm');
  });
}

/** What the confirmation still needs: the password (the last entry is old), a second factor (on, and old or asked for). */
async function stillNeeded(request: FastifyRequest, deps: ConsoleDeps, action: SensitiveAction) {
  const sudo = request.session.sudo!;
  const now = deps.ctx.nowMs();
  const fresh = recentlyAuthenticated(request, now);
  const state = await deps.secondFactor.state(accountOf(request).id);
  const on = secondFactorOn(state);
  return {
    password: !fresh && !sudo.passwordOk,
    secondFactor:
      on &&
      (!fresh || action.freshSecondFactor) &&
      !(sudo.passkeyOkAtMs && now - sudo.passkeyOkAtMs < CHALLENGE_TTL_MS),
    state,
  };
}

/** An action left waiting (the person went elsewhere) does not keep its sealed fields in the session past its time. */
export function dropStalePending(request: FastifyRequest, nowMs: number): void {
  const sudo = request.session?.sudo;
  if (sudo && nowMs - sudo.atMs > PENDING_MS) delete request.session.sudo;
}

export default function sudoRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  const pendingAction = (request: FastifyRequest): SensitiveAction | null => {
    const sudo = request.session.sudo;
    if (!sudo || deps.ctx.nowMs() - sudo.atMs > PENDING_MS) return null;
    return ACTIONS.get(sudo.action) ?? null;
  };

  const show = async (request: FastifyRequest, reply: FastifyReply, notice?: Flash, status = 200) => {
    const action = pendingAction(request)!;
    const need = await stillNeeded(request, deps, action);
    const account = accountOf(request);
    return sendHtml(
      reply,
      confirmPage({
        csrf: reply.generateCsrf(),
        email: account.email,
        label: action.label,
        askPassword: need.password,
        askSecondFactor: need.secondFactor,
        totp: need.state.totp !== null,
        passkeys: need.state.passkeys.length > 0,
        notice,
      }),
      status,
    );
  };

  app.get('/confirm', async (request, reply) => {
    if (!pendingAction(request)) {
      delete request.session.sudo;
      return seeOther(reply, '/console/account');
    }
    return show(request, reply);
  });

  app.post('/confirm/cancel', async (request, reply) => {
    delete request.session.sudo;
    return seeOther(reply, '/console/account');
  });

  app.post('/confirm', async (request, reply) => {
    const action = pendingAction(request);
    if (!action) {
      delete request.session.sudo;
      return seeOther(reply, '/console/account');
    }
    const account = accountOf(request);
    const sudo = request.session.sudo!;
    let need = await stillNeeded(request, deps, action);
    if (need.password) {
      // A guess here counts as a failed log-in (same limits): a session taken over cannot find the password by trying.
      const keys = LoginLimiter.keys(account.email, sourceLimitKey(sourceIp(request)));
      const wait = deps.limiter.retryAfterSec(keys);
      if (wait > 0) {
        reply.header('retry-after', String(wait));
        return show(
          request,
          reply,
          { kind: 'error', text: `Too many wrong passwords. Try again in ${Math.ceil(wait / 60)} min.` },
          429,
        );
      }
      const password = field(request.body, 'password');
      if (
        !(await verifyPassword(
          password.slice(0, MAX_VERIFIED_LENGTH),
          await deps.ctx.store.accounts.passwordHash(account.id),
        ))
      ) {
        deps.limiter.recordFailure(keys);
        request.log.info(
          { event: 'console_confirm_password_wrong', account_id: account.id },
          'console: wrong password to confirm an action',
        );
        return show(request, reply, { kind: 'error', text: 'The password is wrong. Nothing was changed.' }, 401);
      }
      deps.limiter.recordSuccess(keys);
      sudo.passwordOk = true;
      need = await stillNeeded(request, deps, action);
    }
    if (need.secondFactor) {
      const typed = field(request.body, 'code');
      if (typed.trim() === '')
        return show(request, reply, {
          kind: 'info',
          text: 'Now enter a code from your authenticator app, a recovery code, or use a passkey.',
        });
      const r = await deps.secondFactor.check(account.id, typed, consoleAudit(request), 'confirm');
      if (!r.ok)
        return show(request, reply, secondFactorNotice(r, deps.ctx.nowMs()), r.problem === 'locked' ? 429 : 401);
    }
    delete request.session.sudo;
    request.session.authAtMs = deps.ctx.nowMs();
    const input = JSON.parse(deps.sealer.open(sudo.sealed) ?? '{"fields":{},"params":{}}') as SensitiveInput;
    return action.handler(request, reply, input);
  });

  // A passkey as the second factor of a confirmation: its answer marks the pending action, then the page posts /confirm.
  app.post('/confirm/passkey/options', async (request, reply) => {
    if (!pendingAction(request)) return reply.code(409).send({ message: 'No action is waiting for confirmation.' });
    const state = await deps.secondFactor.state(accountOf(request).id);
    const rp = relyingParty(deps.ctx.consoleOrigin, request.protocol, request.host);
    const options = await authenticationOptions(rp, state.passkeys);
    request.session.webauthn = {
      challenge: options.challenge,
      purpose: 'confirm',
      expiresAtMs: deps.ctx.nowMs() + CHALLENGE_TTL_MS,
    };
    return reply.send(options);
  });

  app.post('/confirm/passkey', async (request, reply) => {
    const account = accountOf(request);
    const sudo = request.session.sudo;
    const pending = request.session.webauthn;
    const problem = !sudo
      ? 'No action is waiting for confirmation.'
      : pendingProblem(pending, 'confirm', deps.ctx.nowMs());
    if (problem) return reply.code(400).send({ message: problem });
    delete request.session.webauthn;
    try {
      const passkey = await deps.ctx.store.secondFactors.passkeyByCredential(
        assertionCredential((request.body as { response?: unknown } | null)?.response),
      );
      if (!passkey || passkey.accountId !== account.id)
        throw new PasskeyError('That passkey is not registered to this account.');
      const state = await deps.secondFactor.state(account.id);
      if (state.lockedUntilMs > deps.ctx.nowMs())
        return reply.code(429).send({
          message: `Too many wrong second factors: the second step is locked until ${untilText(state.lockedUntilMs, deps.ctx.nowMs())}.`,
        });
      const counter = await verifyAssertion(
        relyingParty(deps.ctx.consoleOrigin, request.protocol, request.host),
        pending!,
        (request.body as { response: unknown }).response,
        passkey,
      );
      await deps.ctx.store.secondFactors.passkeyUsed(passkey.id, counter);
      sudo!.passkeyOkAtMs = deps.ctx.nowMs();
      return reply.send({ ok: true });
    } catch (e) {
      if (!(e instanceof PasskeyError)) throw e;
      await deps.secondFactor.failed(account.id, consoleAudit(request), 'confirm', 'wrong', 'passkey');
      return reply.code(400).send({ message: e.message });
    }
  });
}

/** What a refused second factor tells the person (a lock says until when). */
export function secondFactorNotice(
  r: { problem: 'locked'; untilMs: number } | { problem: 'malformed' | 'wrong' | 'replayed'; lockedUntilMs: number },
  nowMs: number,
): Flash {
  if (r.problem === 'locked')
    return {
      kind: 'error',
      text: `Too many wrong codes: the second step is locked until ${untilText(r.untilMs, nowMs)}. Nothing was changed.`,
    };
  if (r.lockedUntilMs > 0)
    return {
      kind: 'error',
      text: `That code is not valid, and too many wrong codes were entered: the second step is locked until ${untilText(r.lockedUntilMs, nowMs)}.`,
    };
  if (r.problem === 'malformed')
    return {
      kind: 'error',
      text: 'Enter the 6-digit code from your authenticator app, or a recovery code (16 letters and digits).',
    };
  if (r.problem === 'replayed')
    return { kind: 'error', text: 'That code was used already. Wait for the next code in your app.' };
  return { kind: 'error', text: "That code is not valid. Check your app (and your phone's clock) and try again." };
}
