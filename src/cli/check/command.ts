// `proxyctl check`: commander wiring only; the runner is imported lazily to keep start-up fast.
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { Exit } from '../exit-codes.js';

export const CHECK_TARGET_CONFIG_KEY = 'check.target';

export interface CheckCommandOptions {
  proxy: string;
  target?: string;
  timeout: string;
  ca?: string;
  direct: boolean;
}

/** The proxyctl config file, read directly (as context.ts does); missing or unreadable: empty. */
async function readRawConfig(env: NodeJS.ProcessEnv): Promise<Record<string, unknown>> {
  try {
    const { configDir, configFile } = await import('../config-store.js');
    const raw: unknown = JSON.parse(readFileSync(configFile(configDir(env)), 'utf8'));
    return raw && typeof raw === 'object' ? (raw as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

function outputFlags(globals: Record<string, unknown>, config: Record<string, unknown>, env: NodeJS.ProcessEnv, stdout: NodeJS.WriteStream) {
  const noColorEnv = env.NO_COLOR !== undefined && env.NO_COLOR !== '';
  return {
    json: globals.json === true || (globals.json === undefined && config.output === 'json'),
    quiet: globals.quiet === true,
    color: globals.color !== false && !noColorEnv && stdout.isTTY === true,
    columns: stdout.isTTY ? stdout.columns : undefined,
  };
}

export function registerCheck(program: Command): void {
  program
    .command('check')
    .description('staged connectivity check through a proxy: dns, tcp, auth, connect, tls, status, then the egress IP compared with a direct request')
    .requiredOption('--proxy <url>', 'proxy URL: http://[user:pass@]host:port, socks5h://… (proxy resolves the target) or socks5://… (resolved here); without credentials the source-IP whitelist is tested')
    .option('--target <url>', `http(s) URL that echoes the caller's IP (JSON {"ip":…} or plain text); default: config "${CHECK_TARGET_CONFIG_KEY}", else https://api.ipify.org/?format=json`)
    .option('--timeout <ms>', 'timeout of each stage in milliseconds', '5000')
    .option('--ca <file>', 'PEM file with extra CA certificate(s) trusted for the target')
    .option('--direct', 'also fetch the target directly and compare egress IPs (the default)')
    .option('--no-direct', 'skip the direct request and the egress comparison')
    .addHelpText(
      'after',
      [
        '',
        'Exit status: 0 every stage passed (also when the egress equals the direct IP: a warning), 6 a stage failed, 2 usage error.',
        'Self-hosters: point --target at proxyd\'s own echo, e.g. --target http://<api-listen>/ip (returns {"ip":"<caller IPv4>"}).',
      ].join('\n'),
    )
    .action(async (opts: CheckCommandOptions, cmd: Command) => {
      const env = process.env;
      const globals = cmd.optsWithGlobals() as Record<string, unknown>;
      const config = await readRawConfig(env);
      const output = outputFlags(globals, config, env, process.stdout);
      const timeoutMs = Number(opts.timeout);
      if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 600_000) {
        process.stderr.write(`proxyctl check: --timeout must be an integer number of milliseconds (1..600000), got "${opts.timeout}"\n`);
        process.exitCode = Exit.USAGE;
        return;
      }
      let ca: string | undefined;
      if (opts.ca) {
        try {
          ca = readFileSync(opts.ca, 'utf8');
        } catch (err) {
          process.stderr.write(`proxyctl check: cannot read --ca ${opts.ca}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}\n`);
          process.exitCode = Exit.USAGE;
          return;
        }
        if (!ca.includes('-----BEGIN CERTIFICATE-----')) {
          process.stderr.write(`proxyctl check: --ca ${opts.ca} holds no PEM certificate\n`);
          process.exitCode = Exit.USAGE;
          return;
        }
      }
      const { runCheck, DEFAULT_TARGET } = await import('./runner.js');
      const configured = config[CHECK_TARGET_CONFIG_KEY];
      const target = opts.target ?? (typeof configured === 'string' && configured ? configured : DEFAULT_TARGET);
      try {
        process.exitCode = await runCheck({ proxy: opts.proxy, target, timeoutMs, ca, direct: opts.direct !== false, output });
      } catch (err) {
        // Not expected; handled here so the message is scrubbed of the proxy password.
        const { parseProxyUrl, scrub } = await import('./urls.js');
        let password: string | null = null;
        try {
          password = parseProxyUrl(opts.proxy).password;
        } catch {
          /* the URL was the problem; redactUrl still applies */
        }
        process.stderr.write(`proxyctl check: unexpected error: ${scrub(String((err as Error)?.message ?? err), password)}\n`);
        process.exitCode = Exit.ERROR;
      }
    });
}
