// What the definitions of proxyd's commands share: how a failure is reported, stdin, the options `serve` shares with
// other commands (built from serve-options.ts), and the admin commands' way to the database. Light: main.ts loads it
// (and every definition) on every invocation; the store, config.ts and the admin modules load when a command runs.
import { Option, type Command } from 'commander';
import { SERVE_DEFAULTS, SERVE_FLAGS, type ServeFlag } from './serve-options.js';

export function fail(message: string, code = 1): void {
  process.stderr.write(`proxyd: ${message}\n`);
  process.exitCode = code;
}

export async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) return '';
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** A flag of `serve` (serve-options.ts) as a commander option; boolean flags read their env var in config.ts. */
export function serveOption(f: ServeFlag): Option {
  const o = new Option(f.flags, f.help);
  if (!f.boolean) o.env(f.env);
  if (f.default) o.default(SERVE_DEFAULTS[f.default]);
  if (f.choices) o.choices(f.choices);
  if (f.hidden) o.hideHelp();
  return o;
}

/** A flag of `serve` that other commands take too (admin's data dir and database, health's API listener). */
function sharedOption(flag: '--data-dir' | '--database-url' | '--api-listen'): Option {
  return serveOption(SERVE_FLAGS.find((f) => f.flags.startsWith(`${flag} `))!);
}

export function dataDirOption(): Option {
  return sharedOption('--data-dir');
}

/** The API listener: `serve` listens on it, `health` asks it. */
export function apiListenOption(): Option {
  return sharedOption('--api-listen');
}

export function databaseUrlOption(): Option {
  return sharedOption('--database-url');
}

/** How an admin command uses the database: `read` only looks (a data dir without a database is an error, never created). */
type AdminUse = { read?: boolean };

/** Commander's parsed options, each command's own shape (typed where the command reads them). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- commander's options, each command's own shape
type CommandOptions = any;

/** An admin command's run function that takes the deps (the store, stdin, where) and the options. */
type AdminRun = (deps: import('../admin/admin-kit.js').AdminDeps, o: CommandOptions) => Promise<unknown>;

/** An admin command's run function that needs only the store and the options. */
type StoreRun = (store: import('../store/index.js').Store, o: CommandOptions) => Promise<unknown>;

export type AdminOpts = Record<string, unknown> & { dataDir?: string; databaseUrl?: string; format?: string };

/**
 * Opens the data dir's database (or `--database-url`), runs `run`, closes it; a failure is one line on stderr
 * and exit 1 (2 for a usage error). Every `proxyd admin` command goes through here. A command that only reads
 * (`use.read`) never creates a data dir or a database: a mistyped --data-dir is named, not filled.
 */
export function withStore(
  run: (store: import('../store/index.js').Store, all: AdminOpts, where: string) => Promise<void>,
  use: AdminUse = {},
) {
  return async (opts: Record<string, unknown>, cmd: Command) => {
    const all = { ...cmd.optsWithGlobals(), ...opts } as AdminOpts;
    // `--data-dir` and `--database-url` are options of `admin` and of each command: commander gives a flag to the
    // first that knows it (`admin`, wherever it stands), and the environment to the others. A flag wins.
    for (const key of ['dataDir', 'databaseUrl'] as const) {
      for (let c: Command | null = cmd; c; c = c.parent) {
        if (c.getOptionValueSource(key) === 'cli') {
          all[key] = c.opts()[key] as string;
          break;
        }
      }
    }
    const { AdminError, AdminUsageError, NoAccountError } = await import('../admin/admin-kit.js');
    const { openStore } = await import('../store/index.js');
    const { checkDatabaseUrl, defaultDataDir } = await import('./config.js');
    let store: import('../store/index.js').Store | null = null;
    const dataDir = all.dataDir || defaultDataDir();
    let where = all.dataDir
      ? `data dir ${dataDir}`
      : `the default data dir ${dataDir} (choose another with --data-dir or PROXYD_DATA_DIR)`;
    // Output that cannot be written: one line and exit 1, no stack trace. A reader that went away (`| head`) is
    // fine for a command that only reads; for one that changed something (a token printed once) it is not.
    process.stdout.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'EPIPE' && use.read) process.exit(process.exitCode ?? 0);
      process.stderr.write(
        `proxyd: cannot write the output (${e.code ?? e.message})${use.read ? '' : ': the command was carried out, its output is lost'}\n`,
      );
      process.exit(1);
    });
    try {
      checkDatabaseUrl(all.databaseUrl);
      if (!all.databaseUrl) {
        const { existsSync } = await import('node:fs');
        const { DB_FILE } = await import('../store/sqlite/db.js');
        if (use.read && !existsSync(`${dataDir}/${DB_FILE}`))
          throw new AdminError(`no database in ${where}: nothing to show (is it the daemon's data dir?)`);
        (await import('./data-dir.js')).ensureDataDir(dataDir);
      }
      store = await openStore({ dataDir, databaseUrl: all.databaseUrl });
      if (all.databaseUrl) where = `the database ${store.location}`;
      await run(store, all, where);
    } catch (e) {
      if (e instanceof NoAccountError) fail(`${e.message} in ${where}`);
      else fail(e instanceof AdminError ? e.message : `${(e as Error).message}`, e instanceof AdminUsageError ? 2 : 1);
    } finally {
      await store?.close();
    }
  };
}

/**
 * Runs one admin command against the data dir and prints its JSON. `load` imports the command's run function
 * (`() => import('../admin/keys.js').then((m) => m.keyCreate)`): the definition stays light, the run file loads
 * only when the command runs.
 */
export function adminAction(load: () => Promise<AdminRun>, use: AdminUse = {}) {
  return withStore(async (store, all, where) => {
    const run = await load();
    const out = await run({ store, readStdin, where }, all);
    process.stdout.write(`${JSON.stringify(out)}\n`);
  }, use);
}

/** As adminAction, for a run function that takes only the store and the options. */
export function storeAction(load: () => Promise<StoreRun>, use: AdminUse = {}) {
  return adminAction(async () => {
    const run = await load();
    return (deps, o) => run(deps.store, o);
  }, use);
}
