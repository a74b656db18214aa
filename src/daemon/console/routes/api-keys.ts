// The Account page's API keys card (docs/console.md): make a key (shown once) and revoke one (after a confirmation);
// both are sensitive actions (sudo.ts). The rules are the service's (services/api-keys.ts), as for `proxyd admin key`.
import type { FastifyInstance } from 'fastify';
import { KeyFieldError, SCOPES } from '../../../contract/scopes.js';
import { parseIsoTime } from '../../../contract/time.js';
import { ApiKeyService, KeyLimitError } from '../../services/api-keys.js';
import { accountOf, consoleAudit, seeOther, sendHtml, setFlash, type ConsoleDeps } from '../deps.js';
import { revokeKeyPage, scopeField } from '../pages/api-keys.js';
import { sensitiveAction } from '../sudo.js';

const FIELD_TEXT: Record<KeyFieldError['field'], string> = {
  name: 'Name',
  scopes: 'Scopes',
  expires_at: 'Expires',
  allowed_ips: 'Works only from',
};

export default function apiKeyRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  const keys = new ApiKeyService(deps.ctx.store, deps.ctx.nowMs);

  sensitiveAction(
    app,
    deps,
    '/api-keys',
    'api_key.create',
    { label: 'Making an API key' },
    async (request, reply, { fields }) => {
      const account = accountOf(request);
      // A checkbox per scope (the card's form); a `scopes` field (comma-separated, or repeated) is read too.
      const listed = new Set((fields.scopes ?? '').split(',').map((x) => x.trim()));
      const unknown = [...listed].filter((x) => x !== '' && !(SCOPES as readonly string[]).includes(x));
      const scopes: string[] = [
        ...SCOPES.filter((s) => (fields[scopeField(s)] ?? '') !== '' || listed.has(s)),
        ...unknown,
      ];
      const expires = (fields.expires ?? fields.expires_at ?? '').trim();
      try {
        let expiresAtMs: number | null = null;
        if (expires) {
          expiresAtMs = parseIsoTime(expires);
          if (expiresAtMs === null) throw new KeyFieldError('expires_at', 'enter a date such as 2027-01-31');
        }
        const made = await keys.create(
          account.id,
          { name: fields.name ?? '', scopes, expiresAtMs, allowedIps: fields.allowed_ips ?? '' },
          consoleAudit(request),
        );
        request.session.reveal = { kind: 'api-key', sealed: deps.sealer.seal(made.key), label: made.info.id };
        request.log.info(
          { event: 'console_api_key_created', account_id: account.id, key: made.info.id },
          'api key made in the console',
        );
        return seeOther(reply, '/console/account#api-keys');
      } catch (e) {
        if (e instanceof KeyFieldError) {
          const detail = e.message.slice(e.field.length + 2);
          setFlash(
            request,
            'error',
            `The API key was not made. ${FIELD_TEXT[e.field]}: ${e.field === 'scopes' && scopes.length === 0 ? 'tick at least one' : detail}.`,
          );
        } else if (e instanceof KeyLimitError) {
          setFlash(
            request,
            'error',
            `The API key was not made: you have ${e.message.replace(/^the account already holds /, '')}.`,
          );
        } else throw e;
        return seeOther(reply, '/console/account#api-keys');
      }
    },
  );

  app.get<{ Params: { id: string } }>('/api-keys/:id/revoke', async (request, reply) => {
    const account = accountOf(request);
    const key = (await keys.list(account.id)).find((k) => k.id === request.params.id && k.state !== 'revoked');
    if (!key) {
      setFlash(request, 'error', 'There is no such API key (revoked already?).');
      return seeOther(reply, '/console/account#api-keys');
    }
    return sendHtml(reply, revokeKeyPage({ csrf: reply.generateCsrf(), email: account.email, key }));
  });

  sensitiveAction(
    app,
    deps,
    '/api-keys/:id/revoke',
    'api_key.revoke',
    { label: 'Revoking an API key' },
    async (request, reply, { params }) => {
      const account = accountOf(request);
      const revoked = await keys.revoke(account.id, params.id ?? '', consoleAudit(request));
      if (!revoked) setFlash(request, 'error', 'There is no such API key (revoked already?). Nothing was changed.');
      else {
        request.log.info(
          { event: 'console_api_key_revoked', account_id: account.id, key: revoked.id },
          'api key revoked in the console',
        );
        setFlash(
          request,
          'success',
          `The API key “${revoked.name}” was revoked. It stops working at once, on every server.`,
        );
      }
      return seeOther(reply, '/console/account#api-keys');
    },
  );
}
