// Connections page: the account's own connection-log records only (the store query is scoped by account id,
// whatever the filter says); attempts that matched no account never show here (operator only).
import { isIP } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { DAY_MS } from '../../../rules/time.js';
import {
  ACCOUNT_REASONS,
  DECISIONS,
  connectionJson,
  isDecision,
  sourceIpFilter,
} from '../../services/connection-log.js';
import { accountOf, sendHtml, takeFlash, type ConsoleDeps } from '../deps.js';
import { connectionsPage, type ConnectionsFilter } from '../pages/connections.js';

const LIMIT = 200;
/** Filters look through the account's newest 20,000 records: a bounded read in the process that relays tunnels. */
const SCAN_LIMIT = 20_000;
const WINDOW_MS = 7 * DAY_MS;

type Query = { user?: string; ip?: string; decision?: string; reason?: string };

export default function connectionRoutes(app: FastifyInstance, deps: ConsoleDeps): void {
  app.get<{ Querystring: Query }>('/connections', async (request, reply) => {
    const account = accountOf(request);
    const str = (v: unknown, max: number) => (typeof v === 'string' ? v.trim().slice(0, max) : '');
    const q = request.query;
    const decision = str(q.decision, 16);
    const reason = str(q.reason, 40);
    const filter: ConnectionsFilter = {
      user: str(q.user, 128),
      ip: str(q.ip, 64),
      decision: isDecision(decision) ? decision : '',
      // Only reasons the account's records can carry (never one of an attempt that matched no account).
      reason: (ACCOUNT_REASONS as readonly string[]).includes(reason) ? reason : '',
    };
    // A value the filter does not know is explained, not dropped (which would show every record as if filtered).
    const problems: string[] = [];
    if (decision !== '' && filter.decision === '')
      problems.push(`There is no result "${decision}": choose ${DECISIONS.join(' or ')}.`);
    if (reason !== '' && filter.reason === '')
      problems.push(`There is no reason "${reason}": choose one of ${ACCOUNT_REASONS.join(', ')}.`);
    if (filter.ip && !isIP(filter.ip)) problems.push('Enter a complete IP address to filter by, such as 203.0.113.7.');
    const filterError = problems.length > 0 ? problems.join(' ') : undefined;
    const rows = filterError
      ? []
      : await deps.ctx.store.connectionLog.query({
          accountId: account.id,
          username: filter.user || undefined,
          sourceIp: filter.ip ? sourceIpFilter(filter.ip) : undefined,
          decision: filter.decision || undefined,
          reason: filter.reason || undefined,
          sinceMs: Date.now() - WINDOW_MS,
          limit: LIMIT,
          scanLimit: SCAN_LIMIT,
        });
    return sendHtml(
      reply,
      connectionsPage({
        csrf: reply.generateCsrf(),
        email: account.email,
        filter,
        filterError,
        rows: rows.map(connectionJson),
        limit: LIMIT,
        reasons: ACCOUNT_REASONS,
        flash: takeFlash(request),
      }),
    );
  });
}
