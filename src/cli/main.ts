// proxyctl entry point: commander parses; each command is defined in commands/<name>.cmd.ts beside its run function
// (commands/<name>.ts), whose module is imported only when the command runs. This file assembles the tree.
import module from 'node:module';
import os from 'node:os';
import path from 'node:path';
import type { Command } from 'commander';
import type { Context } from './context.js';
import type { Deps } from './deps.js';
import { Exit } from './exit-codes.js';
import type { Io } from './io.js';
import { scrubSecrets } from './errors.js';
import { VERSION } from '../contract/version.js';
import { optionParsers, type Commander, type Kit, type Runner } from './commands/kit.js';
import { registerLogin } from './commands/login.cmd.js';
import { registerLogout } from './commands/logout.cmd.js';
import { registerAuth } from './commands/auth-status.cmd.js';
import { registerConfig } from './commands/config.cmd.js';
import { registerWhitelist } from './commands/whitelist.cmd.js';
import { registerKey } from './commands/key.cmd.js';
import { registerUsers } from './commands/users.cmd.js';
import { registerProxies } from './commands/proxies.cmd.js';
import { registerIps } from './commands/ips.cmd.js';
import { registerUsage } from './commands/usage.cmd.js';
import { registerCompletion } from './commands/completion.cmd.js';
import { registerCheck } from './commands/check.cmd.js';

interface MainOverrides {
  io?: Io;
  env?: NodeJS.ProcessEnv;
  /** Replaces the real dependencies (tests). */
  deps?: (ctx: Context) => Promise<Deps>;
}

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

export function buildProgram(
  commander: Commander,
  run: (cmd: Command, runner: Runner) => Promise<void>,
  io: Pick<Io, 'stdout' | 'stderr'>,
): Command {
  const { Command } = commander;
  const program = new Command('proxyctl');
  program
    .description(
      'Manage your proxy account: its source-IP whitelist, proxy users, proxy lists and usage; check connectivity',
    )
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
            (or the key lacks the scope), 5 rate limited and out of retries, 6 connectivity check failed,
            130 stopped by Ctrl-C with work not done.

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

  const kit: Kit = { commander, run, ...optionParsers(commander.InvalidArgumentError) };
  registerLogin(program, kit);
  registerLogout(program, kit);
  registerAuth(program, kit);
  registerConfig(program, kit);
  registerWhitelist(program, kit);
  registerKey(program, kit);
  registerUsers(program, kit);
  registerProxies(program, kit);
  registerIps(program, kit);
  registerUsage(program, kit);
  registerCompletion(program, kit);
  registerCheck(program, kit);
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
    const deps = overrides.deps
      ? await overrides.deps(ctx)
      : await (await import('./deps.js')).createDeps(ctx, io, env);
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

async function exitCodeFor(
  err: unknown,
  io: Pick<Io, 'stderr'>,
  env: NodeJS.ProcessEnv,
  CommanderError: Commander['CommanderError'],
): Promise<number> {
  if (err instanceof CommanderError) {
    if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') return Exit.OK;
    // Commander already printed the message.
    return Exit.USAGE;
  }
  const { CliError, scrubSecrets } = await import('./errors.js');
  const { terminalSafe } = await import('./output.js');
  const secrets = [env.PROXYCTL_API_KEY];
  // One line, whatever a server's message in it holds.
  if (err instanceof CliError) {
    io.stderr.write(`error: ${terminalSafe(scrubSecrets(err.message, secrets))}\n`);
    return err.exitCode;
  }
  io.stderr.write(
    `error: unexpected: ${terminalSafe(scrubSecrets(String((err as Error)?.message ?? err), secrets))}\n`,
  );
  return Exit.ERROR;
}
