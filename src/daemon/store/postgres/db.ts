// Connects to PostgreSQL: a bounded pool with short timeouts (a paused server must not hang requests),
// int8 as numbers, driver failures turned into the store's own values and errors, migrations under an advisory lock.
import postgres from '#postgres';
import { StoreUnavailableError } from '../types.js';
import { PG_MIGRATIONS } from './migrations.js';

export type Sql = postgres.Sql<{ int8: number }>;

/** A query that has not answered in this long is given up (503); the server may still finish it. */
const QUERY_TIMEOUT_MS = 2_000;
const CONNECT_TIMEOUT_S = 2;
/**
 * Longest wait before a connection that failed is tried again. postgres.js backs off 3^n/100 s per failure,
 * shared by the pool, up to 20 s: after an outage of a few seconds the pool sat out 4-8 s more once the server
 * was back (the gateway refused that long: test/e2e/fleet-recovery). Recovery within 1 s needs the retry
 * every quarter second at worst; a refused connect to a down server costs next to nothing.
 */
export const MAX_RECONNECT_DELAY_S = 0.25;

/** Seconds before reconnect attempt `retries`: 10, 20, 40 … ms up to MAX_RECONNECT_DELAY_S, with jitter. */
export function reconnectDelay(retries: number): number {
  return Math.min(0.01 * 2 ** retries, MAX_RECONNECT_DELAY_S) * (0.75 + Math.random() / 4);
}
/**
 * Connections per process for everything but batches. An API call is one round trip, and postgres.js pipelines
 * on a busy connection (TCP_NODELAY: vendor/postgres/README.md), so two warm backends serve better than more
 * cold ones on a small host (docs/benchmarks/api.md: list p99 lower than with 4 in every alternating pair).
 */
const POOL_SIZE = 2;
/**
 * Connections for the long work, apart: add/delete batches (one procedure call that keeps its backend busy for
 * tens of ms), the change feed's reads (a full snapshot takes about a second at 100k rows) and traffic flushes.
 * An API call pipelined behind one of those on a shared connection would wait that long.
 */
export const BACKGROUND_POOL_SIZE = 2;
/** Any fixed 64-bit number of our own: the advisory lock key that serialises migrations across nodes. */
const MIGRATION_LOCK_KEY = 0x70726f787964; // "proxyd"

/**
 * libpq's way to a Unix socket, `postgres://user@/db?host=/run/postgresql`: postgres.js wants the directory as
 * an option. Done on the string, not with `new URL`: a multi-host URL (`h1:5432,h2:5432`, for failover) is not
 * a WHATWG URL, and postgres.js parses it itself.
 */
export function splitSocketDir(url: string): { url: string; socketDir: string | null } {
  const q = url.indexOf('?');
  if (q < 0) return { url, socketDir: null };
  const params = new URLSearchParams(url.slice(q + 1));
  const dir = params.get('host');
  if (!dir?.startsWith('/')) return { url, socketDir: null };
  params.delete('host');
  const rest = params.toString();
  return { url: url.slice(0, q) + (rest ? `?${rest}` : ''), socketDir: dir };
}

/** `applicationName` names the pool's connections in pg_stat_activity (`proxyd`, `proxyd background`). */
export function connect(url: string, max = POOL_SIZE, applicationName = 'proxyd'): Sql {
  const { url: forDriver, socketDir } = splitSocketDir(url);
  return postgres(forDriver, {
    ...(socketDir ? { host: socketDir } : {}),
    max,
    connect_timeout: CONNECT_TIMEOUT_S,
    backoff: reconnectDelay,
    idle_timeout: 60,
    // No type lookup query at connect: nothing of ours needs it, and it is one more thing to hang on.
    fetch_types: false,
    onnotice: () => {},
    types: { int8: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) } },
    connection: {
      application_name: applicationName,
      statement_timeout: 10_000,
      lock_timeout: 5_000,
      idle_in_transaction_session_timeout: 10_000,
    },
  }) as unknown as Sql;
}

// Connection-level failures: the server is stopped, paused, restarting or out of reach.
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'CONNECT_TIMEOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
]);

function isUnreachable(e: unknown): boolean {
  const code = String((e as { code?: unknown }).code ?? '');
  // SQLSTATE 08 connection exception, 57P0x shutdown / cannot connect now, 53 insufficient resources, 57014 statement timeout.
  return UNREACHABLE_CODES.has(code) || /^(08|53|57P0)/.test(code) || code === '57014';
}

/** Lost a race inside the database (serialisation failure, deadlock, lock timeout): worth retrying. */
export function isBusy(e: unknown): boolean {
  const code = String((e as { code?: unknown }).code ?? '');
  return code === '40001' || code === '40P01' || code === '55P03';
}

/** Runs a query with the client-side deadline; an unreachable server becomes StoreUnavailableError. */
export async function guard<T>(op: () => Promise<T>, timeoutMs = QUERY_TIMEOUT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StoreUnavailableError(`no answer within ${timeoutMs} ms`)), timeoutMs);
  });
  const work = op();
  work.catch(() => {}); // a query abandoned at the deadline may still fail later
  try {
    return await Promise.race([work, deadline]);
  } catch (e) {
    if (e instanceof StoreUnavailableError) throw e;
    if (isUnreachable(e)) throw new StoreUnavailableError(String((e as { code?: unknown }).code));
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

/** Brings the schema up to date; nodes starting together wait on one advisory lock and migrate once. */
export async function migrate(sql: Sql): Promise<number> {
  return sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`;
    await tx`CREATE TABLE IF NOT EXISTS proxyd_schema (version integer PRIMARY KEY, applied_at bigint NOT NULL)`;
    const [row] = await tx<{ v: number }[]>`SELECT coalesce(max(version), 0)::int AS v FROM proxyd_schema`;
    let version = row!.v;
    for (; version < PG_MIGRATIONS.length; version++) {
      await tx.unsafe(PG_MIGRATIONS[version]!).simple();
      await tx`INSERT INTO proxyd_schema (version, applied_at) VALUES (${version + 1}, ${Math.floor(Date.now() / 1000)})`;
    }
    return version;
  });
}

export async function schemaVersion(sql: Sql): Promise<number> {
  const [row] = await sql<{ v: number }[]>`SELECT coalesce(max(version), 0)::int AS v FROM proxyd_schema`;
  return row!.v;
}

/** The URL as it may be shown: no password (single- or multi-host; whatever follows the scheme up to the last `@` of the authority). */
export function redactUrl(url: string): string {
  const m = /^(postgres(?:ql)?:\/\/)([^/?#]*)(.*)$/is.exec(url);
  if (!m) return 'postgres://(unparsable URL)';
  const [, scheme, authority, rest] = m as unknown as [string, string, string, string];
  const at = authority.lastIndexOf('@');
  if (at < 0) return url;
  const user = authority.slice(0, at);
  const colon = user.indexOf(':');
  return `${scheme}${colon < 0 ? user : `${user.slice(0, colon)}:***`}${authority.slice(at)}${rest}`;
}
