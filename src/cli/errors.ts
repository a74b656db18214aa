// Errors of the CLI as values with their exit status (docs/cli.md Exit codes, Errors and secrets); main prints the message and exits.
import { Exit, type ExitCode } from './exit-codes.js';

export class CliError extends Error {
  readonly exitCode: ExitCode;
  constructor(message: string, exitCode: ExitCode = Exit.ERROR) {
    super(message);
    this.name = 'CliError';
    this.exitCode = exitCode;
  }
}

export class UsageError extends CliError {
  constructor(message: string) {
    super(message, Exit.USAGE);
    this.name = 'UsageError';
  }
}

export class AuthError extends CliError {
  constructor(message: string) {
    super(message, Exit.AUTH);
    this.name = 'AuthError';
  }
}

/** Replaces every occurrence of the given secrets, and any `api_key=` value, so a message is safe to print. */
export function scrubSecrets(text: string, secrets: ReadonlyArray<string | undefined>): string {
  let out = text;
  for (const s of secrets) {
    if (!s) continue;
    out = out.split(s).join('****');
    const dot = s.indexOf('.');
    // The secret half alone must not leak either.
    if (dot > 0 && s.length - dot > 8) out = out.split(s.slice(dot + 1)).join('****');
  }
  return out.replace(/(api_key=)[^&\s"']*/gi, '$1****');
}
