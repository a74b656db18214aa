// `proxyctl config get|set|unset KEY [VALUE]`, stored through `conf`.
import {
  configFile,
  isConfigKey,
  normalizeConfigKey,
  openConfStore,
  CONFIG_KEYS,
  type ConfigKey,
} from '../config-store.js';
import { normalizeBaseUrl, type Context } from '../context.js';
import type { Deps } from '../deps.js';
import { UsageError } from '../errors.js';
import { Exit, type ExitCode } from '../exit-codes.js';

interface ConfigOptions {
  ctx: Context;
  action: 'get' | 'set' | 'unset';
  key?: string;
  value?: string;
}

function checkKey(raw: string): ConfigKey {
  const k = normalizeConfigKey(raw);
  if (!isConfigKey(k))
    throw new UsageError(`unknown config key ${JSON.stringify(raw)} (known: ${CONFIG_KEYS.join(', ')})`);
  return k;
}

function validateConfigValue(key: ConfigKey, value: string): string {
  if (key === 'base_url') return normalizeBaseUrl(value);
  if (key === 'check.target') {
    let u: URL | undefined;
    try {
      u = new URL(value);
    } catch {
      u = undefined;
    }
    if (!u || (u.protocol !== 'http:' && u.protocol !== 'https:'))
      throw new UsageError('check.target must be an http:// or https:// URL');
    return value;
  }
  if (value !== 'table' && value !== 'json') throw new UsageError('output must be "table" or "json"');
  return value;
}

export async function runConfig(opts: ConfigOptions, deps: Deps): Promise<ExitCode> {
  const { ctx } = opts;
  const { out } = deps;
  const store = await openConfStore(ctx.configDir);
  if (opts.action === 'get') {
    if (opts.key === undefined) {
      const all = store.all();
      if (ctx.json) out.writeJson(all);
      else for (const k of CONFIG_KEYS) out.line(`${k}=${all[k] ?? ''}`);
      return Exit.OK;
    }
    const key = checkKey(opts.key);
    const v = store.get(key);
    if (ctx.json) out.writeJson({ key, value: v ?? null });
    else if (v !== undefined) out.line(v);
    return Exit.OK;
  }
  if (opts.key === undefined) throw new UsageError(`config ${opts.action} needs a KEY`);
  const key = checkKey(opts.key);
  if (opts.action === 'set') {
    if (opts.value === undefined) throw new UsageError('config set needs a VALUE');
    const value = validateConfigValue(key, opts.value);
    store.set(key, value);
    if (ctx.json) out.writeJson({ key, value });
    else out.info(`${key} = ${value} (${configFile(ctx.configDir)})`);
    return Exit.OK;
  }
  store.delete(key);
  if (ctx.json) out.writeJson({ key, value: null });
  return Exit.OK;
}
