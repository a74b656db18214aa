// GET /healthz, /metrics, /ip, /openapi.json: the daemon's operational endpoints on the API listener.
import type { FastifyInstance } from 'fastify';
import { DAEMON_PATHS } from '../../../contract/paths.js';
import type { ApiContext } from '../../services/context.js';
import { sourceIp } from '../../services/source-ip.js';
import { refuseOtherMethods } from './method-not-allowed.js';
import openapiRoute from './openapi.js';

export default function daemonEndpoints(app: FastifyInstance, ctx: ApiContext): void {
  app.get(DAEMON_PATHS.healthz, async (_request, reply) => {
    const h = await ctx.health();
    return reply
      .code(h.ok ? 200 : 503)
      .send(h.ok ? { status: 'ok' } : { status: h.status ?? 'unavailable', down: h.down });
  });

  app.get(DAEMON_PATHS.metrics, async (_request, reply) => {
    const { contentType, text } = await ctx.metrics.render();
    return reply.type(contentType).send(text);
  });

  // The echo `proxyctl check` can use as its target: the caller's address as this daemon sees it.
  app.get(DAEMON_PATHS.ip, async (request) => ({ ip: sourceIp(request) }));

  openapiRoute(app);

  // Another method on any of them: 405 with Allow, as on the API's paths (it was a 404, as if the path were absent).
  for (const url of [DAEMON_PATHS.healthz, DAEMON_PATHS.metrics, DAEMON_PATHS.ip, DAEMON_PATHS.openapi])
    refuseOtherMethods(app, url, ['GET']);
}
