// 405 for the methods a path does not take (docs/api.md, codes: 10405), with `Allow` naming those it does (HEAD
// beside GET, which Fastify serves for every GET route). One route per path, for the API's paths, the proxy-user
// paths and the daemon's own endpoints alike.
import type { FastifyInstance } from 'fastify';
import { Code } from '../../../contract/codes.js';
import { sendEnvelope } from '../envelope.js';

const ROUTE_METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'] as const;

/**
 * Every method of ROUTE_METHODS that `url` does not take answers 405. `elsewhere`: methods another route of the
 * same pattern answers (…/users/batch's GET is the user named `batch`'s), left to it.
 */
export function refuseOtherMethods(
  app: FastifyInstance,
  url: string,
  methods: readonly string[],
  elsewhere: readonly string[] = [],
): void {
  const allow = methods.includes('GET')
    ? [...methods.slice(0, 1), 'HEAD', ...methods.slice(1)].join(', ')
    : methods.join(', ');
  app.route({
    method: ROUTE_METHODS.filter((m) => !methods.includes(m) && !elsewhere.includes(m)),
    url,
    handler: async (request, reply) => {
      reply.header('allow', allow);
      return sendEnvelope(request, reply, Code.METHOD_NOT_ALLOWED);
    },
  });
}
