// `proxyctl check`: its arguments, flags and help, and the actions that call its run functions in check.ts and check/
// (imported only when a command runs: main.ts builds the whole tree on every invocation, so this file stays light).
import type { Command } from 'commander';
import type { Kit } from './kit.js';

export function registerCheck(program: Command, kit: Kit): void {
  const { run, int } = kit;
  program
    .command('check')
    .description(
      'staged connectivity check through a proxy: dns, tcp, auth, connect, tls, status, then the egress IP compared with a direct request',
    )
    .requiredOption(
      '--proxy <url>',
      'proxy URL: http://[user:pass@]host:port, socks5h://… (proxy resolves the target) or socks5://… (resolved here); without credentials the source-IP whitelist is tested',
    )
    .option(
      '--target <url>',
      'http(s) URL that echoes the caller\'s IP (JSON {"ip":…} or plain text); default: config "check.target", else https://api.ipify.org/?format=json',
    )
    .option('--timeout <ms>', 'timeout of each stage in milliseconds', int('--timeout', 1, 600_000), 5000)
    .option('--ca <file>', 'PEM file with extra CA certificate(s) trusted for the target')
    .option('--direct', 'also fetch the target directly and compare egress IPs (the default)')
    .option('--no-direct', 'skip the direct request and the egress comparison')
    .option(
      '--repeat <n>',
      'run the check N times: per-stage p50/p95/max and failures by stage (exit 6 if any run failed)',
      int('--repeat', 1, 10_000),
    )
    .option(
      '--interval <ms>',
      'pause between repeated runs in milliseconds (default 1000)',
      int('--interval', 0, 3_600_000),
    )
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
        opts: {
          proxy: string;
          target?: string;
          timeout: number;
          ca?: string;
          direct?: boolean;
          repeat?: number;
          interval?: number;
          report?: string;
        },
        cmd: Command,
      ) =>
        run(cmd, async (ctx, deps) =>
          (await import('./check.js')).runCheck(
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
}
