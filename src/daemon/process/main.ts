// `proxyd` entry: commander parses; each command is defined in a <name>.cmd.ts beside the module that runs it
// (process/ for serve and health, admin/ for `proxyd admin …`), which loads only when the command runs. This file
// assembles the tree.
import { Command, CommanderError } from 'commander';
import { VERSION } from '../../contract/version.js';
import { dataDirOption, databaseUrlOption, fail } from './command-kit.js';
import { registerServe } from './serve.cmd.js';
import { registerHealth } from './health.cmd.js';
import { registerAccount } from '../admin/account.cmd.js';
import { registerAudit } from '../admin/audit.cmd.js';
import { registerToken } from '../admin/token.cmd.js';
import { registerKey } from '../admin/keys.cmd.js';
import { registerWebhook } from '../admin/webhook.cmd.js';
import { registerPlan } from '../admin/plans.cmd.js';
import { registerPolicy } from '../admin/policy.cmd.js';
import { registerProxyUser } from '../admin/proxy-user.cmd.js';
import { registerWhitelist } from '../admin/whitelist.cmd.js';
import { registerUsage } from '../admin/usage.cmd.js';
import { registerConnections } from '../admin/connections.cmd.js';
import { registerExits } from '../admin/exits.cmd.js';
import { registerIp } from '../admin/ips.cmd.js';
import { registerFleet } from '../admin/fleet.cmd.js';

export function buildProgram(): Command {
  const program = new Command('proxyd')
    .description('proxyd: whitelist API, proxy gateway (HTTP, CONNECT, SOCKS5) and web console')
    .version(VERSION)
    .showHelpAfterError('(run with --help for usage)');

  registerServe(program);
  registerHealth(program);

  const admin = program
    .command('admin')
    .description('operator commands on the database (work while daemons run)')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption());
  registerAccount(admin);
  registerAudit(admin);
  registerToken(admin);
  registerKey(admin);
  registerWebhook(admin);
  registerPlan(admin);
  registerPolicy(admin);
  registerProxyUser(admin);
  registerWhitelist(admin);
  registerUsage(admin);
  registerConnections(admin);
  registerExits(admin);
  registerIp(admin);
  registerFleet(admin);

  return program;
}

export async function main(argv: string[]): Promise<void> {
  const program = buildProgram();
  // Commander's own refusals (an unknown option, a value outside its choices) start `proxyd:` like every other
  // error of proxyd's (docs/admin.md), not commander's `error:`. Set on every command: the tree is built already.
  const output = {
    writeErr: (s: string) => process.stderr.write(s),
    writeOut: (s: string) => process.stdout.write(s),
    outputError: (s: string, write: (s: string) => void) => write(s.replace(/^error: /, 'proxyd: ')),
  };
  const prepare = (c: Command) => c.exitOverride().configureOutput(output);
  prepare(program);
  for (const c of program.commands) {
    prepare(c);
    for (const cc of c.commands) {
      prepare(cc);
      for (const ccc of cc.commands) prepare(ccc);
    }
  }
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (e) {
    if (e instanceof CommanderError) {
      // help and version exit 0; anything else commander rejects is a usage error.
      process.exitCode = e.exitCode === 0 ? 0 : 2;
      return;
    }
    fail((e as Error).message);
  }
}
