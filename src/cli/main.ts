// proxyctl entry point: commander parses, each command's module is imported only when it runs.
import module from 'node:module';
import os from 'node:os';
import path from 'node:path';
import type { Command } from 'commander';
import type { Context } from './context.js';
import type { Deps } from './deps.js';
import { Exit, type ExitCode } from './exit-codes.js';
import type { Io } from './io.js';
import { looksLikeToken, scrubSecrets } from './errors.js';
import { isApiKeyShaped } from './key-format.js';
import { isStrictIPv4 } from '../rules/ipv4-syntax.js';
import { MAX_DOMAINS_LIMIT, MAX_PAGE, MAX_PAGE_SIZE } from '../contract/paths.js';
import { VERSION } from '../contract/version.js';

interface MainOverrides {
  io?: Io;
  env?: NodeJS.ProcessEnv;
  /** Replaces the real dependencies (tests). */
  deps?: (ctx: Context) => Promise<Deps>;
}

type Runner = (ctx: Context, deps: Deps) => Promise<ExitCode>;

type Commander = typeof import('commander');

/**
 * V8 code cache for everything loaded after this point (commander, undici, zod, ...): start-up
 * is mostly module loading. Kept in the user's cache dir; NODE_DISABLE_COMPILE_CACHE=1 turns it off.
 */
function enableCompileCache(env: NodeJS.ProcessEnv): void {
  if (typeof module.enableCompileCache !== 'function' || env.NODE_DISABLE_COMPILE_CACHE) return;
  try {
    const base = env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
    module.enableCompileCache(path.join(base, 'proxyctl', 'compile-cache'));
  } catch {
    // A cache is an optimisation only.
  }
}

function intOption(InvalidArgumentError: Commander['InvalidArgumentError'], name: string, min: number, max = Number.MAX_SAFE_INTEGER) {
  return (v: string): number => {
    if (!/^\d+$/.test(v)) throw new InvalidArgumentError(`${name} must be a whole number`);
    const n = Number(v);
    if (n < min || n > max) throw new InvalidArgumentError(`${name} must be between ${min} and ${max}`);
    return n;
  };
}

