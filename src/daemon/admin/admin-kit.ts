// What every `proxyd admin` group's run file shares: its errors (process/command-kit.ts withStore reports them), the
// deps a run function gets, the account named by --email, and a password read from the flags or stdin.
import { passwordProblem } from '../../contract/password.js';
import type { Account, Store } from '../store/index.js';

export class AdminError extends Error {
  override name = 'AdminError';
}

/** A required option missing, or two that exclude each other: a usage error (exit 2, as commander's own). */
export class AdminUsageError extends AdminError {
  override name = 'AdminUsageError';
}

/** No account has this email: the command's runner adds which database it looked in (a default data dir is easy to miss). */
export class NoAccountError extends AdminError {
  override name = 'NoAccountError';
  constructor(readonly email: string) {
    super(`no account with email ${email}`);
  }
}

export interface AdminDeps {
  store: Store;
  readStdin: () => Promise<string>;
  /** Which database the command used, for "not found" errors (a default data dir is easy to miss). */
  where: string;
}

/** The account with this email, else NoAccountError. */
export async function requireAccount(store: Store, email: string): Promise<Account> {
  const a = await store.accounts.findByEmail(email);
  if (!a) throw new NoAccountError(email);
  return a;
}

/** `--email` where a run function's options may lack it (commander requires it; a caller of the function may not). */
export function requiredEmail(email: string | undefined): string {
  if (!email) throw new AdminUsageError('--email is required');
  return email;
}

function firstLine(s: string): string {
  return s.split(/\r?\n/)[0] ?? '';
}

/** `--password P` or `--password-stdin` (its first line), checked; null if neither is given and none is required. */
export async function readPassword(
  deps: AdminDeps,
  opts: { password?: string; passwordStdin?: boolean },
  required: boolean,
): Promise<string | null> {
  if (opts.password !== undefined && opts.passwordStdin)
    throw new AdminUsageError('give --password or --password-stdin, not both');
  let pw: string | null = opts.password ?? null;
  if (opts.passwordStdin) pw = firstLine(await deps.readStdin());
  if (pw === null) {
    if (required) throw new AdminUsageError('a password is required: --password-stdin (recommended) or --password P');
    return null;
  }
  const problem = passwordProblem(pw);
  if (problem) throw new AdminError(`password must be ${problem}`);
  return pw;
}
