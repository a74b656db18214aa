// `proxyctl usage`: its arguments, flags and help, and the actions that call its run functions in usage.ts (imported
// only when a command runs: main.ts builds the whole tree on every invocation, so this file stays light).
import type { Command } from 'commander';
import { MAX_DOMAINS_LIMIT } from '../../contract/paths.js';
import type { Kit } from './kit.js';

export function registerUsage(program: Command, kit: Kit): void {
  const { run, int } = kit;
  const { Option } = kit.commander;
  program
    .command('usage')
    .description(
      'usage of your account: by proxy user (default), day, hour, target domain or dedicated egress address; a table in binary units, JSON with --json, CSV with --csv',
    )
    .addOption(
      new Option('--by <what>', 'rows per user, day, hour, domain or ip (dedicated egress address)')
        .choices(['user', 'day', 'hour', 'domain', 'ip'])
        .default('user'),
    )
    .option(
      '--from <iso>',
      'start: ISO 8601 date or date-time with a zone (for --by domain a day, YYYY-MM-DD); default: the start of the current period',
    )
    .option('--to <iso>', 'end (exclusive; for --by domain the last day, inclusive); default: now')
    .option('--user <user>', 'one proxy user (or ip:A.B.C.D for whitelist traffic), with --by day, hour or domain')
    .option(
      '--limit <n>',
      `domains by name with --by domain (1-${MAX_DOMAINS_LIMIT}; the rest as (other))`,
      int('--limit', 1, MAX_DOMAINS_LIMIT),
    )
    .option('--csv', 'CSV with a header line and raw byte counts')
    .action(
      async (
        opts: {
          by: 'user' | 'day' | 'hour' | 'domain' | 'ip';
          from?: string;
          to?: string;
          user?: string;
          limit?: number;
          csv?: boolean;
        },
        cmd: Command,
      ) =>
        run(cmd, async (ctx, deps) =>
          (await import('./usage.js')).runUsage(
            {
              ctx,
              by: opts.by,
              csv: opts.csv === true,
              ...(opts.from !== undefined ? { from: opts.from } : {}),
              ...(opts.to !== undefined ? { to: opts.to } : {}),
              ...(opts.user !== undefined ? { user: opts.user } : {}),
              ...(opts.limit !== undefined ? { limit: opts.limit } : {}),
            },
            deps,
          ),
        ),
    );
}
