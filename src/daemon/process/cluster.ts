// `proxyd serve --workers N`: the primary (started by run.ts, which holds the lock and the signals) forks N
// workers that share the listeners (node:cluster), waits until every one serves, replaces a worker that
// dies, serves the workers' aggregated metrics, and on shutdown drains every worker.
// Workers re-run the same command line (cluster re-executes argv), so they parse the same config.
import cluster, { type Worker } from 'node:cluster';
import type { ServeConfig } from './config.js';
import type { DaemonLog } from '../log.js';
import { serveStickyAddresses, serveStickySessions } from './egress-pool.js';
import { ClusterMetrics, METRICS_REQ, METRICS_RES } from '../observe/metrics.js';
import { startDaemon, TUNNEL_DRAIN_MS, type RunningDaemon, type Serving } from './serve.js';

type Ready = RunningDaemon['ready'];

type WorkerMessage =
  | { type: 'proxyd:ready'; ready: Ready }
  | { type: 'proxyd:failed'; message: string; code?: string }
  | { type: typeof METRICS_REQ; id: number };

const DRAIN = 'proxyd:drain';
const HANGUP = 'proxyd:hangup';
/** How long the primary waits for every worker to drain before it kills the rest. */
const CLUSTER_DRAIN_MS = TUNNEL_DRAIN_MS + 5_000;
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

export async function runWorker(cfg: ServeConfig, log: DaemonLog): Promise<void> {
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
    log.info({ event: 'worker_drain', why }, 'worker draining');
    daemon.shutdown().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('message', (m: { type?: string }) => {
    if (m?.type === DRAIN) drain('primary asked');
    if (m?.type === HANGUP) daemon?.hangup();
  });
  // The primary is gone (killed): never serve on without the lock holder.
  process.on('disconnect', () => drain('primary gone'));
  try {
    daemon = await startDaemon(cfg, log);
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

/** Forks the workers and resolves once every one serves on the same ports; the caller holds the lock. */
export async function startPrimary(cfg: ServeConfig, log: DaemonLog): Promise<Serving> {
  const metrics = new ClusterMetrics();
  if (cfg.egressPool) serveStickySessions(cfg.egressPool.length);
  if (cfg.egressPrefix) serveStickyAddresses(cfg.egressPrefix);
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
  log.info({ event: 'cluster_ready', workers: readies.map((r) => r.pid) }, `serving with ${cfg.workers} workers`);

  cluster.on('exit', (w, code, signal) => {
    metrics.workers.set(Object.keys(cluster.workers ?? {}).length);
    if (stopping) return;
    const lived = Date.now() - (bornAt.get(w.id) ?? 0);
    bornAt.delete(w.id);
    crashStreak = lived > STABLE_MS ? 1 : crashStreak + 1;
    const delay = Math.min(100 * 2 ** (crashStreak - 1), 10_000);
    metrics.restarts.inc();
    log.error({ event: 'worker_exit', worker: w.process.pid, code, signal, restartInMs: delay }, 'worker exited unexpectedly; replacing it');
    setTimeout(() => {
      if (!stopping) fork();
    }, delay);
  });

  const shutdown = () => {
    stopping = true;
    const alive = Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w);
    const exits = alive.map((w) => new Promise<void>((r) => (w.isDead() ? r() : w.once('exit', () => r()))));
    for (const w of alive) if (w.isConnected()) w.send({ type: DRAIN });
    const killer = setTimeout(() => {
      for (const w of alive) if (!w.isDead()) w.process.kill('SIGKILL');
    }, CLUSTER_DRAIN_MS);
    return Promise.all(exits).then(() => clearTimeout(killer));
  };
  const hangup = (): void => {
    for (const w of Object.values(cluster.workers ?? {})) if (w?.isConnected()) w.send({ type: HANGUP });
  };
  return { ready, shutdown, hangup };
}
