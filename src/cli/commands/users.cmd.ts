// `proxyctl users list|show|create|set|passwd|disable|enable|delete`: its arguments, flags and help, and the actions
// that call its run functions in users.ts (imported only when a command runs: main.ts builds the whole tree on every
// invocation, so this file stays light).
import type { Command } from 'commander';
import { MAX_PAGE, MAX_PAGE_SIZE } from '../../contract/paths.js';
import type { Kit } from './kit.js';
import type { FieldFlags as FieldOpts } from './users.js';

export function registerUsers(program: Command, kit: Kit): void {
  const { run, int, prefixOption } = kit;
  const { Option } = kit.commander;
  const fieldOptions = (c: Command, clearable: boolean): Command => {
    const none = clearable ? '; none clears it' : '';
    return c
      .option('--traffic-limit <size>', `traffic per plan period, e.g. 50GiB, 500MB${none}`)
      .option('--max-connections <n>', `open connections at once${none}`)
      .option('--rate-limit <rate>', `bandwidth, e.g. 10mbit${none}`)
      .option('--expires <iso>', `when the user stops working, ISO 8601 with a zone${none}`)
      .option(
        '--allow <list>',
        `target rules the user may reach, separated by , or ;${clearable ? ' (empty or none clears)' : ''}`,
      )
      .option(
        '--deny <list>',
        `target rules the user may not reach, separated by , or ;${clearable ? ' (empty or none clears)' : ''}`,
      );
  };
  const pickFields = (o: FieldOpts): FieldOpts => {
    const out: FieldOpts = {};
    for (const k of ['trafficLimit', 'maxConnections', 'rateLimit', 'expires', 'allow', 'deny'] as const)
      if (o[k] !== undefined) out[k] = o[k];
    return out;
  };
  const users = program
    .command('users')
    .description('the proxy users of your account (API key with users:read / users:write)');
  users
    .command('list')
    .description('list proxy users: a table on a TTY, tab-separated on a pipe, JSON with --json')
    .addOption(new Option('--status <status>', 'filter by status').choices(['all', 'active', 'disabled']))
    .option('--prefix <text>', 'usernames starting with this', prefixOption)
    .option('--page <n>', 'page number', int('--page', 1, MAX_PAGE))
    .option('--page-size <n>', `users per page (1-${MAX_PAGE_SIZE})`, int('--page-size', 1, MAX_PAGE_SIZE))
    .option('--all', 'walk every page')
    .action(
      async (
        opts: {
          status?: 'all' | 'active' | 'disabled';
          prefix?: string;
          page?: number;
          pageSize?: number;
          all?: boolean;
        },
        cmd: Command,
      ) =>
        run(cmd, async (ctx, deps) =>
          (await import('./users.js')).runUsersList(
            {
              ctx,
              all: opts.all === true,
              ...(opts.status ? { status: opts.status } : {}),
              ...(opts.prefix !== undefined ? { prefix: opts.prefix } : {}),
              ...(opts.page !== undefined ? { page: opts.page } : {}),
              ...(opts.pageSize !== undefined ? { pageSize: opts.pageSize } : {}),
            },
            deps,
          ),
        ),
    );
  users
    .command('show')
    .description('one proxy user: limits, rules and use this period')
    .argument('<username>')
    .action(async (username: string, _o: unknown, cmd: Command) =>
      run(cmd, async (ctx, deps) => (await import('./users.js')).runUsersShow({ ctx, username }, deps)),
    );
  fieldOptions(
    users
      .command('create')
      .description(
        'create a proxy user (its password made by the service and shown once, or --password-stdin), or many from --file (CSV or JSON lines, batches of 100)',
      )
      .argument('[username]')
      .option('--password-stdin', 'read the password from stdin (first line) instead of having one made')
      .option(
        '-f, --file <file>',
        'users from a CSV file with a header (username,password,traffic_limit,max_connections,rate_limit,expires_at,allow,deny) or JSON lines; - for stdin',
        (f: string, before: string | undefined) => {
          // Each file has its own header: a second one is refused rather than read in place of the first.
          if (before !== undefined)
            throw new kit.commander.InvalidArgumentError('one file only (each has its own header): join them first');
          return f;
        },
      ),
    false,
  )
    .option('--retry <n>', 'resends after server or network errors, per item', int('--retry', 0, 100), 3)
    .action(
      async (
        username: string | undefined,
        opts: FieldOpts & { passwordStdin?: boolean; file?: string; retry: number },
        cmd: Command,
      ) =>
        run(cmd, async (ctx, deps) =>
          (await import('./users.js')).runUsersCreate(
            {
              ctx,
              ...(username !== undefined ? { username } : {}),
              ...(opts.file !== undefined ? { file: opts.file } : {}),
              passwordStdin: opts.passwordStdin === true,
              retry: opts.retry,
              ...pickFields(opts),
            },
            deps,
          ),
        ),
    );
  fieldOptions(
    users.command('set').description("change a proxy user's limits, expiry or rules").argument('<username>'),
    true,
  ).action(async (username: string, opts: FieldOpts, cmd: Command) =>
    run(cmd, async (ctx, deps) =>
      (await import('./users.js')).runUsersSet({ ctx, username, ...pickFields(opts) }, deps),
    ),
  );
  users
    .command('passwd')
    .description(
      'give a proxy user a new password (made by the service and shown once, or --password-stdin); the old one stops working',
    )
    .argument('<username>')
    .option('--password-stdin', 'read the new password from stdin (first line)')
    .action(async (username: string, opts: { passwordStdin?: boolean }, cmd: Command) =>
      run(cmd, async (ctx, deps) =>
        (await import('./users.js')).runUsersPasswd(
          { ctx, username, passwordStdin: opts.passwordStdin === true },
          deps,
        ),
      ),
    );
  for (const [name, status, what] of [
    ['disable', 'disabled', "refuse a proxy user's new connections and close its open ones"],
    ['enable', 'active', 'let a disabled proxy user connect again'],
  ] as const) {
    users
      .command(name)
      .description(what)
      .argument('<username>')
      .action(async (username: string, _o: unknown, cmd: Command) =>
        run(cmd, async (ctx, deps) => (await import('./users.js')).runUsersSet({ ctx, username, status }, deps)),
      );
  }
  users
    .command('delete')
    .description('delete a proxy user (its open connections are closed; its usage stays in the history)')
    .argument('<username>')
    .option('-y, --yes', 'no question; needed when not on a terminal')
    .action(async (username: string, opts: { yes?: boolean }, cmd: Command) =>
      run(cmd, async (ctx, deps) =>
        (await import('./users.js')).runUsersDelete({ ctx, username, yes: opts.yes === true }, deps),
      ),
    );
}
