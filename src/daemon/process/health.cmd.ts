// `proxyd health`: its flags and help, and the action that calls health-probe.ts (imported only when the command runs:
// main.ts builds the whole tree on every invocation, so this file stays light).
import type { Command } from 'commander';
import { apiListenOption } from './command-kit.js';

export function registerHealth(program: Command): void {
  program
    .command('health')
    .description(
      'ask the daemon on --api-listen for GET /healthz: exit 0 when it answers 200, else 1 (a 0.0.0.0 or :: address is asked on loopback)',
    )
    .addOption(apiListenOption())
    .option('--timeout <seconds>', 'how long one request may take', '5')
    .option('--wait <seconds>', "keep asking until it answers 200, for at most this long (a unit's start-up)", '0')
    .action(async (opts) => {
      const { runHealth } = await import('./health-probe.js');
      process.exitCode = await runHealth(opts, {
        stdout: (s) => void process.stdout.write(s),
        stderr: (s) => void process.stderr.write(s),
      });
    });
}
