// A throwaway PostgreSQL cluster from Debian's postgresql package, in a temp dir on a free loopback port.
// initdb refuses root, so initdb and pg_ctl run as the `postgres` user (runuser); the dir is chowned to it.
// One cluster serves a whole vitest run (global-setup.ts); each test file makes its own databases on it.
import { execFileSync, spawnSync } from 'node:child_process';
import { appendFileSync, chownSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import postgres from '#postgres';
import { freePort } from './net.js';

const BIN = '/usr/lib/postgresql/15/bin';
export const PG_TEST_URL_ENV = 'PROXYD_TEST_PG_URL';
/** The run's cluster's Unix socket directory. */
export const PG_TEST_SOCKET_ENV = 'PROXYD_TEST_PG_SOCKET_DIR';

/** Why PostgreSQL tests are skipped, or null when they run. */
export function postgresSkipReason(): string | null {
  if (!existsSync(path.join(BIN, 'initdb'))) return `${BIN}/initdb not found (apt-get install postgresql-15)`;
  return null;
}

function pgUser(): { uid: number; gid: number } {
  const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
  return { uid, gid };
}

// initdb refuses root: as root, run the server binaries as `postgres`; as anyone else, as ourselves.
const asRoot = process.getuid?.() === 0;

function asPostgres(cmd: string, args: string[]): void {
  const bin = path.join(BIN, cmd);
  const r = asRoot
    ? spawnSync('runuser', ['-u', 'postgres', '--', bin, ...args], { encoding: 'utf8', timeout: 60_000 })
    : spawnSync(bin, args, { encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) throw new Error(`${cmd} failed (${r.status}): ${r.stderr || r.stdout}`);
}

export interface PgCluster {
  /** Superuser URL of the `postgres` database. */
  url: string;
  port: number;
  dir: string;
  start(): void;
  /** Fast shutdown by default (connections are closed, like a crash to the client); `immediate`: a crash. */
  stop(mode?: 'fast' | 'immediate'): void;
  /** A standby becomes the primary (pg_ctl promote, waiting until it accepts writes). */
  promote(): void;
  /** SIGSTOP/SIGCONT every server process: the server is there but answers nothing. */
  pause(): void;
  resume(): void;
  destroy(): void;
}

/** Extra server settings (later `-c` wins); `standbyOf`: a streaming standby of that cluster (pg_basebackup -R). */
export interface ClusterOptions {
  settings?: Record<string, string>;
  standbyOf?: PgCluster;
  /** The standby's application_name, as the primary's synchronous_standby_names names it. */
  name?: string;
}

export async function startPostgres(o: ClusterOptions = {}): Promise<PgCluster> {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyd-pg-'));
  if (asRoot) {
    const { uid, gid } = pgUser();
    chownSync(dir, uid, gid);
  }
  const data = path.join(dir, 'data');
  if (o.standbyOf) {
    // A copy of the primary that follows it; primary_conninfo names it so that the primary can wait for it.
    asPostgres('pg_basebackup', [
      '-D',
      data,
      '-R',
      '-X',
      'stream',
      '-h',
      '127.0.0.1',
      '-p',
      String(o.standbyOf.port),
      '-U',
      'postgres',
      '--no-sync',
    ]);
    const conninfo = `host=127.0.0.1 port=${o.standbyOf.port} user=postgres application_name=${o.name ?? 'standby'}`;
    appendFileSync(path.join(data, 'postgresql.auto.conf'), `primary_conninfo = '${conninfo}'\n`);
  } else asPostgres('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C']);
  const port = await freePort();
  const settings = {
    fsync: 'off',
    full_page_writes: 'off',
    synchronous_commit: 'off',
    max_connections: '200',
    ...o.settings,
  };
  const opts = [
    `-c port=${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${dir}`,
    ...Object.entries(settings).map(([k, v]) => `-c ${k}=${v}`),
  ].join(' ');
  const start = () =>
    asPostgres('pg_ctl', ['-D', data, '-l', path.join(dir, 'log'), '-o', opts, '-w', '-t', '60', 'start']);
  start();
  const signalAll = (sig: NodeJS.Signals) => {
    const postmaster = Number(readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
    const children = spawnSync('pgrep', ['-P', String(postmaster)], { encoding: 'utf8' })
      .stdout.split('\n')
      .filter(Boolean)
      .map(Number);
    for (const pid of [postmaster, ...children]) {
      try {
        process.kill(pid, sig);
      } catch {
        /* gone */
      }
    }
  };
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    dir,
    start,
    stop: (mode = 'fast') => asPostgres('pg_ctl', ['-D', data, '-m', mode, '-w', 'stop']),
    promote: () => asPostgres('pg_ctl', ['-D', data, '-w', '-t', '60', 'promote']),
    pause: () => signalAll('SIGSTOP'),
    resume: () => signalAll('SIGCONT'),
    destroy: () => {
      try {
        asPostgres('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } catch {
        /* already stopped */
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

let seq = 0;
/** A migrated database every test database is copied from (CREATE DATABASE … TEMPLATE): no per-test migration. */
export const TEMPLATE_DB = 'proxyd_template';

/** Makes the template: the current schema, applied by the store itself. */
export async function makeTemplate(clusterUrl: string): Promise<void> {
  const admin = postgres(clusterUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`CREATE DATABASE ${TEMPLATE_DB}`);
  } finally {
    await admin.end();
  }
  const u = new URL(clusterUrl);
  u.pathname = `/${TEMPLATE_DB}`;
  const { PostgresStore } = await import('../../src/daemon/store/postgres/index.js');
  await (await PostgresStore.open(u.toString())).close();
}

/** A fresh, empty database on the run's cluster (or on `clusterUrl`); its URL. */
export async function createDatabase(
  clusterUrl = process.env[PG_TEST_URL_ENV],
  opts: { unmigrated?: boolean } = {},
): Promise<string> {
  if (!clusterUrl) throw new Error(`no test PostgreSQL (${postgresSkipReason() ?? 'global setup did not start one'})`);
  const name = `t_${process.pid}_${Date.now().toString(36)}_${seq++}`;
  const admin = postgres(clusterUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`CREATE DATABASE ${name} TEMPLATE ${opts.unmigrated ? 'template0' : TEMPLATE_DB}`);
  } finally {
    await admin.end();
  }
  const u = new URL(clusterUrl);
  u.pathname = `/${name}`;
  return u.toString();
}

let reusable: string | null = null;

/**
 * An empty database for one in-process test: this test file's own database, emptied (TRUNCATE is ~20x
 * faster than CREATE DATABASE). Only for tests that close their store before the next one starts.
 */
export async function emptyDatabase(): Promise<string> {
  if (!reusable) return (reusable = await createDatabase());
  const sql = postgres(reusable, { max: 1, onnotice: () => {} });
  try {
    const tables = await sql<
      { t: string }[]
    >`SELECT tablename AS t FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'proxyd_schema'`;
    await sql.unsafe(`TRUNCATE ${tables.map((r) => r.t).join(', ')} RESTART IDENTITY CASCADE`);
  } finally {
    await sql.end();
  }
  return reusable;
}

export type BackendName = 'sqlite' | 'postgres';

/** The backends a parameterised suite runs on: both, or SQLite alone when no PostgreSQL could be started. */
export const BACKENDS: BackendName[] = process.env[PG_TEST_URL_ENV] ? ['sqlite', 'postgres'] : ['sqlite'];
