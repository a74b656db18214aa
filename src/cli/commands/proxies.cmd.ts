// `proxyctl proxies export`: its arguments, flags and help, and the actions that call its run functions in proxies.ts
// (imported only when a command runs: main.ts builds the whole tree on every invocation, so this file stays light).
import type { Command } from 'commander';
import type { Kit } from './kit.js';

export function registerProxies(program: Command, kit: Kit): void {
  const { run, int } = kit;
  const { Option } = kit.commander;
  const proxies = program.command('proxies').description('proxy lists for your tools');
  proxies
    .command('export')
    .description(
      "proxy lines for a proxy user (the gateway's address from the API, the password typed or piped in): a sticky session per line by default",
    )
    .requiredOption('--user <username>', 'the proxy user')
    .option('--password-stdin', "read the user's password from stdin (first line); on a terminal it is asked for")
    .addOption(
      new Option('--protocol <protocol>', 'http, or socks5h (the proxy resolves names)')
        .choices(['http', 'socks5h'])
        .default('http'),
    )
    .option('--country <cc>', 'exits in this country (ISO 3166 alpha-2, e.g. us)')
    .option('--city <city>', 'exits in this city (e.g. nyc)')
    .option(
      '--sticky <minutes>',
      "each line a session that keeps its exit address for this many minutes (1-1440; default: the gateway's 10)",
      int('--sticky', 1, 1440),
    )
    .option('--rotating', 'no session: each connection may leave from another address')
    .option('--count <n>', 'lines (each with its own session)', int('--count', 1, 100_000), 1)
    .addOption(
      new Option(
        '--format <format>',
        'url (scheme://USER:PASS@HOST:PORT), hostport (HOST:PORT:USER:PASS), hostport-at (USER:PASS@HOST:PORT) or json',
      ).choices(['url', 'hostport', 'hostport-at', 'json']),
    )
    .option('-o, --out <file>', 'write the lines to FILE (mode 0600) instead of stdout')
    .action(
      async (
        opts: {
          user: string;
          passwordStdin?: boolean;
          protocol: 'http' | 'socks5h';
          country?: string;
          city?: string;
          sticky?: number;
          rotating?: boolean;
          count: number;
          format?: 'url' | 'hostport' | 'hostport-at' | 'json';
          out?: string;
        },
        cmd: Command,
      ) =>
        run(cmd, async (ctx, deps) =>
          (await import('./proxies.js')).runProxiesExport(
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
}
