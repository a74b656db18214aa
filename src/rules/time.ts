// Lengths of time every side counts in: a UTC day in milliseconds is the store's day buckets and partitions, the
// retention floors, the webhooks' give-up, the console's day filters and the `d` of a duration (contract/time.ts).

export const MINUTE_MS = 60_000;
export const HOUR_MS = 3_600_000;
/** A UTC day (no leap seconds in Unix time). */
export const DAY_MS = 86_400_000;
/** A UTC day in seconds (the daemon's second-counted spans and flags). */
export const DAY_S = 86_400;
