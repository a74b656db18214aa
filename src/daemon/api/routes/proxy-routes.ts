// The customer API's proxy users, target rules and gateway (docs/api.md, "Proxy users"), one file per endpoint, and
// 405 with `Allow` for a method a path does not take.
import type { FastifyInstance } from 'fastify';
import { PROXY_PATHS } from '../../../contract/paths.js';
import type { ApiContext } from '../../services/context.js';
import proxyGatewayRoute from './proxy-gateway.js';
import proxyRulesGetRoute from './proxy-rules-get.js';
import proxyRulesPutRoute from './proxy-rules-put.js';
import proxyUsersBatchRoute from './proxy-users-batch.js';
import proxyUserCreateRoute from './proxy-users-create.js';
import proxyUserDeleteRoute from './proxy-users-delete.js';
import { refuseOtherMethods } from './method-not-allowed.js';
import proxyUsersListRoute from './proxy-users-list.js';
import proxyUserPasswordRoute from './proxy-users-password.js';
import proxyUserPatchRoute from './proxy-users-patch.js';
import proxyUserShowRoute from './proxy-users-show.js';

export default function proxyRoutes(api: FastifyInstance, ctx: ApiContext): void {
  proxyUsersListRoute(api, ctx);
  proxyUserShowRoute(api, ctx);
  proxyUserCreateRoute(api, ctx);
  proxyUsersBatchRoute(api, ctx);
  proxyUserPatchRoute(api, ctx);
  proxyUserPasswordRoute(api, ctx);
  proxyUserDeleteRoute(api, ctx);
  proxyRulesGetRoute(api, ctx);
  proxyRulesPutRoute(api, ctx);
  proxyGatewayRoute(api, ctx);
  const allowed: Array<[string, readonly string[], (readonly string[])?]> = [
    [PROXY_PATHS.users, ['GET', 'POST']],
    [PROXY_PATHS.user, ['GET', 'PATCH', 'DELETE']],
    // GET, PATCH and DELETE of …/users/batch are the user named `batch`'s.
    [PROXY_PATHS.usersBatch, ['POST'], ['GET', 'PATCH', 'DELETE']],
    [PROXY_PATHS.userPassword, ['POST']],
    [PROXY_PATHS.rules, ['GET', 'PUT']],
    [PROXY_PATHS.gateway, ['GET']],
  ];
  for (const [url, methods, elsewhere] of allowed) refuseOtherMethods(api, url, methods, elsewhere);
}
