// Spawns the built `proxyd` as a real process on loopback with a temp data dir (and, on PostgreSQL, a fresh database).
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, createWriteStream, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { API_PATHS } from '../../src/contract/paths.js';
import { connect } from '../../src/daemon/store/postgres/db.js';
import { patient } from './patience.js';
import { createDatabase, type BackendName } from './postgres.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const PROXYD = path.join(ROOT, 'bin/proxyd');
export const PROXYCTL = path.join(ROOT, 'bin/proxyctl');
/**
 * The admission view's reload worker as built (`npm run build`): a worker thread runs JavaScript, and tests run
 * the view from src/, where its default (reload-worker.js beside view.ts) does not exist.
 */
export const RELOAD_WORKER = pathToFileURL(path.join(ROOT, 'dist/daemon/admission/reload-worker.js'));

/** The whitelist API's paths from the contract, under the short names the tests use. */
export const { list: LIST, add: ADD, delete: DEL } = API_PATHS;

/** The JSON ready line `proxyd serve` prints (the daemon's own type). */
export type { Ready } from '../../src/daemon/process/serve.js';
import type { Ready } from '../../src/daemon/process/serve.js';

export interface Daemon {
  api: string;
  httpProxy: string;
  socks: string;
  /** An exit's hop listener, else ''. */
  hop: string;
  /** The ready line as printed. */
  ready: Ready;
  dataDir: string;
  /** The PostgreSQL database this daemon serves, when it runs on that backend. */
  databaseUrl: string | undefined;
  proc: ChildProcess;
  /** Every stderr line (JSON logs) so far. */
  logs: string[];
  exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Saves a response body the tests received for the suite-wide secret scan (test/global-setup.ts scans
 * every file under PROXYD_TEST_LOG_DIR, daemon logs and these alike). Returns the body.
 */
export function recordBody<T extends string>(body: T): T {
  const dir = process.env.PROXYD_TEST_LOG_DIR;
  if (dir) appendFileSync(path.join(dir, `bodies-${process.pid}.log`), `${body.replace(/\n/g, '\\n')}\n`);
  return body;
}

export function tempDir(prefix = 'proxyd-test-'): string {
  return mkdtempSync(path.join(tmpdir(), prefix));
}

// Data dirs whose daemons and admin commands run on a PostgreSQL database (dataDirFor('postgres')).
const databaseUrls = new Map<string, string>();

/** A fresh data dir; for PostgreSQL also a fresh database (on the run's cluster or `clusterUrl`) that startDaemon and admin use with it. */
export async function dataDirFor(backend: BackendName = 'sqlite', clusterUrl?: string): Promise<string> {
  const dir = tempDir();
  if (backend === 'postgres') databaseUrls.set(dir, await createDatabase(clusterUrl));
  return dir;
}

export function databaseUrlOf(dataDir: string): string | undefined {
  return databaseUrls.get(dataDir);
}

/** `--database-url URL` when the data dir belongs to a PostgreSQL database, else nothing. */
export function databaseArgs(dataDir: string): string[] {
  const url = databaseUrls.get(dataDir);
  return url ? ['--database-url', url] : [];
}

export interface StartOptions {
  dataDir?: string;
  /** The store backend when no dataDir is given (default SQLite). */
  backend?: BackendName;
  /** Extra `proxyd serve` flags. */
  args?: string[];
  env?: Record<string, string>;
  /** How long to wait for the ready line (default 20 s on an idle machine, scaled by its load: patience.ts). */
  timeoutMs?: number;
  /** Another `proxyd` than this checkout's (an installed one). */
  bin?: string;
}

export async function startDaemon(opts: StartOptions = {}): Promise<Daemon> {
  const dataDir = opts.dataDir ?? (await dataDirFor(opts.backend));
  const args = [
    opts.bin ?? PROXYD,
    'serve',
    '--data-dir',
    dataDir,
    ...databaseArgs(dataDir),
    '--api-listen',
    '127.0.0.1:0',
    '--http-proxy-listen',
    '127.0.0.1:0',
    '--socks-listen',
    '127.0.0.1:0',
    ...(opts.args ?? []),
  ];
  const proc = spawn(process.execPath, args, {
    env: { ...process.env, ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: string[] = [];
  // Saved for the suite-wide secret scan in test/global-setup.ts.
  const saved = process.env.PROXYD_TEST_LOG_DIR
    ? createWriteStream(path.join(process.env.PROXYD_TEST_LOG_DIR, `proxyd-${proc.pid}.log`))
    : null;
  createInterface({ input: proc.stderr! }).on('line', (l) => {
    logs.push(l);
    saved?.write(`${l}\n`);
  });
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  const ready = await new Promise<Ready>((resolve, reject) => {
    const timer = setTimeout(
      () => {
        proc.kill('SIGKILL');
        reject(new Error(`proxyd did not become ready:\n${logs.join('\n')}`));
      },
      opts.timeoutMs ?? patient(20_000),
    );
    const rl = createInterface({ input: proc.stdout! });
    rl.once('line', (line) => {
      clearTimeout(timer);
      try {
        resolve(JSON.parse(line) as Ready);
      } catch {
        reject(new Error(`bad ready line: ${line}`));
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`proxyd exited ${code} before ready:\n${logs.join('\n')}`));
    });
  });
  return {
    api: ready.api,
    httpProxy: ready.httpProxy ?? '',
    socks: ready.socks5 ?? '',
    hop: ready.hop ?? '',
    ready,
    dataDir,
    databaseUrl: databaseUrls.get(dataDir),
    proc,
    logs,
    exited,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
      proc.kill(signal);
      const t = setTimeout(() => proc.kill('SIGKILL'), patient(15_000));
      const code = await exited;
      clearTimeout(t);
      return code;
    },
  };
}

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function run(
  bin: string,
  args: string[],
  opts: { input?: string; env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [bin, ...args], {
      env: { ...process.env, ...opts.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d) => (stdout += d));
    proc.stderr.on('data', (d) => (stderr += d));
    const t = setTimeout(
      () => {
        proc.kill('SIGKILL');
        reject(new Error(`${path.basename(bin)} ${args.join(' ')} timed out\n${stderr}`));
      },
      opts.timeoutMs ?? patient(30_000),
    );
    proc.on('exit', (code) => {
      clearTimeout(t);
      resolve({ code, stdout, stderr });
    });
    proc.stdin.end(opts.input ?? '');
  });
}

/** `proxyd admin …` on a data dir (or its PostgreSQL database); parses the JSON it prints. */
export async function admin(dataDir: string, args: string[], input?: string): Promise<RunResult & { json: any }> {
  const r = await run(PROXYD, ['admin', ...args, '--data-dir', dataDir, ...databaseArgs(dataDir)], { input });
  let json: any = null;
  try {
    json = JSON.parse(r.stdout);
  } catch {
    /* not JSON: caller checks code/stderr */
  }
  return { ...r, json };
}

/** Creates an active, verified account with a token. */
export async function makeAccount(
  dataDir: string,
  email: string,
  opts: { verified?: boolean; password?: string } = {},
): Promise<{ accountId: number; token: string }> {
  const created = await admin(
    dataDir,
    ['account', 'create', '--email', email, '--password-stdin', ...(opts.verified === false ? [] : ['--verified'])],
    (opts.password ?? 'correct horse battery') + '\n',
  );
  if (created.code !== 0) throw new Error(`account create failed: ${created.stderr}`);
  const tok = await admin(dataDir, ['token', 'reset', '--email', email]);
  if (tok.code !== 0) throw new Error(`token reset failed: ${tok.stderr}`);
  return { accountId: created.json.account_id, token: tok.json.token };
}

/** Read-only look into a data dir's database, through the statement cache (see src/daemon/store/sqlite/statements.ts). */
export async function inspectDb(dataDir: string, opts: { write?: boolean } = {}) {
  const { default: Database } = await import('better-sqlite3');
  const { pin, stmt, pragmaValue } = await import('../../src/daemon/store/sqlite/statements.js');
  const db = pin(new Database(path.join(dataDir, 'proxyd.db'), { readonly: !opts.write }));
  if (opts.write) db.exec('PRAGMA busy_timeout = 5000');
  return {
    run: (sql: string, ...params: unknown[]) => stmt<unknown[]>(db, sql).run(...params),
    /** Statements of the test's own (triggers, several at once), not cached. */
    exec: (sql: string): void => void db.exec(sql),
    get: <T = any>(sql: string, ...params: unknown[]) => stmt<unknown[], T>(db, sql).get(...params) as T,
    all: <T = any>(sql: string, ...params: unknown[]) => stmt<unknown[], T>(db, sql).all(...params) as T[],
    integrity: () => pragmaValue(db, 'integrity_check'),
    close: (): void => {
      db.close();
    },
  };
}

/**
 * A look into the database behind a data dir, on either backend: async get/all/run with `?` placeholders.
 * `integrity()` is SQLite's integrity_check ('ok' on PostgreSQL, which checks its own pages).
 */
export async function inspectData(dataDir: string, opts: { write?: boolean } = {}) {
  const url = databaseUrls.get(dataDir);
  if (!url) {
    const db = await inspectDb(dataDir, opts);
    return {
      run: async (q: string, ...params: unknown[]) => void db.run(q, ...params),
      get: async <T = any>(q: string, ...params: unknown[]) => db.get<T>(q, ...params),
      all: async <T = any>(q: string, ...params: unknown[]) => db.all<T>(q, ...params),
      integrity: async () => db.integrity(),
      close: async () => db.close(),
    };
  }
  const sql = connect(url, 1);
  const pg = (q: string) => {
    let i = 0;
    return q.replace(/\?/g, () => `$${++i}`);
  };
  return {
    run: async (q: string, ...params: unknown[]) => void (await sql.unsafe(pg(q), params as never[])),
    get: async <T = any>(q: string, ...params: unknown[]) => (await sql.unsafe(pg(q), params as never[]))[0] as T,
    all: async <T = any>(q: string, ...params: unknown[]) => [...(await sql.unsafe(pg(q), params as never[]))] as T[],
    integrity: async () => 'ok',
    close: async () => sql.end(),
  };
}

/** Environment for a `proxyctl` run isolated from this machine: its own config dir, no stored token, and no keychain (the Secret Service bus does not exist). */
export function isolatedCliEnv(
  work: string,
  baseUrl: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    XDG_CONFIG_HOME: path.join(work, 'config'),
    PROXYCTL_BASE_URL: baseUrl,
    PROXYCTL_API_KEY: '',
    PROXYCTL_CONFIG_DIR: '',
    DBUS_SESSION_BUS_ADDRESS: `unix:path=${path.join(work, 'no-bus')}`,
    DISPLAY: '',
    NO_COLOR: '1',
    ...extra,
  };
}

/**
 * Waits until the daemon's admission view holds at least `n` proxy users (it learns of users the admin
 * command made from the change feed, a moment later: on a loaded machine, later than a test's first connection).
 */
export async function waitForProxyUsers(d: Daemon, n: number, timeoutMs = 10_000): Promise<void> {
  const t0 = Date.now();
  const deadline = patient(timeoutMs);
  for (;;) {
    const text = await fetch(`${d.api}/metrics`)
      .then((r) => r.text())
      .catch(() => '');
    if (Number(/^proxyd_admission_view_proxy_users (\d+)/m.exec(text)?.[1] ?? -1) >= n) return;
    if (Date.now() - t0 > deadline)
      throw new Error(`the admission view did not reach ${n} proxy users in ${deadline} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
