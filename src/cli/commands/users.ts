// `proxyctl users list|show|create|set|passwd|disable|enable|delete` (docs/cli.md "Proxy users"): the account's proxy
// users through the customer API with the API key. Every write carries an Idempotency-Key and is resent with the same
// key after a timeout, a cut connection or a 5xx; a password the server makes is printed once.
import { readFile } from 'node:fs/promises';
import { KEY_LIMITS, RATE_WINDOW_MS } from '../../contract/paths.js';
import { formatSize } from '../../contract/size.js';
import type { Context } from '../context.js';
import {
  createUser,
  deleteUser,
  getUser,
  listUsers,
  patchUser,
  setPassword,
  type Credential,
  type User,
  type UserFields,
  type UserList,
  type WriteOptions,
} from '../customer-api.js';
import type { Deps } from '../deps.js';
import { looksLikeToken, UsageError } from '../errors.js';
import { Exit, type ExitCode } from '../exit-codes.js';
import { decodeText, readAll } from '../io.js';
import { fileProblem } from '../input.js';
import { terminalSafe, renderTsv, type Output } from '../output.js';
import { RollingWindowPacer } from '../pacer.js';
import { checkNotSecret, checkUsername, fieldFromText, parseUsersFile } from '../user-input.js';
import { runUserBatches, type UserBatchSummary } from '../users-batch.js';
import { openKeySession, stopBetweenRequests } from './shared.js';
import { withKey } from './with-key.js';
import type { ProxyUserSettingFlags } from '../../contract/proxy-schemas.js';

/** The flags of `create` and `set` as given (text), before checking. */
export type FieldFlags = ProxyUserSettingFlags;

const FLAG_FIELDS: Array<
  [
    keyof FieldFlags,
    '--traffic-limit' | '--max-connections' | '--rate-limit' | '--expires' | '--allow' | '--deny',
    'traffic_limit' | 'max_connections' | 'rate_limit' | 'expires_at' | 'allow' | 'deny',
  ]
> = [
  ['trafficLimit', '--traffic-limit', 'traffic_limit'],
  ['maxConnections', '--max-connections', 'max_connections'],
  ['rateLimit', '--rate-limit', 'rate_limit'],
  ['expires', '--expires', 'expires_at'],
  ['allow', '--allow', 'allow'],
  ['deny', '--deny', 'deny'],
];

/** The flags as API fields; `set` takes `none` to clear a limit. */
export function fieldsFromFlags(f: FieldFlags, clearable: boolean): UserFields {
  const out: UserFields = {};
  for (const [k, flag, field] of FLAG_FIELDS) {
    const v = f[k];
    if (v === undefined) continue;
    if (looksLikeToken(v))
      throw new UsageError(`${flag}: an API key or token was given where a value belongs; it was not sent`);
    Object.assign(out, fieldFromText(field, v, flag, clearable));
  }
  return out;
}

/** A password from stdin: its first line, without the line ending (spaces are the password's own). */
async function passwordFromStdin(deps: Deps): Promise<string> {
  if (deps.io.stdinIsTTY)
    throw new UsageError('--password-stdin reads the password from a pipe or a file (e.g. < pass.txt), not a terminal');
  const text = await readAll(deps.io.stdin);
  const first = text.split('\n')[0]?.replace(/\r$/, '') ?? '';
  if (first === '') throw new UsageError('--password-stdin: standard input is empty');
  return first;
}

function writeOptions(deps: Deps): WriteOptions {
  return {
    clock: deps.clock,
    onWait: (ms, why) =>
      deps.out.info(
        `waiting ${Math.ceil(ms / 1000)} s ${why === 'backoff' ? 'before a resend (same Idempotency-Key)' : '(the server asked: Retry-After)'}`,
      ),
  };
}

// ---- list / show ----------------------------------------------------------------------------------------------

export interface ListUsersOptions {
  ctx: Context;
  status?: 'all' | 'active' | 'disabled';
  prefix?: string;
  page?: number;
  pageSize?: number;
  all: boolean;
}

