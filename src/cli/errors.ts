// Errors of the CLI as values with their exit status (docs/cli.md Exit codes, Errors and secrets); main prints the message and exits.
import { TOKEN_SOURCE } from '../contract/token.js';
import { Exit, type ExitCode } from './exit-codes.js';
import { API_KEY_SHAPE } from './key-format.js';

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

// Anything shaped like an API token (a user's, pasted where it does not belong): its access key stays, the secret goes.
// The same for an API key (`pxk_<id>_<secret>`): its id stays.
const TOKEN_SHAPE = new RegExp(`\\b${TOKEN_SOURCE}(?![A-Za-z0-9_-])`, 'g');

const TOKEN_TEST = new RegExp(TOKEN_SHAPE.source);

/** Whether `text` holds something shaped like an API key (`pxk_<id>_<secret>`). */
export function looksLikeApiKey(text: string): boolean {
  return new RegExp(API_KEY_SHAPE.source).test(text);
}

/** Whether `text` holds something shaped like an API token (`<accessKey>.<secret>`) or an API key (`pxk_…`). */
export function looksLikeToken(text: string): boolean {
  return TOKEN_TEST.test(text) || looksLikeApiKey(text);
}

/**
 * Replaces every occurrence of the given secrets, anything shaped like a token, and any `api_key=` value, so a
 * message is safe to print.
 */
export function scrubSecrets(text: string, secrets: ReadonlyArray<string | undefined> = []): string {
  let out = text;
  for (const s of secrets) {
    if (!s) continue;
    out = out.split(s).join('****');
    const dot = s.indexOf('.');
    // The secret half alone must not leak either.
    if (dot > 0 && s.length - dot > 8) out = out.split(s.slice(dot + 1)).join('****');
  }
  return out
    .replace(TOKEN_SHAPE, '$1.****')
    .replace(API_KEY_SHAPE, 'pxk_$1_****')
    .replace(/(api_key=)[^&\s"']*/gi, '$1****')
    .replace(/(Bearer\s+)[^\s"',]+/gi, '$1****');
}
