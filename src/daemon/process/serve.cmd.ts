// `proxyd serve`: its flags and help, and the action that reads them (config.ts) and calls run.ts (both imported only
// when the command runs: main.ts builds the whole tree on every invocation, so this file stays light).
import type { Command } from 'commander';
import { SERVE_FLAGS } from './serve-options.js';
import { fail, serveOption } from './command-kit.js';

export function registerServe(program: Command): void {
  const serve = program
    .command('serve')
    .description('run the daemon (prints one JSON ready line on stdout; JSON logs on stderr)');
  for (const f of SERVE_FLAGS) serve.addOption(serveOption(f));
  serve.action(async (opts) => {
    const { toServeConfig, ConfigError } = await import('./config.js');
    let cfg;
    try {
      cfg = toServeConfig(opts);
    } catch (e) {
      if (e instanceof ConfigError) return fail(e.message, 2);
      throw e;
    }
    try {
      const { runServe } = await import('./run.js');
      await runServe(cfg);
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      if (err.code === 'EADDRINUSE')
        fail(`address in use: ${err.message.replace(/^listen EADDRINUSE: address already in use /, '')}`);
      else if (err.code === 'EADDRNOTAVAIL')
        fail(
          `address not on this machine: ${err.message.replace(/^listen EADDRNOTAVAIL: address not available /, '')} (a listen flag names an address no interface has)`,
        );
      else if ((err.code === 'ENOTFOUND' || err.code === 'EAI_AGAIN') && err.syscall === 'getaddrinfo') {
        fail(
          `a listen address does not resolve: ${(err as { hostname?: string }).hostname ?? err.message} (give the --*-listen flags an IP address or a local name)`,
        );
      } else fail(err.message);
      // Everything opened was closed, but a driver's reconnect timer or a socket still closing must not keep
      // a failed start alive: it exits within a second whatever lingers (the timer does not hold it open).
      setTimeout(() => process.exit(), 1_000).unref();
    }
  });
}