export async function runUsersList(opts: ListUsersOptions, deps: Deps): Promise<ExitCode> {
  const { ctx } = opts;
  const { out } = deps;
  const q = {
    ...(opts.status ? { status: opts.status } : {}),
    ...(opts.prefix !== undefined ? { q: opts.prefix } : {}),
  };
  const doc = await withKey(ctx, deps, async (api) => {
    if (!opts.all) return listUsers(api, { ...q, page: opts.page ?? 1, page_size: opts.pageSize ?? 20 });
    // Every page, paced under the key's read limit (120 a minute by default).
    const pacer = new RollingWindowPacer(KEY_LIMITS.reads, RATE_WINDOW_MS, deps.clock);
    const items: User[] = [];
    const seen = new Set<string>();
    for (let page = 1; ; page++) {
      await pacer.acquire();
      const d = await listUsers(api, { ...q, page, page_size: 100 });
      pacer.record();
      for (const u of d.items)
        if (!seen.has(u.username)) {
          seen.add(u.username);
          items.push(u);
        }
      if (d.items.length < 100 || page * 100 >= d.total) break;
    }
    return { items, page: 1, page_size: items.length, total: items.length } satisfies UserList;
  });
  if (ctx.json) {
    out.writeJson(doc);
    return Exit.OK;
  }
  if (!deps.io.stdoutIsTTY) {
    if (doc.items.length)
      out.line(
        renderTsv(
          doc.items.map((u) => [
            u.username,
            u.status,
            u.traffic_limit ?? '',
            used(u),
            u.max_connections ?? '',
            u.rate_limit ?? '',
            u.expires_at ?? '',
          ]),
        ),
      );
    return Exit.OK;
  }
  if (doc.items.length === 0) {
    out.line(doc.total === 0 ? 'No proxy users.' : `No users on page ${doc.page} (${doc.total} in total).`);
    return Exit.OK;
  }
  out.line(
    out.table(
      ['Username', 'Status', 'Traffic limit', 'Used', 'Max conns', 'Rate limit', 'Expires (UTC)'],
      doc.items.map((u) => [
        terminalSafe(u.username),
        statusText(u.status, out),
        limitText(u.traffic_limit),
        formatSize(used(u)),
        u.max_connections ?? '-',
        terminalSafe(u.rate_limit ?? '-'),
        terminalSafe(u.expires_at ?? '-'),
      ]),
    ),
  );
  const pages = Math.max(1, Math.ceil(doc.total / Math.max(1, doc.page_size)));
  if (opts.all) out.line(out.paint('dim', `${doc.total} users`));
  else
    out.line(
      out.paint(
        'dim',
        `page ${doc.page} of ${pages}, ${doc.total} users${doc.page < pages ? ` — next: --page ${doc.page + 1}, or --all` : ''}`,
      ),
    );
  return Exit.OK;
}

const used = (u: User): number => (u.used?.bytes_up ?? 0) + (u.used?.bytes_down ?? 0);
const limitText = (n: number | null | undefined): string => (n == null ? '-' : formatSize(n));
const statusText = (s: string, out: Output) =>
  s === 'active' ? out.paint('green', 'active') : out.paint('yellow', terminalSafe(s));

function printUser(u: User, out: Output): void {
  const rows: Array<[string, string]> = [
    ['username', terminalSafe(u.username)],
    ['status', statusText(u.status, out)],
    ['created', terminalSafe(u.created_at ?? '-')],
    ['traffic limit', limitText(u.traffic_limit)],
    ['used', `${formatSize(used(u))}${u.used?.period_start ? ` since ${terminalSafe(u.used.period_start)}` : ''}`],
    ['max conns', String(u.max_connections ?? '-')],
    ['rate limit', terminalSafe(u.rate_limit ?? '-')],
    ['expires', terminalSafe(u.expires_at ?? '-')],
    ['allow', terminalSafe((u.allow ?? []).join(', ') || '-')],
    ['deny', terminalSafe((u.deny ?? []).join(', ') || '-')],
  ];
  for (const [k, v] of rows) out.line(`${k.padEnd(14)} ${v}`);
}

export async function runUsersShow(opts: { ctx: Context; username: string }, deps: Deps): Promise<ExitCode> {
  checkNotSecret(opts.username, 'USERNAME');
  const u = await withKey(opts.ctx, deps, (api) => getUser(api, opts.username));
  if (opts.ctx.json) deps.out.writeJson(u);
  else printUser(u, deps.out);
  return Exit.OK;
}

