// `proxyctl whitelist list|add|delete|sync`: its arguments, flags and help, and the actions that call its run functions
// in whitelist-list.ts, whitelist-batch.ts and whitelist-sync.ts (imported only when a command runs: main.ts builds the
// whole tree on every invocation, so this file stays light).
import type { Command } from 'commander';
import { MAX_PAGE, MAX_PAGE_SIZE } from '../../contract/paths.js';
import type { Kit } from './kit.js';

/** `--file` given more than once: every one, in order (commander keeps only the last by default). */
const eachFile = (file: string, before: string[] = []): string[] => [...before, file];

export function registerWhitelist(program: Command, kit: Kit): void {
  const { run, int, ipOption } = kit;
  const { Option } = kit.commander;
  const wl = program.command('whitelist').description('list, add and delete whitelisted source IPs');
  wl.command('list')
    .description('list entries: a table on a TTY, tab-separated on a pipe, JSON with --json')
    .addOption(new Option('--status <status>', 'filter by status').choices(['all', 'active', 'disabled']))
    .option('--ip <ip>', 'exact IP match', ipOption)
    .option('--page <n>', 'page number', int('--page', 1, MAX_PAGE))
    .option('--page-size <n>', `entries per page (1-${MAX_PAGE_SIZE})`, int('--page-size', 1, MAX_PAGE_SIZE))
    .option('--all', 'walk every page')
    .action(
      async (
        opts: { status?: 'all' | 'active' | 'disabled'; ip?: string; page?: number; pageSize?: number; all?: boolean },
        cmd: Command,
      ) =>
        run(cmd, async (ctx, deps) => {
          const { runList } = await import('./whitelist-list.js');
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
      .argument(
        op === 'add' ? '[ip=remark...]' : '[ip...]',
        op === 'add' ? 'IP or IP=REMARK; - reads stdin' : 'IP; - reads stdin',
      )
      .option(
        '-f, --file <file>',
        'read IPs from FILE, one per line (# comments); - for stdin; repeat for more files',
        eachFile,
      );
    if (op === 'add') {
      c.option('--remark <remark>', 'remark for IPs given without =REMARK')
        .option('--current', "also add this machine's public IPv4, as an echo sees it")
        .option(
          '--echo <url>',
          'with --current: the IP echo to ask (JSON {"ip":…} or plain text; default: the API\'s /ip)',
        );
    }
    c.option('--retry <n>', 'resends after server or network errors, per item', int('--retry', 0, 100), 3)
      .option('--failed-out <file>', 'write the IPs that still failed, one per line (ready for --file)')
      .action(
        async (
          args: string[],
          opts: {
            file?: string[];
            remark?: string;
            retry: number;
            failedOut?: string;
            current?: boolean;
            echo?: string;
          },
          cmd: Command,
        ) =>
          run(cmd, async (ctx, deps) => {
            if (opts.echo !== undefined && !opts.current)
              throw new (await import('../errors.js')).UsageError('--echo goes with --current');
            const { runBatchCommand } = await import('./whitelist-batch.js');
            return runBatchCommand(
              {
                ctx,
                op,
                args,
                retry: opts.retry,
                ...(opts.file !== undefined ? { files: opts.file } : {}),
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
    .description(
      'make the whitelist equal to a file (IP[=REMARK] per line): shows the plan, then deletes what is not listed and adds what is missing',
    )
    .requiredOption(
      '-f, --file <file>',
      'the whole whitelist, one IP[=REMARK] per line (# comments); - for stdin; repeat to join several files',
      eachFile,
    )
    .option('--dry-run', 'print the plan only; change nothing')
    .option('-y, --yes', 'no question; needed for deletes when not on a terminal')
    .option('--update-remarks', 'apply changed remarks (as delete + add); without it such entries count as unchanged')
    .option('--retry <n>', 'resends after server or network errors, per item', int('--retry', 0, 100), 3)
    .action(
      async (
        opts: { file: string[]; dryRun?: boolean; yes?: boolean; updateRemarks?: boolean; retry: number },
        cmd: Command,
      ) =>
        run(cmd, async (ctx, deps) =>
          (await import('./whitelist-sync.js')).runSync(
            {
              ctx,
              files: opts.file,
              dryRun: opts.dryRun === true,
              yes: opts.yes === true,
              updateRemarks: opts.updateRemarks === true,
              retry: opts.retry,
            },
            deps,
          ),
        ),
    );
}
