// `proxyd serve --workers N`: the primary holds the data-dir lock, checks the database, forks N workers
// that share the listeners (node:cluster), prints the one ready line, replaces a worker that dies, serves
// the workers' aggregated metrics, and on SIGTERM/SIGINT drains every worker before it exits 0.
// Workers re-run the same command line (cluster re-executes argv), so they parse the same config.
import cluster, { type Worker } from 'node:cluster';
import type { ServeConfig } from './config.js';
import { ClusterMetrics, METRICS_REQ, METRICS_RES } from './metrics.js';
import { checkAndRepair, logLine, startOptionsFor } from './run.js';
import { lockDataDir, startDaemon, TUNNEL_DRAIN_MS, type RunningDaemon } from './serve.js';

type Ready = RunningDaemon['ready'];

type WorkerMessage =
  | { type: 'proxyd:ready'; ready: Ready }
  | { type: 'proxyd:failed'; message: string; code?: string }
  | { type: typeof METRICS_REQ; id: number };

const DRAIN = 'proxyd:drain';
/** How long the primary waits for every worker to drain before it kills the rest. */
export const CLUSTER_DRAIN_MS = TUNNEL_DRAIN_MS + 5_000;
const START_TIMEOUT_MS = 30_000;
/** A worker that lived this long resets the restart backoff. */
const STABLE_MS = 30_000;

class StartError extends Error {
  constructor(
    message: string,
    readonly code?: string,
  ) {
    super(message);
    this.name = 'StartError';
  }
}

// ---------------------------------------------------------------- worker

export async function runWorker(cfg: ServeConfig): Promise<void> {
  // The primary owns the lifecycle: a terminal's Ctrl-C or a service manager signalling the whole group
  // reaches the primary too, and it drains us in order.
  process.on('SIGINT', () => {});
  process.on('SIGTERM', () => {});
  // Listen before starting: a drain can arrive while this worker is still coming up (a replacement).
  let daemon: RunningDaemon | null = null;
  let drainWhy: string | null = null;
  const drain = (why: string) => {
    if (drainWhy) return;
    drainWhy = why;
    if (!daemon) return; // started below, then drained at once
    daemon.app.log.info({ event: 'worker_drain', why }, 'worker draining');
    daemon.shutdown().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('message', (m: { type?: string }) => {
    if (m?.type === DRAIN) drain('primary asked');
  });
  // The primary is gone (killed): never serve on without the lock holder.
  process.on('disconnect', () => drain('primary gone'));
  try {
    daemon = await startDaemon(cfg, startOptionsFor(cfg));
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (!process.connected) process.exit(1);
    process.send?.({ type: 'proxyd:failed', message: err.message, code: err.code } satisfies WorkerMessage, () => process.exit(1));
    setTimeout(() => process.exit(1), 1000).unref();
    return;
  }
  if (drainWhy) {
    const why = drainWhy;
    drainWhy = null;
    drain(why);
    return;
  }
  process.send?.({ type: 'proxyd:ready', ready: daemon.ready } satisfies WorkerMessage);
}

// ---------------------------------------------------------------- primary

export async function runPrimary(cfg: ServeConfig): Promise<void> {
  const lock = lockDataDir(cfg);
  try {
    await checkAndRepair(cfg);
  } catch (e) {
    lock?.release();
    throw e;
  }

  const metrics = new ClusterMetrics();
  let stopping = false;
  let crashStreak = 0;
  const bornAt = new Map<number, number>();

  const fork = (): Worker => {
    const w = cluster.fork();
    bornAt.set(w.id, Date.now());
    metrics.workers.set(Object.keys(cluster.workers ?? {}).length);
    return w;
  };

  // Workers that said ready: the ones asked for metrics and told to drain.
  const serving = new Set<Worker>();
  cluster.on('message', (worker, m: WorkerMessage) => {
    metrics.onWorkerMessage(m as never);
    if (m?.type === 'proxyd:ready') serving.add(worker);
    if (m?.type !== METRICS_REQ) return;
    metrics
      .text([...serving])
      .then((text) => worker.isConnected() && worker.send({ type: METRICS_RES, id: m.id, text }))
      .catch((e: Error) => worker.isConnected() && worker.send({ type: METRICS_RES, id: m.id, error: e.message }));
  });
  cluster.on('exit', (w) => serving.delete(w));

  // Initial start: every worker must come up, on the same ports, or the whole start fails.
  const readies: Ready[] = [];
  let settle: { resolve: () => void; reject: (e: StartError) => void } | null = null;
  const onMessage = (_w: Worker, m: WorkerMessage) => {
    if (m?.type === 'proxyd:ready') {
      readies.push(m.ready);
      if (readies.length === cfg.workers) settle?.resolve();
    } else if (m?.type === 'proxyd:failed') settle?.reject(new StartError(m.message, m.code));
  };
  const onExit = (w: Worker, code: number | null, signal: string | null) =>
    settle?.reject(new StartError(`worker ${w.process.pid} exited ${signal ?? code} before it was ready`));
  cluster.on('message', onMessage);
  cluster.on('exit', onExit);
  let timer: NodeJS.Timeout | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      settle = { resolve, reject };
      timer = setTimeout(() => reject(new StartError('workers did not become ready in time')), START_TIMEOUT_MS);
      for (let i = 0; i < cfg.workers; i++) fork();
    });
    const [first] = readies;
    const same = readies.every((r) => r.api === first!.api && r.httpProxy === first!.httpProxy && r.socks5 === first!.socks5);
    if (!same) throw new StartError(`workers bound different ports (${readies.map((r) => r.api).join(', ')})`);
  } catch (e) {
    stopping = true;
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGKILL');
    lock?.release();
    const err = e as StartError;
    const out = new Error(err.message) as NodeJS.ErrnoException;
    if (err.code) out.code = err.code;
    throw out;
  } finally {
    settle = null;
    clearTimeout(timer);
    cluster.off('message', onMessage);
    cluster.off('exit', onExit);
  }

  const ready = { ...readies[0]!, pid: process.pid, workers: cfg.workers };
  process.stdout.write(`${JSON.stringify(ready)}\n`);
  logLine('info', { event: 'cluster_ready', workers: readies.map((r) => r.pid) }, `serving with ${cfg.workers} workers`);

  cluster.on('exit', (w, code, signal) => {
    metrics.workers.set(Object.keys(cluster.workers ?? {}).length);
    if (stopping) return;
    const lived = Date.now() - (bornAt.get(w.id) ?? 0);
    bornAt.delete(w.id);
    crashStreak = lived > STABLE_MS ? 1 : crashStreak + 1;
    const delay = Math.min(100 * 2 ** (crashStreak - 1), 10_000);
    metrics.restarts.inc();
    logLine('error', { event: 'worker_exit', worker: w.process.pid, code, signal, restartInMs: delay }, 'worker exited unexpectedly; replacing it');
    setTimeout(() => {
      if (!stopping) fork();
    }, delay);
  });

  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logLine('info', { event: 'shutdown', signal }, 'stopping: draining every worker');
    const alive = Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w);
    const exits = alive.map((w) => new Promise<void>((r) => (w.isDead() ? r() : w.once('exit', () => r()))));
    for (const w of alive) if (w.isConnected()) w.send({ type: DRAIN });
    const killer = setTimeout(() => {
      for (const w of alive) if (!w.isDead()) w.process.kill('SIGKILL');
    }, CLUSTER_DRAIN_MS);
    void Promise.all(exits).then(() => {
      clearTimeout(killer);
      lock?.release();
      logLine('info', { event: 'stopped' }, 'all workers stopped');
      process.exit(0);
    });
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}
