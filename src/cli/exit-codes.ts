// proxyctl exit statuses (docs/cli.md Exit codes).
export const Exit = {
  OK: 0,
  ERROR: 1,
  USAGE: 2,
  ITEMS_FAILED: 3,
  AUTH: 4,
  RATE_LIMITED: 5,
  CHECK_FAILED: 6,
  /** Ctrl-C: 128 + SIGINT, as a shell reports a process that Ctrl-C ended. */
  INTERRUPTED: 130,
} as const;
export type ExitCode = (typeof Exit)[keyof typeof Exit];
