// `proxyd admin usage`: its flags and help, and the action that calls usage.ts (imported only when the command runs:
// main.ts builds the whole tree on every invocation, so this file stays light).
import { Option, type Command } from 'commander';
import { dataDirOption, databaseUrlOption, withStore } from '../process/command-kit.js';

/** `admin usage`: the report in its format on stdout. */
const usageAction = withStore(
  async (store, all) => {
    const { adminUsage, renderUsage } = await import('./usage.js');
    process.stdout.write(renderUsage(await adminUsage(store, all as import('./usage.js').UsageOptions), all.format));
  },
  { read: true },
);

export function registerUsage(admin: Command): void {
  admin
    .command('usage')
    .description('metered usage of an account (docs/admin.md): by proxy user, or by minute, hour or day')
    .requiredOption('--email <email>')
    .addOption(new Option('--by <what>').choices(['user', 'minute', 'hour', 'day']).default('user'))
    .option('--from <iso>', 'start (default: 1 h, 24 h or 30 days before --to, by minute, hour or day/user)')
    .option('--to <iso>', 'end, exclusive (default: now)')
    .addOption(new Option('--format <format>').choices(['json', 'csv', 'table']).default('json'))
    .addOption(
      new Option(
        '--usage-retention <spec>',
        "the daemons' --usage-retention, when not the default (which buckets --by user can still read)",
      ).env('PROXYD_USAGE_RETENTION'),
    )
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(usageAction);
}
