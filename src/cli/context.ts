// Global options (docs/cli.md Global options): base URL, --json, --no-color/NO_COLOR, --quiet; shared with `proxyctl check`.
import { configDir, readConfig, type CliConfig } from './config-store.js';
import { UsageError } from './errors.js';
import { terminalSafe } from './output.js';

const DEFAULT_BASE_URL = 'http://127.0.0.1:8080';

export interface GlobalOptions {
  baseUrl?: string;
  json?: boolean;
  color?: boolean;
  quiet?: boolean;
}

type BaseUrlSource = 'flag' | 'env' | 'config' | 'default';

export interface Context {
  baseUrl: string;
  baseUrlSource: BaseUrlSource;
  json: boolean;
  /** Colour on stdout/stderr: off with --no-color, NO_COLOR, or when stdout is not a TTY. */
  color: boolean;
  quiet: boolean;
  configDir: string;
  /** Config key `check.target`: the default target of `proxyctl check`. */
  checkTarget: string | undefined;
}

/** Validates and canonicalises a base URL: http(s), no credentials, query or fragment, no trailing slash. */
export function normalizeBaseUrl(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw.trim());
  } catch {
    throw new UsageError(`invalid base URL: ${JSON.stringify(raw)}`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw new UsageError(`base URL must be http:// or https://: ${JSON.stringify(raw)}`);
  if (u.username || u.password) throw new UsageError('base URL must not contain credentials');
  if (u.search || u.hash) throw new UsageError('base URL must not contain a query or fragment');
  return `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, '')}`;
}

function colorEnabled(opts: { color?: boolean }, env: NodeJS.ProcessEnv, isTTY: boolean): boolean {
  if (opts.color === false) return false;
  // https://no-color.org: present and non-empty disables colour.
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  return isTTY;
}

export function resolveContext(
  g: GlobalOptions,
  env: NodeJS.ProcessEnv,
  io: { stdoutIsTTY: boolean; stderr?: { write(chunk: string): unknown } },
  config?: CliConfig,
  dir: string = configDir(env),
): Context {
  const cfg =
    config ?? readConfig(dir, io.stderr ? (m) => void io.stderr!.write(`warning: ${terminalSafe(m)}\n`) : undefined);
  let baseUrl = DEFAULT_BASE_URL;
  let baseUrlSource: BaseUrlSource = 'default';
  if (g.baseUrl !== undefined) {
    baseUrl = g.baseUrl;
    baseUrlSource = 'flag';
  } else if (env.PROXYCTL_BASE_URL) {
    baseUrl = env.PROXYCTL_BASE_URL;
    baseUrlSource = 'env';
  } else if (cfg.base_url) {
    baseUrl = cfg.base_url;
    baseUrlSource = 'config';
  }
  return {
    baseUrl: normalizeBaseUrl(baseUrl),
    baseUrlSource,
    json: g.json === true || (g.json === undefined && cfg.output === 'json'),
    color: colorEnabled(g, env, io.stdoutIsTTY),
    quiet: g.quiet === true,
    configDir: dir,
    checkTarget: cfg['check.target'],
  };
}
