// `proxyd serve`, the one start-up path: one logger, the data-dir lock, the start-up integrity check, then
// serving in this process or as a cluster primary with workers (--workers N), the one ready line, and one
// signal handler that drains, releases the lock and logs the final "stopped" line. Workers start here too.
import cluster from 'node:cluster';
import v8 from 'node:v8';
import { runWorker, startPrimary } from './cluster.js';
import type { ServeConfig } from './config.js';
import { ensureDataDir } from './data-dir.js';
import { acquireLock, acquireSharedLock, type DataDirLock } from './lock.js';
import { createLogger } from '../log.js';
import { checkAndRepair, startDaemon, type Serving } from './serve.js';

/** The data-dir lock: SQLite only (a fleet's nodes share one PostgreSQL and hold no lock). */
function lockDataDir(cfg: ServeConfig): DataDirLock | null {
  if (cfg.databaseUrl) return null;
  ensureDataDir(cfg.dataDir);
  return cfg.sharedDataDir ? acquireSharedLock(cfg.dataDir) : acquireLock(cfg.dataDir);
}

/**
 * V8's allocation-site pretenuring off in a serving process (docs/decisions.md#d-039, "GC: tunnels that outlived young
 * collections"). Under a stream of short tunnels V8 came to allocate some of a connection's objects straight in the
 * old generation; young collections then could not free what those objects pointed at once the tunnel closed, and
 * ~3 KiB of every tunnel (its sockets, buffers and closures) was copied and promoted until the next full
 * collection. V8 reads the flag as it allocates, so setting it here, before anything serves, is in time; workers
 * run this too.
 */
const V8_FLAGS = '--no-allocation-site-pretenuring';

/**
 * bin/proxyd's handlers for signals that come while the modules load, taken off once the real ones are in place:
 * removing the last listener of a signal first would stop watching it, and one that had come meanwhile was lost.
 */
function dropEarlySignalHandlers(): void {
  for (const s of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
    for (const l of process.listeners(s)) if (l.name === 'proxydEarlySignal') process.removeListener(s, l);
  }
}

export async function runServe(cfg: ServeConfig): Promise<void> {
  v8.setFlagsFromString(V8_FLAGS);
  const log = createLogger(cfg.logLevel);
  // A worker re-runs this command line: the primary holds the lock and the signals. Its handlers are in place
  // when runWorker returns its promise (they come before its first await).
  if (cluster.isWorker) {
    const worker = runWorker(cfg, log);
    dropEarlySignalHandlers();
    return worker;
  }

  const lock = lockDataDir(cfg);
  // The handlers come first: a service manager may stop the daemon while it is still starting (a slow database,
  // a long integrity check, workers booting, which a signal to the whole group reaches too). Nothing is served
  // yet, so there is nothing to drain: start-up is abandoned at once, the lock released and the `stopped` line
  // logged, exit 0 (SQLite rolls back whatever write it was in, as after any stop of the process).
  let serving: Serving | null = null;
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    if (!serving) {
      log.info({ event: 'shutdown', signal }, 'stopping while starting: nothing served yet');
      lock?.release();
      log.info({ event: 'stopped', exitCode: 0 }, 'stopped');
      process.exit(0);
    }
    log.info(
      { event: 'shutdown', signal },
      cfg.workers > 1 ? 'stopping: draining every worker' : 'stopping: no new connections, draining',
    );
    serving
      .shutdown()
      .then(
        () => 0,
        (e: Error) => {
          log.error({ err: { message: e.message } }, 'shutdown failed');
          return 1;
        },
      )
      .then((code) => {
        lock?.release();
        log.info({ event: 'stopped', exitCode: code }, cfg.workers > 1 ? 'all workers stopped' : 'stopped');
        process.exit(code);
      });
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
  // logrotate's signal, and the operator's for a full reload: log files are reopened and the admission view is
  // loaded again beside the one in use (the primary passes it to its workers). Before serving, nothing to reload.
  process.on('SIGHUP', () => {
    if (!serving) return;
    log.info({ event: 'reopen', signal: 'SIGHUP' }, 'reopening log files, reloading the admission view');
    serving.hangup();
  });
  dropEarlySignalHandlers();
  try {
    await checkAndRepair(cfg, log);
    serving = cfg.workers > 1 ? await startPrimary(cfg, log) : await startDaemon(cfg, log);
  } catch (e) {
    lock?.release();
    throw e;
  }
  // After the handlers: whoever reads this line may signal at once. A reader that took it and went away
  // (`proxyd serve | head -1`) makes later writes fail as an 'error' event: heard here, the daemon serves on.
  process.stdout.on('error', (e: Error) =>
    log.warn({ event: 'stdout_closed', detail: e.message }, 'stdout cannot be written (its reader went away)'),
  );
  process.stdout.write(`${JSON.stringify(serving.ready)}\n`);
}
