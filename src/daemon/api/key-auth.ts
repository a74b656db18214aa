// PLACEHOLDER until branch `keys` is merged (its key-auth.ts replaces this file whole): the same exports, refusing
// every request, so the customer API's routes build and are never open without key authentication.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Code } from '../../contract/codes.js';
import type { AuditContext } from '../services/audit.js';
import { sourceIp } from '../services/source-ip.js';
import { sendEnvelope } from './envelope.js';

export interface ApiKeyCaller {
  id: string;
  accountId: number;
  scopes: string[];
}

declare module 'fastify' {
  interface FastifyRequest {
    apiKey?: ApiKeyCaller;
  }
}

export function keyRoute(_scope: string, _kind: 'read' | 'write') {
  async function keyAuthHook(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    return sendEnvelope(request, reply, Code.INVALID_API_KEY);
  }
  return { onRequest: [keyAuthHook] };
}

export function keyAudit(request: FastifyRequest): AuditContext {
  return { actor: { type: 'key', id: request.apiKey!.id }, sourceIp: sourceIp(request), requestId: request.id };
}