export function buildProgram(commander: Commander, run: (cmd: Command, runner: Runner) => Promise<void>, io: Pick<Io, 'stdout' | 'stderr'>): Command {
  const { Argument, Command, InvalidArgumentError, Option } = commander;
  const int = (name: string, min: number, max?: number) => intOption(InvalidArgumentError, name, min, max);
  // Same strict syntax the server applies; checked here so a typo is a usage error, not a 10400.
  const ipOption = (v: string): string => {
    if (!isStrictIPv4(v)) throw new InvalidArgumentError('not an IPv4 address');
    return v;
  };
  // The API's rule for a username prefix (1-64 of A-Z a-z 0-9 . _ -), checked here so a typo is a usage error, not a
  // 10400; a pasted key or token passes it, and must not go into a URL.
  const prefixOption = (v: string): string => {
    if (looksLikeToken(v) || isApiKeyShaped(v)) throw new InvalidArgumentError('an API key or token was given where a username prefix belongs; it was not sent');
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(v)) throw new InvalidArgumentError('--prefix must be 1-64 characters of A-Z a-z 0-9 . _ -');
    return v;
  };
  const program = new Command('proxyctl');
  program
    .description('Manage your proxy account: its source-IP whitelist, proxy users, proxy lists and usage; check connectivity')
    .version(VERSION, '-V, --version')
    .option('--base-url <url>', 'API base URL (env PROXYCTL_BASE_URL, then config, default http://127.0.0.1:8080)')
    .option('--json', 'machine output: one JSON document on stdout')
    .option('--no-color', 'no colour (NO_COLOR is honoured too)')
    .option('-q, --quiet', 'no progress or notes; errors and failures only')
    .exitOverride()
    .showSuggestionAfterError()
    .configureOutput({
      writeOut: (s) => void io.stdout.write(s),
      // Commander echoes what it could not place (an unknown option's value, an extra argument): a token pasted
      // there must not reach the terminal or a CI log.
      writeErr: (s) => void io.stderr.write(scrubSecrets(s)),
      // One line, as every other error: commander puts its "(Did you mean …?)" on a line of its own.
      outputError: (s, write) => write(`${s.trimEnd().replace(/\s*\n\s*/g, ' ')}\n`),
    })
    .addHelpText(
      'after',
      `
Exit codes: 0 done, 1 error, 2 usage error, 3 some items failed, 4 token or API key missing or rejected
            (or the key lacks the scope), 5 rate limited and out of retries, 6 connectivity check failed.

Examples:
  proxyctl login < token.txt
  proxyctl whitelist add 8.8.8.8=office 9.9.9.9
  proxyctl whitelist add --file ips.txt --failed-out failed.txt
  proxyctl whitelist list --all --json
  proxyctl whitelist sync --file ips.txt --dry-run
  proxyctl key set < key.txt
  proxyctl users create alice --traffic-limit 50GiB
  proxyctl users create --file users.csv
  proxyctl proxies export --user alice --country us --count 10 --password-stdin < pass.txt
  proxyctl usage --by domain --limit 20
  proxyctl check --proxy http://USER:PASS@proxy.example:3128 --repeat 20 --report check.md
  source <(proxyctl completion bash)`,
    );

  program
    .command('login')
    .description('store an API token (hidden prompt on a TTY, else read from stdin) after the API accepts it')
    .option('--with-token', 'read the token from stdin')
    .action(async (opts: { withToken?: boolean }, cmd: Command) =>
      run(cmd, async (ctx, deps) => (await import('./commands/login.js')).runLogin({ ctx, withToken: opts.withToken === true }, deps)),
    );

  program
    .command('logout')
    .description('remove the stored API token for the base URL')
    .action(async (_opts: unknown, cmd: Command) => run(cmd, async (ctx, deps) => (await import('./commands/logout.js')).runLogout({ ctx }, deps)));

  const auth = program.command('auth').description('API token status');
  auth
    .command('status')
    .description('where the token comes from, its access key, and whether the API accepts it (exit 4 if not)')
    .action(async (_opts: unknown, cmd: Command) => run(cmd, async (ctx, deps) => (await import('./commands/auth-status.js')).runAuthStatus({ ctx }, deps)));

  const config = program.command('config').description('read and write settings (keys: base_url, output, check.target)');
  config
    .command('get')
    .description('print a setting (all settings without KEY)')
    .argument('[key]', 'base_url, output or check.target')
    .action(async (key: string | undefined, _o: unknown, cmd: Command) =>
      run(cmd, async (ctx, deps) => (await import('./commands/config.js')).runConfig({ ctx, action: 'get', ...(key !== undefined ? { key } : {}) }, deps)),
    );
  config
    .command('set')
    .description('change a setting: base_url URL | output table|json | check.target URL')
    .argument('<key>')
    .argument('<value>')
    .action(async (key: string, value: string, _o: unknown, cmd: Command) =>
      run(cmd, async (ctx, deps) => (await import('./commands/config.js')).runConfig({ ctx, action: 'set', key, value }, deps)),
    );
  config
    .command('unset')
    .description('remove a setting')
    .argument('<key>')
    .action(async (key: string, _o: unknown, cmd: Command) =>
      run(cmd, async (ctx, deps) => (await import('./commands/config.js')).runConfig({ ctx, action: 'unset', key }, deps)),
    );

  const wl = program.command('whitelist').description('list, add and delete whitelisted source IPs');
  wl.command('list')
    .description('list entries: a table on a TTY, tab-separated on a pipe, JSON with --json')
    .addOption(new Option('--status <status>', 'filter by status').choices(['all', 'active', 'disabled']))
    .option('--ip <ip>', 'exact IP match', ipOption)
    .option('--page <n>', 'page number', int('--page', 1, MAX_PAGE))
    .option('--page-size <n>', `entries per page (1-${MAX_PAGE_SIZE})`, int('--page-size', 1, MAX_PAGE_SIZE))
    .option('--all', 'walk every page')
    .action(async (opts: { status?: 'all' | 'active' | 'disabled'; ip?: string; page?: number; pageSize?: number; all?: boolean }, cmd: Command) =>
      run(cmd, async (ctx, deps) => {
        const { runList } = await import('./commands/whitelist-list.js');
        return runList(
          {
            ctx,
            all: opts.all === true,
            ...(opts.status ? { status: opts.status } : {}),
            ...(opts.ip ? { ip: opts.ip } : {}),
            ...(opts.page !== undefined ? { page: opts.page } : {}),
            ...(opts.pageSize !== undefined ? { pageSize: opts.pageSize } : {}),
          },
          deps,
        );
      }),
    );

  for (const op of ['add', 'delete'] as const) {
    const c = wl
      .command(op)
      .description(
        op === 'add'
          ? 'add IPs (IP or IP=REMARK), any number: batches of 100 paced to the rate limit, failed items retried alone'
          : 'delete IPs, any number: batches of 100 paced to the rate limit, failed items retried alone',
      )
      .argument(op === 'add' ? '[ip=remark...]' : '[ip...]', op === 'add' ? 'IP or IP=REMARK; - reads stdin' : 'IP; - reads stdin')
      .option('-f, --file <file>', 'read IPs from FILE, one per line (# comments); - for stdin');
    if (op === 'add') {
      c.option('--remark <remark>', 'remark for IPs given without =REMARK')
        .option('--current', "also add this machine's public IPv4, as an echo sees it")
        .option('--echo <url>', 'with --current: the IP echo to ask (JSON {"ip":…} or plain text; default: the API\'s /ip)');
    }
    c.option('--retry <n>', 'resends after server or network errors, per item', int('--retry', 0, 100), 3)
      .option('--failed-out <file>', 'write the IPs that still failed, one per line (ready for --file)')
      .action(async (args: string[], opts: { file?: string; remark?: string; retry: number; failedOut?: string; current?: boolean; echo?: string }, cmd: Command) =>
        run(cmd, async (ctx, deps) => {
          if (opts.echo !== undefined && !opts.current) throw new (await import('./errors.js')).UsageError('--echo goes with --current');
          const { runBatchCommand } = await import('./commands/whitelist-batch.js');
          return runBatchCommand(
            {
              ctx,
              op,
              args,
              retry: opts.retry,
              ...(opts.file !== undefined ? { file: opts.file } : {}),
              ...(opts.remark !== undefined ? { remark: opts.remark } : {}),
              ...(opts.failedOut !== undefined ? { failedOut: opts.failedOut } : {}),
              ...(opts.current ? { currentFrom: opts.echo ?? `${ctx.baseUrl}/ip` } : {}),
            },
            deps,
          );
        }),
      );
  }

  wl.command('sync')
    .description('make the whitelist equal to a file (IP[=REMARK] per line): shows the plan, then deletes what is not listed and adds what is missing')
    .requiredOption('-f, --file <file>', 'the whole whitelist, one IP[=REMARK] per line (# comments); - for stdin')
    .option('--dry-run', 'print the plan only; change nothing')
    .option('-y, --yes', 'no question; needed for deletes when not on a terminal')
    .option('--update-remarks', 'apply changed remarks (as delete + add); without it such entries count as unchanged')
    .option('--retry <n>', 'resends after server or network errors, per item', int('--retry', 0, 100), 3)
    .action(async (opts: { file: string; dryRun?: boolean; yes?: boolean; updateRemarks?: boolean; retry: number }, cmd: Command) =>
      run(cmd, async (ctx, deps) =>
        (await import('./commands/whitelist-sync.js')).runSync(
          { ctx, file: opts.file, dryRun: opts.dryRun === true, yes: opts.yes === true, updateRemarks: opts.updateRemarks === true, retry: opts.retry },
          deps,
        ),
      ),
    );

  const key = program.command('key').description('the API key (pxk_…) that opens proxy users, proxy lists and usage (the token opens only the whitelist)');
  key
    .command('set')
    .description('store an API key (hidden prompt on a TTY, else read from stdin) after the API accepts it')
    .option('--stdin', 'read the key from stdin (also the default when stdin is not a terminal)')
    .action(async (opts: { stdin?: boolean }, cmd: Command) =>
      run(cmd, async (ctx, deps) => (await import('./commands/key.js')).runKeySet({ ctx, stdin: opts.stdin === true }, deps)),
    );
  key
    .command('status')
    .description('where the API key comes from, its id, and whether the API accepts it (exit 4 if not); never prints the key')
    .action(async (_opts: unknown, cmd: Command) => run(cmd, async (ctx, deps) => (await import('./commands/key.js')).runKeyStatus({ ctx }, deps)));
  key
    .command('forget')
    .description('remove the stored API key for the base URL')
    .action(async (_opts: unknown, cmd: Command) => run(cmd, async (ctx, deps) => (await import('./commands/key.js')).runKeyForget({ ctx }, deps)));

  type FieldOpts = { trafficLimit?: string; maxConnections?: string; rateLimit?: string; expires?: string; allow?: string; deny?: string };
  const fieldOptions = (c: Command, clearable: boolean): Command => {
    const none = clearable ? '; none clears it' : '';
    return c
      .option('--traffic-limit <size>', `traffic per plan period, e.g. 50GiB, 500MB${none}`)
      .option('--max-connections <n>', `open connections at once${none}`)
      .option('--rate-limit <rate>', `bandwidth, e.g. 10mbit${none}`)
      .option('--expires <iso>', `when the user stops working, ISO 8601 with a zone${none}`)
      .option('--allow <list>', `target rules the user may reach, separated by , or ;${clearable ? ' (empty or none clears)' : ''}`)
      .option('--deny <list>', `target rules the user may not reach, separated by , or ;${clearable ? ' (empty or none clears)' : ''}`);
  };
  const pickFields = (o: FieldOpts): FieldOpts => {
    const out: FieldOpts = {};
    for (const k of ['trafficLimit', 'maxConnections', 'rateLimit', 'expires', 'allow', 'deny'] as const) if (o[k] !== undefined) out[k] = o[k];
    return out;
  };
  const users = program.command('users').description('the proxy users of your account (API key with users:read / users:write)');
  users
    .command('list')
    .description('list proxy users: a table on a TTY, tab-separated on a pipe, JSON with --json')
    .addOption(new Option('--status <status>', 'filter by status').choices(['all', 'active', 'disabled']))
    .option('--prefix <text>', 'usernames starting with this', prefixOption)
    .option('--page <n>', 'page number', int('--page', 1, MAX_PAGE))
    .option('--page-size <n>', `users per page (1-${MAX_PAGE_SIZE})`, int('--page-size', 1, MAX_PAGE_SIZE))
    .option('--all', 'walk every page')
    .action(async (opts: { status?: 'all' | 'active' | 'disabled'; prefix?: string; page?: number; pageSize?: number; all?: boolean }, cmd: Command) =>
      run(cmd, async (ctx, deps) =>
        (await import('./commands/users.js')).runUsersList(
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
      run(cmd, async (ctx, deps) => (await import('./commands/users.js')).runUsersShow({ ctx, username }, deps)),
    );
  fieldOptions(
    users
      .command('create')
      .description('create a proxy user (its password made by the service and shown once, or --password-stdin), or many from --file (CSV or JSON lines, batches of 100)')
      .argument('[username]')
      .option('--password-stdin', 'read the password from stdin (first line) instead of having one made')
      .option('-f, --file <file>', 'users from a CSV file with a header (username,password,traffic_limit,max_connections,rate_limit,expires_at,allow,deny) or JSON lines; - for stdin'),
    false,
  )
    .option('--retry <n>', 'resends after server or network errors, per item', int('--retry', 0, 100), 3)
    .action(async (username: string | undefined, opts: FieldOpts & { passwordStdin?: boolean; file?: string; retry: number }, cmd: Command) =>
      run(cmd, async (ctx, deps) =>
        (await import('./commands/users.js')).runUsersCreate(
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
  fieldOptions(users.command('set').description('change a proxy user\'s limits, expiry or rules').argument('<username>'), true).action(
    async (username: string, opts: FieldOpts, cmd: Command) =>
      run(cmd, async (ctx, deps) => (await import('./commands/users.js')).runUsersSet({ ctx, username, ...pickFields(opts) }, deps)),
  );
  users
    .command('passwd')
    .description('give a proxy user a new password (made by the service and shown once, or --password-stdin); the old one stops working')
    .argument('<username>')
    .option('--password-stdin', 'read the new password from stdin (first line)')
    .action(async (username: string, opts: { passwordStdin?: boolean }, cmd: Command) =>
      run(cmd, async (ctx, deps) => (await import('./commands/users.js')).runUsersPasswd({ ctx, username, passwordStdin: opts.passwordStdin === true }, deps)),
    );
  for (const [name, status, what] of [
    ['disable', 'disabled', 'refuse a proxy user\'s new connections and close its open ones'],
    ['enable', 'active', 'let a disabled proxy user connect again'],
  ] as const) {
    users
      .command(name)
      .description(what)
      .argument('<username>')
      .action(async (username: string, _o: unknown, cmd: Command) =>
        run(cmd, async (ctx, deps) => (await import('./commands/users.js')).runUsersSet({ ctx, username, status }, deps)),
      );
  }
  users
    .command('delete')
    .description('delete a proxy user (its open connections are closed; its usage stays in the history)')
    .argument('<username>')
    .option('-y, --yes', 'no question; needed when not on a terminal')
    .action(async (username: string, opts: { yes?: boolean }, cmd: Command) =>
      run(cmd, async (ctx, deps) => (await import('./commands/users.js')).runUsersDelete({ ctx, username, yes: opts.yes === true }, deps)),
    );

  const proxies = program.command('proxies').description('proxy lists for your tools');
  proxies
    .command('export')
    .description('proxy lines for a proxy user (the gateway\'s address from the API, the password typed or piped in): a sticky session per line by default')
    .requiredOption('--user <username>', 'the proxy user')
    .option('--password-stdin', 'read the user\'s password from stdin (first line); on a terminal it is asked for')
    .addOption(new Option('--protocol <protocol>', 'http, or socks5h (the proxy resolves names)').choices(['http', 'socks5h']).default('http'))
    .option('--country <cc>', 'exits in this country (ISO 3166 alpha-2, e.g. us)')
    .option('--city <city>', 'exits in this city (e.g. nyc)')
    .option('--sticky <minutes>', 'each line a session that keeps its exit address for this many minutes (1-1440; default: the gateway\'s 10)', int('--sticky', 1, 1440))
    .option('--rotating', 'no session: each connection may leave from another address')
    .option('--count <n>', 'lines (each with its own session)', int('--count', 1, 100_000), 1)
    .addOption(new Option('--format <format>', 'url (scheme://USER:PASS@HOST:PORT), hostport (HOST:PORT:USER:PASS), hostport-at (USER:PASS@HOST:PORT) or json').choices(['url', 'hostport', 'hostport-at', 'json']))
    .option('-o, --out <file>', 'write the lines to FILE (mode 0600) instead of stdout')
    .action(
      async (
        opts: { user: string; passwordStdin?: boolean; protocol: 'http' | 'socks5h'; country?: string; city?: string; sticky?: number; rotating?: boolean; count: number; format?: 'url' | 'hostport' | 'hostport-at' | 'json'; out?: string },
        cmd: Command,
      ) =>
        run(cmd, async (ctx, deps) =>
          (await import('./commands/proxies.js')).runProxiesExport(
            {
              ctx,
              user: opts.user,
              passwordStdin: opts.passwordStdin === true,
              protocol: opts.protocol,
              rotating: opts.rotating === true,
              count: opts.count,
              ...(opts.country !== undefined ? { country: opts.country } : {}),
              ...(opts.city !== undefined ? { city: opts.city } : {}),
              ...(opts.sticky !== undefined ? { sticky: opts.sticky } : {}),
              ...(opts.format !== undefined ? { format: opts.format } : {}),
              ...(opts.out !== undefined ? { out: opts.out } : {}),
            },
            deps,
          ),
        ),
    );

  const ips = program.command('ips').description('your dedicated egress addresses (API key with users:read / users:write)');
  ips
    .command('list')
    .description('the addresses your account holds alone: country, city, since, bytes this period; replacements left')
    .action(async (_o: unknown, cmd: Command) => run(cmd, async (ctx, deps) => (await import('./commands/ips.js')).runIpsList({ ctx }, deps)));
  ips
    .command('replace')
    .description('swap one of your addresses for a free one (a monthly allowance); connections open from it end')
    .argument('<address>')
    .option('-y, --yes', 'no question; needed when not on a terminal')
    .action(async (address: string, opts: { yes?: boolean }, cmd: Command) =>
      run(cmd, async (ctx, deps) => (await import('./commands/ips.js')).runIpsReplace({ ctx, address, yes: opts.yes === true }, deps)),
    );

  program
    .command('usage')
    .description('usage of your account: by proxy user (default), day, hour, target domain or dedicated egress address; a table in binary units, JSON with --json, CSV with --csv')
    .addOption(new Option('--by <what>', 'rows per user, day, hour, domain or ip (dedicated egress address)').choices(['user', 'day', 'hour', 'domain', 'ip']).default('user'))
    .option('--from <iso>', 'start: ISO 8601 date or date-time with a zone (for --by domain a day, YYYY-MM-DD); default: the start of the current period')
    .option('--to <iso>', 'end (exclusive; for --by domain the last day, inclusive); default: now')
    .option('--user <user>', 'one proxy user (or ip:A.B.C.D for whitelist traffic), with --by day, hour or domain')
    .option('--limit <n>', `domains by name with --by domain (1-${MAX_DOMAINS_LIMIT}; the rest as (other))`, int('--limit', 1, MAX_DOMAINS_LIMIT))
    .option('--csv', 'CSV with a header line and raw byte counts')
    .action(async (opts: { by: 'user' | 'day' | 'hour' | 'domain' | 'ip'; from?: string; to?: string; user?: string; limit?: number; csv?: boolean }, cmd: Command) =>
      run(cmd, async (ctx, deps) =>
        (await import('./commands/usage.js')).runUsage(
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

  program
    .command('completion')
    .description('print a shell completion script (generated from the commands themselves)')
    .addArgument(new Argument('<shell>', 'bash, zsh or fish').choices(['bash', 'zsh', 'fish']))
    .addHelpText('after', '\nInstall: bash: source <(proxyctl completion bash)   zsh: source <(proxyctl completion zsh)   fish: proxyctl completion fish | source')
    .action(async (shell: 'bash' | 'zsh' | 'fish', _o: unknown, cmd: Command) =>
      run(cmd, async (_ctx, deps) => {
        const { completionScript } = await import('./completion.js');
        deps.io.stdout.write(completionScript(shell, cmd.parent!));
        return Exit.OK;
      }),
    );

  program
    .command('check')
    .description('staged connectivity check through a proxy: dns, tcp, auth, connect, tls, status, then the egress IP compared with a direct request')
    .requiredOption('--proxy <url>', 'proxy URL: http://[user:pass@]host:port, socks5h://… (proxy resolves the target) or socks5://… (resolved here); without credentials the source-IP whitelist is tested')
    .option('--target <url>', 'http(s) URL that echoes the caller\'s IP (JSON {"ip":…} or plain text); default: config "check.target", else https://api.ipify.org/?format=json')
    .option('--timeout <ms>', 'timeout of each stage in milliseconds', int('--timeout', 1, 600_000), 5000)
    .option('--ca <file>', 'PEM file with extra CA certificate(s) trusted for the target')
    .option('--direct', 'also fetch the target directly and compare egress IPs (the default)')
    .option('--no-direct', 'skip the direct request and the egress comparison')
    .option('--repeat <n>', 'run the check N times: per-stage p50/p95/max and failures by stage (exit 6 if any run failed)', int('--repeat', 1, 10_000))
    .option('--interval <ms>', 'pause between repeated runs in milliseconds (default 1000)', int('--interval', 0, 3_600_000))
    .option('--report <file>', 'also write a redacted Markdown report for a support ticket')
    .addHelpText(
      'after',
      [
        '',
        'Exit status: 0 every stage passed (also when the egress equals the direct IP: a warning), 6 a stage failed (any run with --repeat), 2 usage error.',
        'Self-hosters: point --target at proxyd\'s own echo, e.g. --target http://<api-listen>/ip (returns {"ip":"<caller IPv4>"}).',
      ].join('\n'),
    )
    .action(
      async (
        opts: { proxy: string; target?: string; timeout: number; ca?: string; direct?: boolean; repeat?: number; interval?: number; report?: string },
        cmd: Command,
      ) =>
        run(cmd, async (ctx, deps) =>
          (await import('./commands/check.js')).runCheck(
            {
              ctx,
              proxy: opts.proxy,
              timeoutMs: opts.timeout,
              direct: opts.direct !== false,
              ...(opts.target !== undefined ? { target: opts.target } : {}),
              ...(opts.ca !== undefined ? { caFile: opts.ca } : {}),
              ...(opts.repeat !== undefined ? { repeat: opts.repeat } : {}),
              ...(opts.interval !== undefined ? { intervalMs: opts.interval } : {}),
              ...(opts.report !== undefined ? { report: opts.report } : {}),
            },
            deps,
          ),
        ),
    );
  return program;
}

export async function main(argv: string[], overrides: MainOverrides = {}): Promise<number> {
  const env = overrides.env ?? process.env;
  enableCompileCache(env);
  const commander = await import('commander');
  const io = overrides.io ?? (await import('./io.js')).processIo();
  const stdoutFailed = overrides.io ? () => false : watchStdout(io);
  // Set by our commands and by errors.
  let exitCode: number | undefined;
  const run = async (cmd: Command, runner: Runner) => {
    const { resolveContext } = await import('./context.js');
    const ctx = resolveContext(cmd.optsWithGlobals(), env, io);
    const deps = overrides.deps ? await overrides.deps(ctx) : await (await import('./deps.js')).createDeps(ctx, io, env);
    exitCode = await runner(ctx, deps);
  };
  const program = buildProgram(commander, run, io);
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    exitCode = await exitCodeFor(err, io, env, commander.CommanderError);
  }
  return stdoutFailed() && !exitCode ? Exit.ERROR : (exitCode ?? Exit.OK);
}

/**
 * The process's stdout failing. A reader that stopped early (`| head`) closed the pipe: the rest of the output is not
 * wanted and the command goes on as it would. Any other failure (a full disk) left the output incomplete: one error
 * line, and the run never ends 0. Whether it failed so.
 */
function watchStdout(io: Pick<Io, 'stderr'>): () => boolean {
  let failed = false;
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE' || failed) return;
    failed = true;
    io.stderr.write(`error: cannot write the output: ${err.code ?? err.message}\n`);
    // The error may come after main() returned its code.
    if (!process.exitCode) process.exitCode = Exit.ERROR;
  });
  return () => failed;
}

async function exitCodeFor(err: unknown, io: Pick<Io, 'stderr'>, env: NodeJS.ProcessEnv, CommanderError: Commander['CommanderError']): Promise<number> {
  if (err instanceof CommanderError) {
    if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') return Exit.OK;
    // Commander already printed the message.
    return Exit.USAGE;
  }
  const { CliError, scrubSecrets } = await import('./errors.js');
  const { printable } = await import('./output.js');
  const secrets = [env.PROXYCTL_API_KEY];
  // One line, whatever a server's message in it holds.
  if (err instanceof CliError) {
    io.stderr.write(`error: ${printable(scrubSecrets(err.message, secrets))}\n`);
    return err.exitCode;
  }
  io.stderr.write(`error: unexpected: ${printable(scrubSecrets(String((err as Error)?.message ?? err), secrets))}\n`);
  return Exit.ERROR;
}
