// `proxyd` entry: commander parses; serve and admin modules load only when their command runs.
import { Command, CommanderError, Option } from 'commander';
import { VERSION } from '../../contract/version.js';
import { SERVE_DEFAULTS, SERVE_FLAGS, type ServeFlag } from './serve-options.js';

function fail(message: string, code = 1): void {
  process.stderr.write(`proxyd: ${message}\n`);
  process.exitCode = code;
}

async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) return '';
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** A flag of `serve` (serve-options.ts) as a commander option; boolean flags read their env var in config.ts. */
function serveOption(f: ServeFlag): Option {
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

function dataDirOption(): Option {
  return sharedOption('--data-dir');
}

/** The API listener: `serve` listens on it, `health` asks it. */
function apiListenOption(): Option {
  return sharedOption('--api-listen');
}

function databaseUrlOption(): Option {
  return sharedOption('--database-url');
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- commander's options, each command's own shape
type AdminAction = (deps: import('../admin/commands.js').AdminDeps, opts: any) => Promise<unknown>;

/** How an admin command uses the database: `read` only looks (a data dir without a database is an error, never created). */
type AdminUse = { read?: boolean };

/** An admin command of admin/plans.ts (it takes the store and the options). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- commander's options, each command's own shape
function planAction(pick: (m: typeof import('../admin/plans.js')) => (store: import('../store/index.js').Store, o: any) => Promise<unknown>, use: AdminUse = {}) {
  return adminAction(() => (deps, o) => import('../admin/plans.js').then((m) => pick(m)(deps.store, o)), use);
}

/** An admin command of admin/policy.ts (it takes the store and the options). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- commander's options, each command's own shape
function policyAction(pick: (m: typeof import('../admin/policy.js')) => (store: import('../store/index.js').Store, o: any) => Promise<unknown>, use: AdminUse = {}) {
  return adminAction(() => (deps, o) => import('../admin/policy.js').then((m) => pick(m)(deps.store, o)), use);
}

type AdminOpts = Record<string, unknown> & { dataDir?: string; databaseUrl?: string; format?: string };

/**
 * Opens the data dir's database (or `--database-url`), runs `run`, closes it; a failure is one line on stderr
 * and exit 1 (2 for a usage error). Every `proxyd admin` command goes through here. A command that only reads
 * (`use.read`) never creates a data dir or a database: a mistyped --data-dir is named, not filled.
 */
function withStore(run: (store: import('../store/index.js').Store, all: AdminOpts, where: string) => Promise<void>, use: AdminUse = {}) {
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
    const { AdminError, AdminUsageError, NoAccountError } = await import('../admin/commands.js');
    const { openStore } = await import('../store/index.js');
    const { checkDatabaseUrl, defaultDataDir } = await import('./config.js');
    let store: import('../store/index.js').Store | null = null;
    const dataDir = all.dataDir || defaultDataDir();
    let where = all.dataDir ? `data dir ${dataDir}` : `the default data dir ${dataDir} (choose another with --data-dir or PROXYD_DATA_DIR)`;
    // Output that cannot be written: one line and exit 1, no stack trace. A reader that went away (`| head`) is
    // fine for a command that only reads; for one that changed something (a token printed once) it is not.
    process.stdout.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'EPIPE' && use.read) process.exit(process.exitCode ?? 0);
      process.stderr.write(`proxyd: cannot write the output (${e.code ?? e.message})${use.read ? '' : ': the command was carried out, its output is lost'}\n`);
      process.exit(1);
    });
    try {
      checkDatabaseUrl(all.databaseUrl);
      if (!all.databaseUrl) {
        const { existsSync } = await import('node:fs');
        const { DB_FILE } = await import('../store/sqlite/db.js');
        if (use.read && !existsSync(`${dataDir}/${DB_FILE}`)) throw new AdminError(`no database in ${where}: nothing to show (is it the daemon's data dir?)`);
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

/** Runs one admin command against the data dir and prints its JSON. */
function adminAction(pick: (m: typeof import('../admin/commands.js')) => AdminAction, use: AdminUse = {}) {
  return withStore(async (store, all, where) => {
    const admin = await import('../admin/commands.js');
    const out = await pick(admin)({ store, readStdin, where }, all);
    process.stdout.write(`${JSON.stringify(out)}\n`);
  }, use);
}

/** `admin connections`: JSON lines (or a table) on stdout; with --follow until SIGINT/SIGTERM or a closed pipe. */
const connectionsAction = withStore(async (store, all) => {
  const { connections } = await import('../admin/connections.js');
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  process.stdout.on('error', onSignal); // EPIPE: the reader (head, less) went away
  try {
    await connections(store, all as import('../admin/connections.js').ConnectionsOptions, (line) => void process.stdout.write(`${line}\n`), stop.signal);
  } finally {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
  }
}, { read: true });

/** `admin usage`: the report in its format on stdout. */
/** `proxyd admin exits`: the exit-node registry (docs/operations.md, "Entry and exit nodes"), one JSON line per exit, or a table. */
const exitsAction = withStore(async (store, all) => {
  const { AdminError } = await import('../admin/commands.js');
  if (!store.exits) throw new AdminError('exit nodes need a fleet database: give --database-url postgres://…');
  const { STALE_MS } = await import('../fleet/exits.js');
  const rows = await store.exits.list(365 * 86_400_000); // every row; those past STALE_MS get no traffic
  const out = rows.map((r) => ({ node: r.node, hop: r.hop, country: r.country, city: r.city, heartbeat_age_ms: r.ageMs, state: r.ageMs <= STALE_MS ? 'live' : 'stale', fingerprints: r.fingerprints }));
  if (all.format === 'table') {
    const { alignedLine, columnWidths } = await import('../services/text-table.js');
    const cols = ['node', 'hop', 'country', 'city', 'heartbeat_age_ms', 'state'] as const;
    const rows = [[...cols], ...out.map((r) => cols.map((c) => String(r[c] ?? '-')))];
    const widths = columnWidths(rows);
    for (const row of rows) process.stdout.write(`${alignedLine(row, widths)}\n`);
  } else for (const r of out) process.stdout.write(`${JSON.stringify(r)}\n`);
}, { read: true });

/** `proxyd admin fleet …`: one JSON object on stdout. */
const rotateSecretAction = withStore(async (store) => {
  const { rotateSecret } = await import('../admin/fleet.js');
  process.stdout.write(`${JSON.stringify(await rotateSecret(store))}\n`);
});
const rotateCertAction = withStore(async (store, all) => {
  const { rotateCert } = await import('../admin/fleet.js');
  process.stdout.write(`${JSON.stringify(await rotateCert(store, String(all.node)))}\n`);
});

const usageAction = withStore(async (store, all) => {
  const { adminUsage, renderUsage } = await import('../admin/usage.js');
  process.stdout.write(renderUsage(await adminUsage(store, all as import('../admin/usage.js').UsageOptions), all.format));
}, { read: true });

export function buildProgram(): Command {
  const program = new Command('proxyd')
    .description('proxyd: whitelist API, proxy gateway (HTTP, CONNECT, SOCKS5) and web console')
    .version(VERSION)
    .showHelpAfterError('(run with --help for usage)');

  const serve = program.command('serve').description('run the daemon (prints one JSON ready line on stdout; JSON logs on stderr)');
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
        if (err.code === 'EADDRINUSE') fail(`address in use: ${err.message.replace(/^listen EADDRINUSE: address already in use /, '')}`);
        else if (err.code === 'EADDRNOTAVAIL') fail(`address not on this machine: ${err.message.replace(/^listen EADDRNOTAVAIL: address not available /, '')} (a listen flag names an address no interface has)`);
        else if ((err.code === 'ENOTFOUND' || err.code === 'EAI_AGAIN') && err.syscall === 'getaddrinfo') {
          fail(`a listen address does not resolve: ${(err as { hostname?: string }).hostname ?? err.message} (give the --*-listen flags an IP address or a local name)`);
        } else fail(err.message);
        // Everything opened was closed, but a driver's reconnect timer or a socket still closing must not keep
        // a failed start alive: it exits within a second whatever lingers (the timer does not hold it open).
        setTimeout(() => process.exit(), 1_000).unref();
      }
    });

  program
    .command('health')
    .description('ask the daemon on --api-listen for GET /healthz: exit 0 when it answers 200, else 1 (a 0.0.0.0 or :: address is asked on loopback)')
    .addOption(apiListenOption())
    .option('--timeout <seconds>', 'how long one request may take', '5')
    .option('--wait <seconds>', 'keep asking until it answers 200, for at most this long (a unit\'s start-up)', '0')
    .action(async (opts) => {
      const { runHealth } = await import('./health-probe.js');
      process.exitCode = await runHealth(opts, { stdout: (s) => void process.stdout.write(s), stderr: (s) => void process.stderr.write(s) });
    });

  const admin = program
    .command('admin')
    .description('operator commands on the database (work while daemons run)')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption());

  const account = admin.command('account').description('accounts');
  account
    .command('create')
    .description('create an account; prints {"account_id","email"}')
    .requiredOption('--email <email>')
    .option('--password <password>', 'console password (prefer --password-stdin: argv is visible to other users)')
    .option('--password-stdin', 'read the console password from the first line of stdin')
    .option('--verified', 'mark the account real-name verified')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(adminAction((m) => m.accountCreate));
  account
    .command('set')
    .description('change status and/or verification; prints the account')
    .requiredOption('--email <email>')
    .addOption(new Option('--status <status>').choices(['active', 'suspended', 'closed']))
    .option('--verified <bool>', 'true or false')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(adminAction((m) => m.accountSet));

  account
    .command('reset-2fa')
    .description("turn the account's second factor off (TOTP, passkeys, recovery codes) for a customer who lost them; recorded")
    .requiredOption('--email <email>')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(adminAction((m) => m.accountReset2fa));

  const audit = admin
    .command('audit')
    .description('the audit log: one JSON line per record, oldest first (docs/admin.md, "audit")')
    .option('--email <email>', 'records of this account')
    .option('--since <duration|iso>', 'records since, e.g. 24h, 30d or 2026-11-25T10:00:00Z')
    .option('--action <action>', 'records of this action (whitelist.added) or family (whitelist)')
    .option('--limit <n>', 'at most this many')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(
      withStore(async (store, all) => {
        const { auditList } = await import('../admin/audit.js');
        await auditList(store, all as import('../admin/audit.js').AuditOptions, (line) => void process.stdout.write(`${line}\n`));
      }, { read: true }),
    );
  audit
    .command('verify')
    .description('check every hash chain (or one account\'s): exit 0 when all hold, 1 naming the first broken record')
    .option('--email <email>', 'only this account\'s chain')
    .option('--heads <file>', 'also check heads kept earlier (lines of `proxyd admin audit head`) are still in their chains')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(
      withStore(async (store, all) => {
        const { auditVerify } = await import('../admin/audit.js');
        const r = await auditVerify(store, all as { email?: string; heads?: string });
        process.stdout.write(`${JSON.stringify(r.json)}\n`);
        if (r.message) fail(r.message);
      }, { read: true }),
    );
  audit
    .command('head')
    .description('each chain\'s head (seq and hash) as JSON lines: keep them elsewhere (an external log, a cron job) to prove later that no chain was rewritten')
    .option('--email <email>', 'only this account\'s head')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(
      withStore(async (store, all) => {
        const { auditHeads } = await import('../admin/audit.js');
        for (const h of await auditHeads(store, all as { email?: string })) process.stdout.write(`${JSON.stringify(h)}\n`);
      }, { read: true }),
    );

  const token = admin.command('token').description('API tokens');
  token
    .command('reset')
    .description('issue a new token (the old one dies at once); prints {"token"} once')
    .requiredOption('--email <email>')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(adminAction((m) => m.tokenReset));
  token
    .command('disable')
    .description('disable the active token')
    .requiredOption('--email <email>')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(adminAction((m) => m.tokenDisable));

  const key = admin.command('key').description('API keys with scopes for every customer endpoint but the whitelist (docs/admin.md, "API keys")');
  key
    .command('create')
    .description('make a key; prints {"id","key",…} (the key is shown only here)')
    .requiredOption('--email <email>')
    .requiredOption('--name <name>', '1-64 printable characters')
    .requiredOption('--scopes <list>', 'comma-separated: usage:read, users:read, users:write, rules:read, rules:write, audit:read')
    .option('--expires <iso>', 'when the key stops working (ISO 8601; without a zone, UTC)')
    .option('--allowed-ips <list>', 'comma-separated IPv4/IPv6 addresses and CIDRs the key works from (default: anywhere)')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(withStore(async (store, all, where) => {
      const { keyCreate } = await import('../admin/keys.js');
      process.stdout.write(`${JSON.stringify(await keyCreate({ store, readStdin, where }, all as unknown as Parameters<typeof keyCreate>[1]))}\n`);
    }));
  key
    .command('list')
    .description('the account\'s keys, newest first: JSON lines {"id","name","scopes","created_at","expires_at","allowed_ips","revoked_at","last_used_at","last_used_ip","state"}')
    .requiredOption('--email <email>')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(
      withStore(async (store, all, where) => {
        const { keyList } = await import('../admin/keys.js');
        for (const line of await keyList({ store, readStdin, where }, all as unknown as { email: string })) process.stdout.write(`${JSON.stringify(line)}\n`);
      }, { read: true }),
    );
  key
    .command('revoke')
    .description('revoke a key by its id: refused on every node within 1 s; prints the key (state "revoked")')
    .requiredOption('--email <email>')
    .requiredOption('--id <id>', 'the key\'s id (from key list, or the part after pxk_)')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(withStore(async (store, all, where) => {
      const { keyRevoke } = await import('../admin/keys.js');
      process.stdout.write(`${JSON.stringify(await keyRevoke({ store, readStdin, where }, all as unknown as { email: string; id: string }))}\n`);
    }));

  const webhook = admin.command('webhook').description("an account's webhook: usage thresholds and plan expiry, signed (docs/admin.md)");
  webhook
    .command('set')
    .description('set the URL and thresholds; prints {"url","thresholds","secret"} (the secret is shown only here)')
    .requiredOption('--email <email>')
    .requiredOption('--url <url>', 'https:// and a public address (unless --allow-private-webhooks)')
    .option('--thresholds <list>', 'percentages of the plan\'s traffic limit', '80,100')
    .option('--allow-private-webhooks', 'allow http:// and private or loopback receivers (as the daemons that send run with it)')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(adminAction((m) => m.webhookSet));
  webhook
    .command('remove')
    .description('remove the account\'s webhook; prints {"removed":true|false}')
    .requiredOption('--email <email>')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(adminAction((m) => m.webhookRemove));
  admin
    .command('webhooks')
    .description('the account\'s webhook deliveries, newest first: JSON lines {"id","type","attempts","state","last_status"}')
    .requiredOption('--email <email>')
    .option('--limit <n>', 'at most this many', '100')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(
      withStore(async (store, all, where) => {
        const { webhookDeliveries } = await import('../admin/commands.js');
        for (const line of await webhookDeliveries({ store, readStdin, where }, all as unknown as { email: string; limit: string })) process.stdout.write(`${JSON.stringify(line)}\n`);
      }, { read: true }),
    );

  const plan = admin.command('plan').description('plans: traffic per period, connections, expiry (docs/admin.md)');
  plan
    .command('set')
    .description('create or change the account\'s plan; prints it')
    .requiredOption('--email <email>')
    .option('--traffic-limit <size|none>', 'bytes per period: 50GiB, 500MB, plain bytes, or none')
    .addOption(new Option('--period <period>', 'what the traffic limit is per').choices(['day', 'month', 'lifetime']))
    .option('--max-connections <n|none>', 'concurrent connections of the account')
    .option('--expires <iso|never>', 'when the plan ends')
    .option('--rate-limit <rate|none>', 'bits per second each way for the account\'s connections on each node: 10mbit, 1gbit, 500kbit, or none')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(planAction((m) => m.planSet));
  plan
    .command('show')
    .description('the plan, what the period has used, and its state')
    .requiredOption('--email <email>')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(planAction((m) => m.planShow, { read: true }));

  const policy = admin.command('policy').description('target rules: domains and CIDRs an account (or the whole service) may not reach (docs/admin.md)');
  policy
    .command('set')
    .description('replace the lists given (none empties one; a list not given is kept); prints the rules')
    .option('--email <email>', 'the account whose rules change')
    .option('--global', 'the service\'s rules (checked first, for every account)')
    .option('--deny <list|none>', 'comma-separated domain patterns (example.com, *.example.com) and CIDRs refused')
    .option('--allow <list|none>', 'the only domain patterns and CIDRs reachable (an account only)')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(policyAction((m) => m.policySet));
  policy
    .command('show')
    .description('an account\'s target rules (--email) or the service\'s (--global)')
    .option('--email <email>')
    .option('--global')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(policyAction((m) => m.policyShow, { read: true }));

  const proxyUser = admin.command('proxy-user').description('gateway credentials');
  proxyUser
    .command('set')
    .description('a proxy user\'s limits inside the account\'s plan; prints them')
    .requiredOption('--email <email>')
    .requiredOption('--username <username>')
    .option('--traffic-limit <size|none>', 'bytes per the account\'s period')
    .option('--max-connections <n|none>', 'concurrent connections of this user')
    .option('--rate-limit <rate|none>', 'bits per second each way for this user\'s connections on each node: 10mbit, 1gbit, 500kbit, or none')
    .option('--expires <iso|never>', 'the user\'s own expiry: refused like an expired plan past it')
    .option('--allow <list|none>', 'the user\'s own allowed targets (domain patterns, CIDRs), after the account\'s rules')
    .option('--deny <list|none>', 'the user\'s own denied targets (domain patterns, CIDRs), after the account\'s rules')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(planAction((m) => m.proxyUserSet));
  proxyUser
    .command('create')
    .description('create a proxy user; prints {"username","password"} (generated unless --password-stdin)')
    .requiredOption('--email <email>')
    .requiredOption('--username <username>')
    .option('--password-stdin', 'read the password from the first line of stdin')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(adminAction((m) => m.proxyUserCreate));

  admin
    .command('whitelist')
    .description('whitelist entries')
    .command('set-status')
    .description('enable or disable an entry; prints the entry')
    .requiredOption('--email <email>')
    .requiredOption('--ip <ip>')
    .addOption(new Option('--status <status>').choices(['active', 'disabled']).makeOptionMandatory())
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(adminAction((m) => m.whitelistSetStatus));

  admin
    .command('usage')
    .description('metered usage of an account (docs/admin.md): by proxy user, or by minute, hour or day')
    .requiredOption('--email <email>')
    .addOption(new Option('--by <what>').choices(['user', 'minute', 'hour', 'day']).default('user'))
    .option('--from <iso>', 'start (default: 1 h, 24 h or 30 days before --to, by minute, hour or day/user)')
    .option('--to <iso>', 'end, exclusive (default: now)')
    .addOption(new Option('--format <format>').choices(['json', 'csv', 'table']).default('json'))
    .addOption(new Option('--usage-retention <spec>', "the daemons' --usage-retention, when not the default (which buckets --by user can still read)").env('PROXYD_USAGE_RETENTION'))
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(usageAction);

  admin
    .command('connections')
    .description('the connection log: one JSON line per record (docs/support.md); --follow streams new ones from every node')
    .option('--email <email>', 'records of this account')
    .option('--user <username>', 'records of this proxy username (as presented)')
    .option('--ip <ip>', 'records from this source IP')
    .option('--id <request-id>', 'the record of this request id (X-Request-Id)')
    .option('--reason <reason>', 'records with this reason (docs/support.md lists them)')
    .addOption(new Option('--decision <decision>').choices(['admitted', 'refused']))
    .option('--since <duration|iso>', 'records since, e.g. 15m, 2h, 7d or 2026-11-25T10:00:00Z')
    .option('--limit <n>', 'how many of the newest matching records first (default 100)')
    .option('--follow', 'then print new records as they are written, until interrupted')
    .addOption(new Option('--format <format>').choices(['json', 'table']).default('json'))
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(connectionsAction);

  admin
    .command('exits')
    .description('exit nodes registered in the fleet database: one JSON line each (live: heartbeat within 2.5 s)')
    .addOption(new Option('--format <format>').choices(['json', 'table']).default('json'))
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(exitsAction);

  const ip = admin.command('ip').description('dedicated egress addresses: an account\'s traffic leaves only from them, nobody else\'s does (docs/admin.md)');
  ip
    .command('assign')
    .description('give addresses of a node to an account (all or none); prints them')
    .requiredOption('--email <email>')
    .requiredOption('--node <name>', "the node's --node-name")
    .requiredOption('--addresses <list>', 'IPv4 addresses and ranges a-b, comma-separated, each in the node\'s --egress-pool (or a local address)')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(withStore(async (store, all) => {
      const { ipAssign } = await import('../admin/ips.js');
      process.stdout.write(`${JSON.stringify(await ipAssign(store, all as never))}\n`);
    }));
  ip
    .command('release')
    .description('take addresses back from whoever holds them; open connections from them end within 2 s')
    .requiredOption('--addresses <list>', 'IPv4 addresses and ranges a-b, comma-separated')
    .option('--quarantine <days>', 'keep them from every account (and the shared rotation) this many days', '0')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(withStore(async (store, all) => {
      const { ipRelease } = await import('../admin/ips.js');
      process.stdout.write(`${JSON.stringify(await ipRelease(store, all as never))}\n`);
    }));
  ip
    .command('list')
    .description('egress addresses nodes offer: one JSON line each (address, node, country, city, account, assigned_at, state)')
    .option('--email <email>', 'the addresses this account holds')
    .option('--node <name>', 'the addresses of this node')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(withStore(async (store, all) => {
      const { ipList } = await import('../admin/ips.js');
      await ipList(store, all as never, (line) => void process.stdout.write(`${line}\n`));
    }, { read: true }));

  const fleet = admin.command('fleet').description('the entry → exit hop\'s credentials (docs/admin.md)');
  fleet
    .command('rotate-secret')
    .description('make a new fleet secret; exits accept the old one too for their --hop-grace')
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(rotateSecretAction);
  fleet
    .command('rotate-cert')
    .description("give an exit a new hop certificate; returns once it serves it and entries can pin it")
    .requiredOption('--node <name>', "the exit's --node-name")
    .addOption(dataDirOption())
    .addOption(databaseUrlOption())
    .action(rotateCertAction);

  return program;
}

export async function main(argv: string[]): Promise<void> {
  const program = buildProgram();
  program.exitOverride();
  program.configureOutput({ writeErr: (s) => process.stderr.write(s), writeOut: (s) => process.stdout.write(s) });
  for (const c of program.commands) {
    c.exitOverride();
    for (const cc of c.commands) {
      cc.exitOverride();
      for (const ccc of cc.commands) ccc.exitOverride();
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