// ---- create ----------------------------------------------------------------------------------------------------

export interface CreateOptions extends FieldFlags {
  ctx: Context;
  username?: string;
  file?: string;
  passwordStdin: boolean;
  retry: number;
}

export async function runUsersCreate(opts: CreateOptions, deps: Deps): Promise<ExitCode> {
  const { ctx } = opts;
  if (opts.file !== undefined) {
    if (opts.username !== undefined) throw new UsageError('give a USERNAME or --file, not both');
    if (opts.passwordStdin || FLAG_FIELDS.some(([k]) => opts[k] !== undefined))
      throw new UsageError('with --file, every field comes from the file (its columns)');
    return createFromFile(opts, deps);
  }
  if (opts.username === undefined) throw new UsageError("give the new user's USERNAME, or --file FILE");
  checkUsername(opts.username, 'USERNAME');
  const fields = fieldsFromFlags(opts, false);
  if (opts.passwordStdin)
    Object.assign(fields, fieldFromText('password', await passwordFromStdin(deps), '--password-stdin', false));
  const u = await withKey(ctx, deps, (api) =>
    createUser(api, opts.username!, fields, { ...writeOptions(deps), retry: opts.retry }),
  );
  if (ctx.json) {
    // A password the user gave is not printed back (only one the service made is shown, once).
    deps.out.writeJson(opts.passwordStdin ? withoutPassword(u) : u);
    return Exit.OK;
  }
  deps.out.line(`${deps.out.paint('green', '✓')} Created proxy user ${terminalSafe(u.username)}`);
  // A password the server made is shown this once; one the user gave is theirs already.
  if (!opts.passwordStdin && u.password !== undefined)
    printPasswords([{ username: u.username, password: u.password }], deps.out);
  return Exit.OK;
}

function withoutPassword<T extends { password?: string }>(x: T): Omit<T, 'password'> {
  const { password: _given, ...rest } = x;
  return rest;
}

function printPasswords(creds: Credential[], out: Output): void {
  if (creds.length === 0) return;
  out.line(
    out.table(
      ['Username', 'Password'],
      creds.map((c) => [terminalSafe(c.username), terminalSafe(c.password)]),
    ),
  );
  out.line(
    out.paint(
      'yellow',
      `${creds.length === 1 ? 'This password is' : 'These passwords are'} shown once: store ${creds.length === 1 ? 'it' : 'them'} now (the service keeps only a hash).`,
    ),
  );
}

async function createFromFile(opts: CreateOptions, deps: Deps): Promise<ExitCode> {
  const { ctx } = opts;
  const { out } = deps;
  let text: string;
  try {
    text = opts.file === '-' ? await readAll(deps.io.stdin) : decodeText(await readFile(opts.file!));
  } catch (err) {
    throw new UsageError(`cannot read ${opts.file}: ${fileProblem(err)}`);
  }
  const users = parseUsersFile(text, opts.file === '-' ? 'stdin' : opts.file!);
  const session = await openKeySession(ctx, deps);
  const progress = await deps.progress();
  const interrupt = stopBetweenRequests(deps);
  let result;
  try {
    result = await runUserBatches({
      api: session.api,
      users,
      clock: deps.clock,
      retry: opts.retry,
      signal: interrupt.signal,
      ...(progress ? { onProgress: (p) => progress.update(p, 'creating') } : {}),
    });
  } finally {
    interrupt.release();
    progress?.stop();
    await session.api.close();
  }
  const { summary } = result;
  // Passwords from the file are the user's own: not printed back; those the service made are shown, once.
  const given = new Set(users.filter((u) => u.password !== undefined).map((u) => u.username));
  const made = summary.created.filter((c) => !given.has(c.username));
  if (ctx.json)
    out.writeJson({
      ...summary,
      created: summary.created.map((c) => (given.has(c.username) ? { username: c.username } : c)),
    });
  else printBatchSummary({ ...summary, created: made }, out);
  if (result.stop) out.error(result.exitCode === Exit.AUTH ? keyFailureText(result.stop) : result.stop);
  return result.exitCode;
}

const keyFailureText = (msg: string) =>
  `${msg}; run \`proxyctl key set\` with a current key that has users:write (web console, Account page, API keys)`;

