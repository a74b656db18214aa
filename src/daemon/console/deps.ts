// What the console routes are built from, and small helpers they share.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { sessionHandle, type AuditContext } from '../services/audit.js';
import type { ApiContext } from '../services/context.js';
import type { SecondFactorService } from '../services/second-factor.js';
import { sourceIp } from '../services/source-ip.js';
import type { Account, ConsoleSessionStore } from '../store/index.js';
import type { Html } from './html.js';
import type { LoginLimiter } from './login-limiter.js';
import type { Flash, RevealSealer } from './session.js';

export interface ConsoleDeps {
  ctx: ApiContext;
  sessions: ConsoleSessionStore;
  sealer: RevealSealer;
  limiter: LoginLimiter;
  secondFactor: SecondFactorService;
}

/** Who acts in a console request, for its audit record: the session by its handle, from the caller's address, in this request. */
export function consoleAudit(request: FastifyRequest, signedIn = true): AuditContext {
  const sid = request.session?.sessionId;
  return {
    actor: { type: 'console', id: signedIn && sid ? sessionHandle(sid) : null },
    sourceIp: sourceIp(request),
    requestId: request.id,
  };
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Console routes reachable without a signed-in session (log in, log out). */
    consolePublic?: boolean;
  }
  interface FastifyRequest {
    /** The signed-in, active account of a console request (set by the session check). */
    consoleAccount?: Account | null;
  }
}

export function sendHtml(reply: FastifyReply, page: Html, status = 200): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(page.value);
}

/** The account of a request that passed the session check. */
export function accountOf(request: FastifyRequest): Account {
  const a = request.consoleAccount;
  if (!a) throw new Error('console route reached without a signed-in account');
  return a;
}

/** Takes the one-time message out of the session. */
export function takeFlash(request: FastifyRequest): Flash | undefined {
  const f = request.session.flash;
  if (f) delete request.session.flash;
  return f;
}

export function setFlash(request: FastifyRequest, kind: Flash['kind'], text: string): void {
  request.session.flash = { kind, text };
}

/** Form fields arrive as strings (formbody); anything else counts as empty. */
export function field(body: unknown, name: string): string {
  const v = (body as Record<string, unknown> | null | undefined)?.[name];
  return typeof v === 'string' ? v : '';
}

/** Post/Redirect/Get: a 303 so a reload never resends a form. */
export function seeOther(reply: FastifyReply, url: string): FastifyReply {
  return reply.redirect(url, 303);
}
