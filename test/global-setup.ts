// Suite-wide PostgreSQL cluster and secret scan: every daemon spawned by test/helpers/daemon.ts saves its stderr
// (JSON logs) under PROXYD_TEST_LOG_DIR, and response bodies the tests receive are saved there too (recordBody);
// after the whole suite, no log or body may hold a token, an api_key value or an API key.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  makeTemplate,
  PG_TEST_SOCKET_ENV,
  PG_TEST_URL_ENV,
  postgresSkipReason,
  startPostgres,
  type PgCluster,
} from './helpers/postgres.js';

const TOKEN_RE = /ak[0-9a-f]{20}\.[A-Za-z0-9_-]{43}/;
const API_KEY_VALUE_RE = /api_key=(?!<API_KEY>)[^&\s"']+/;
/** An API key (pxk_<id>_<secret>): logs carry its id only. */
const PXK_RE = /pxk_[A-Za-z0-9]+_[A-Za-z0-9_-]{22,}/;

let pg: PgCluster | null = null;

export async function setup(): Promise<void> {
  process.env.PROXYD_TEST_LOG_DIR ??= mkdtempSync(path.join(tmpdir(), 'proxyd-test-logs-'));
  // One throwaway PostgreSQL for the run; the backend-parameterised suites make a database each on it.
  const skip = postgresSkipReason();
  if (skip) process.stdout.write(`PostgreSQL backend tests skipped: ${skip}\n`);
  else if (!process.env[PG_TEST_URL_ENV]) {
    pg = await startPostgres();
    await makeTemplate(pg.url);
    process.env[PG_TEST_URL_ENV] = pg.url;
    process.env[PG_TEST_SOCKET_ENV] = pg.dir;
  }
}

export function teardown(): void {
  pg?.destroy();
  pg = null;
  const dir = process.env.PROXYD_TEST_LOG_DIR;
  if (!dir) return;
  const leaks: string[] = [];
  let files = 0;
  for (const f of readdirSync(dir)) {
    files++;
    const text = readFileSync(path.join(dir, f), 'utf8');
    for (const [i, line] of text.split('\n').entries()) {
      if (TOKEN_RE.test(line) || API_KEY_VALUE_RE.test(line) || PXK_RE.test(line))
        leaks.push(`${f}:${i + 1}: ${line.slice(0, 200)}`);
    }
  }
  if (leaks.length)
    throw new Error(
      `secret scan: ${leaks.length} log lines (logs or response bodies) carry a token, api_key value or API key:\n${leaks.slice(0, 20).join('\n')}`,
    );
  process.stdout.write(
    `secret scan: ${files} daemon logs and recorded response bodies scanned, no token, api_key value or API key found\n`,
  );
  rmSync(dir, { recursive: true, force: true });
}