function printBatchSummary(s: UserBatchSummary, out: Output): void {
  printPasswords(s.created, out);
  const parts = [
    out.paint('green', `${s.success_count} created`),
    `${s.already_done} already done`,
    s.failed_count > 0 ? out.paint('red', `${s.failed_count} failed`) : `${s.failed_count} failed`,
  ];
  out.line(parts.join(', '));
  if (s.already_done > 0)
    out.line(
      out.paint(
        'dim',
        'already done: created by an earlier attempt whose answer was lost; set their passwords with `proxyctl users passwd USER`',
      ),
    );
  if (s.failed_count > 0)
    out.line(
      out.table(
        ['Username', 'Code', 'Reason'],
        s.failed_items.map((f) => [terminalSafe(f.username), f.code, terminalSafe(f.reason)]),
      ),
    );
}

// ---- set / enable / disable / passwd / delete ------------------------------------------------------------------

export async function runUsersSet(
  opts: FieldFlags & { ctx: Context; username: string; status?: 'active' | 'disabled' },
  deps: Deps,
): Promise<ExitCode> {
  checkNotSecret(opts.username, 'USERNAME');
  const fields = fieldsFromFlags(opts, true);
  if (opts.status !== undefined) fields.status = opts.status;
  if (Object.keys(fields).length === 0)
    throw new UsageError(
      'nothing to change: give at least one of --traffic-limit, --max-connections, --rate-limit, --expires, --allow, --deny',
    );
  const u = await withKey(opts.ctx, deps, (api) => patchUser(api, opts.username, fields, writeOptions(deps)));
  if (opts.ctx.json) deps.out.writeJson(u);
  else if (!opts.ctx.quiet) {
    const what = opts.status === 'disabled' ? 'Disabled' : opts.status === 'active' ? 'Enabled' : 'Updated';
    deps.out.line(`${deps.out.paint('green', '✓')} ${what} proxy user ${terminalSafe(u.username)}`);
    if (opts.status === 'disabled')
      deps.out.line(deps.out.paint('dim', 'its new connections are refused and its open ones closed within 2 s'));
  }
  return Exit.OK;
}

export async function runUsersPasswd(
  opts: { ctx: Context; username: string; passwordStdin: boolean },
  deps: Deps,
): Promise<ExitCode> {
  checkNotSecret(opts.username, 'USERNAME');
  let password: string | undefined;
  if (opts.passwordStdin)
    password = fieldFromText('password', await passwordFromStdin(deps), '--password-stdin', false).password;
  const c = await withKey(opts.ctx, deps, (api) => setPassword(api, opts.username, password, writeOptions(deps)));
  if (opts.ctx.json) deps.out.writeJson(password === undefined ? c : withoutPassword(c));
  else {
    deps.out.line(
      `${deps.out.paint('green', '✓')} New password set for ${terminalSafe(c.username)} (the old one stops working within 1 s)`,
    );
    if (password === undefined) printPasswords([c], deps.out);
  }
  return Exit.OK;
}

export async function runUsersDelete(
  opts: { ctx: Context; username: string; yes: boolean },
  deps: Deps,
): Promise<ExitCode> {
  checkNotSecret(opts.username, 'USERNAME');
  const { ctx } = opts;
  if (!opts.yes) {
    if (!deps.io.stdinIsTTY || !deps.io.stderrIsTTY)
      throw new UsageError(`deleting ${opts.username} needs --yes when not on a terminal`);
    const { askYesNo } = await import('../prompt.js');
    const ok = await askYesNo(
      deps.io.stdin,
      deps.io.stderr,
      `Delete proxy user ${terminalSafe(opts.username)}? Its open connections are closed.`,
    );
    if (!ok) {
      deps.out.info('nothing deleted');
      return Exit.ERROR;
    }
  }
  await withKey(ctx, deps, (api) => deleteUser(api, opts.username, writeOptions(deps)));
  if (ctx.json) deps.out.writeJson({ username: opts.username });
  else if (!ctx.quiet)
    deps.out.line(`${deps.out.paint('green', '✓')} Deleted proxy user ${terminalSafe(opts.username)}`);
  return Exit.OK;
}
