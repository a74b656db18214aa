// `proxyctl config get|set|unset`: its arguments, flags and help, and the actions that call its run functions in
// config.ts (imported only when a command runs: main.ts builds the whole tree on every invocation, so this file stays
// light).
import type { Command } from 'commander';
import type { Kit } from './kit.js';

export function registerConfig(program: Command, kit: Kit): void {
  const { run } = kit;
  const config = program
    .command('config')
    .description('read and write settings (keys: base_url, output, check.target)');
  config
    .command('get')
    .description('print a setting (all settings without KEY)')
    .argument('[key]', 'base_url, output or check.target')
    .action(async (key: string | undefined, _o: unknown, cmd: Command) =>
      run(cmd, async (ctx, deps) =>
        (await import('./config.js')).runConfig({ ctx, action: 'get', ...(key !== undefined ? { key } : {}) }, deps),
      ),
    );
  config
    .command('set')
    .description('change a setting: base_url URL | output table|json | check.target URL')
    .argument('<key>')
    .argument('<value>')
    .action(async (key: string, value: string, _o: unknown, cmd: Command) =>
      run(cmd, async (ctx, deps) => (await import('./config.js')).runConfig({ ctx, action: 'set', key, value }, deps)),
    );
  config
    .command('unset')
    .description('remove a setting')
    .argument('<key>')
    .action(async (key: string, _o: unknown, cmd: Command) =>
      run(cmd, async (ctx, deps) => (await import('./config.js')).runConfig({ ctx, action: 'unset', key }, deps)),
    );
}
