// What every command's definition (commands/<name>.cmd.ts) is given: commander (imported by main.ts at run time),
// `run` (resolves the context and dependencies, then calls the command's run function) and the option parsers the
// commands share. Light: main.ts imports every definition for each invocation.
import type { Command } from 'commander';
import type { Context } from '../context.js';
import type { Deps } from '../deps.js';
import type { ExitCode } from '../exit-codes.js';
import { looksLikeToken } from '../errors.js';
import { isApiKeyShaped } from '../key-format.js';
import { isStrictIPv4 } from '../../rules/ipv4-syntax.js';

export type Runner = (ctx: Context, deps: Deps) => Promise<ExitCode>;

export type Commander = typeof import('commander');

export interface OptionParsers {
  /** A whole number in [min, max]; anything else is a usage error naming `name`. */
  int: (name: string, min: number, max?: number) => (v: string) => number;
  /** An IPv4 address in the server's strict syntax, checked here so a typo is a usage error, not a 10400. */
  ipOption: (v: string) => string;
  /** A username prefix by the API's rule, never a pasted key or token. */
  prefixOption: (v: string) => string;
}

export interface Kit extends OptionParsers {
  commander: Commander;
  run: (cmd: Command, runner: Runner) => Promise<void>;
}

export function optionParsers(InvalidArgumentError: Commander['InvalidArgumentError']): OptionParsers {
  return {
    int:
      (name, min, max = Number.MAX_SAFE_INTEGER) =>
      (v) => {
        if (!/^\d+$/.test(v)) throw new InvalidArgumentError(`${name} must be a whole number`);
        const n = Number(v);
        if (n < min || n > max) throw new InvalidArgumentError(`${name} must be between ${min} and ${max}`);
        return n;
      },
    // Same strict syntax the server applies; checked here so a typo is a usage error, not a 10400.
    ipOption: (v) => {
      if (!isStrictIPv4(v)) throw new InvalidArgumentError('not an IPv4 address');
      return v;
    },
    // The API's rule for a username prefix (1-64 of A-Z a-z 0-9 . _ -), checked here so a typo is a usage error, not
    // a 10400; a pasted key or token passes it, and must not go into a URL.
    prefixOption: (v) => {
      if (looksLikeToken(v) || isApiKeyShaped(v))
        throw new InvalidArgumentError(
          'an API key or token was given where a username prefix belongs; it was not sent',
        );
      if (!/^[A-Za-z0-9._-]{1,64}$/.test(v))
        throw new InvalidArgumentError('--prefix must be 1-64 characters of A-Z a-z 0-9 . _ -');
      return v;
    },
  };
}
