// SOCKS5 UDP ASSOCIATE's defaults, in one place: the gateway falls back to them when it is given no `udp` options,
// and `proxyd serve`'s flags (src/daemon/process/serve-options.ts) show and parse them as their defaults.

/** `--udp-ports 40000-44999`, `--udp-idle 120` (seconds), `--udp-max-associations 10000` unless given. */
export const UDP_DEFAULTS = {
  ports: { lo: 40_000, hi: 44_999 },
  idleMs: 120_000,
  maxAssociations: 10_000,
} as const satisfies { ports: { lo: number; hi: number }; idleMs: number; maxAssociations: number };
