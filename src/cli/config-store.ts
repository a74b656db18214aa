// proxyctl's config: written through `conf`, read on the hot path straight from the same JSON file
// (`conf` pulls in ajv and costs ~70 ms of start-up; every API command needs the base URL).
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** `check.target` belongs to `proxyctl check` (its default --target); stored as a flat key. */
export const CONFIG_KEYS = ['base_url', 'output', 'check.target'] as const;
export type ConfigKey = (typeof CONFIG_KEYS)[number];
type OutputFormat = 'table' | 'json';

export interface CliConfig {
  base_url?: string;
  output?: OutputFormat;
  'check.target'?: string;
}

/** Where config and the fallback token file live: `$XDG_CONFIG_HOME/proxyctl` on Linux (as `conf` would with projectSuffix ''). */
export function configDir(
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
  home = os.homedir(),
): string {
  if (env.PROXYCTL_CONFIG_DIR) return env.PROXYCTL_CONFIG_DIR;
  if (platform === 'darwin') return path.join(home, 'Library', 'Preferences', 'proxyctl');
  if (platform === 'win32')
    return path.join(env.APPDATA || path.join(home, 'AppData', 'Roaming'), 'proxyctl', 'Config');
  return path.join(env.XDG_CONFIG_HOME || path.join(home, '.config'), 'proxyctl');
}

export function configFile(dir: string): string {
  return path.join(dir, 'config.json');
}

/**
 * Reads the config file without `conf`; a missing file is an empty config, and so is one that cannot be read or
 * parsed, which `onInvalid` is told about (its base URL or output format would otherwise vanish without a word).
 */
export function readConfig(dir: string, onInvalid?: (message: string) => void): CliConfig {
  const file = configFile(dir);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT')
      onInvalid?.(
        `${file} ${code ? `cannot be read (${code})` : 'is not valid JSON'}; its settings are ignored (fix it, or delete it and use \`proxyctl config set\`)`,
      );
    return {};
  }
  const out: CliConfig = {};
  if (raw && typeof raw === 'object') {
    const r = raw as Record<string, unknown>;
    if (typeof r.base_url === 'string') out.base_url = r.base_url;
    if (r.output === 'table' || r.output === 'json') out.output = r.output;
    if (typeof r['check.target'] === 'string' && r['check.target']) out['check.target'] = r['check.target'];
  }
  return out;
}

export function isConfigKey(k: string): k is ConfigKey {
  return (CONFIG_KEYS as readonly string[]).includes(k);
}

/** Accepts `base-url` as well as `base_url`. */
export function normalizeConfigKey(k: string): string {
  return k.replace(/-/g, '_');
}

interface ConfigWriter {
  get(key: ConfigKey): string | undefined;
  set(key: ConfigKey, value: string): void;
  delete(key: ConfigKey): void;
  all(): CliConfig;
  readonly path: string;
}

/** A `conf` store rooted at the config dir (loaded only by `proxyctl config`). */
export async function openConfStore(dir: string): Promise<ConfigWriter> {
  const { default: Conf } = await import('conf');
  const store = new Conf<CliConfig>({
    cwd: dir,
    configName: 'config',
    projectName: 'proxyctl',
    accessPropertiesByDotNotation: false,
    clearInvalidConfig: false,
    schema: {
      base_url: { type: 'string' },
      output: { type: 'string', enum: ['table', 'json'] },
      'check.target': { type: 'string' },
    },
  });
  return {
    get: (key) => store.get(key),
    set: (key, value) => store.set(key, value as never),
    delete: (key) => store.delete(key),
    all: () => ({ ...store.store }),
    path: store.path,
  };
}
