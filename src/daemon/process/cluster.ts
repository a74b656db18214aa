// `proxyd serve --workers N`: the primary (started by run.ts, which holds the lock and the signals) forks N
// workers, each listening on a socket of its own on the same ports (SO_REUSEPORT: the kernel spreads
// connections and none passes through the primary), waits until every one serves, replaces a worker that
// dies, serves the workers' aggregated metrics, and on shutdown drains every worker.
// Workers re-run the same command line (cluster re-executes argv), so they parse the same config; the
// primary adds the concrete ports (port 0 is resolved by the first worker). On SQLite the primary writes
// usage and the connection log for every worker (one-writer.ts).
import cluster, { type Worker } from 'node:cluster';
import net from 'node:net';
import { primaryWriterSinks, startPrimaryWriter, type PrimaryWriter } from './one-writer.js';
import type { ServeConfig } from './config.js';
import type { DaemonLog } from '../log.js';
import { serveStickyAddresses, serveStickySessions } from './egress-pool.js';
import { ClusterMetrics, METRICS_REQ, METRICS_RES } from '../observe/metrics.js';
import { openStore, startDaemon, TUNNEL_DRAIN_MS, type RunningDaemon, type Serving } from './serve.js';
import type { Store } from '../store/index.js';

type Ready = RunningDaemon['ready'];

type WorkerMessage =
  | { type: 'proxyd:ready'; ready: Ready }
  | { type: 'proxyd:failed'; message: string; code?: string }
  | { type: typeof METRICS_REQ; id: number };

const DRAIN = 'proxyd:drain';
const HANGUP = 'proxyd:hangup';
/** Environment the primary gives each worker: the listeners' concrete ports. */
const PORTS_ENV = 'PROXYD_WORKER_PORTS';

/** The ports every worker binds; null for a listener this node does not open. */
interface Ports {
  api: number;
  httpProxy: number | null;
  socks: number | null;
  hop: number | null;
}

const portOf = (hostPort: string | null | undefined): number | null =>
  hostPort ? Number(hostPort.slice(hostPort.lastIndexOf(':') + 1)) : null;

/** The ports as configured (0 where the OS is to pick). */
function configuredPorts(cfg: ServeConfig): Ports {
  const customer = cfg.role !== 'exit';
  return {
    api: cfg.apiListen.port,
    httpProxy: customer ? cfg.httpProxyListen.port : null,
    socks: customer ? cfg.socksListen.port : null,
    hop: cfg.role === 'exit' ? cfg.hopListen.port : null,
  };
}

const portsOf = (r: Ready): Ports => ({
  api: portOf(r.api)!,
  httpProxy: portOf(r.httpProxy),
  socks: portOf(r.socks5),
  hop: portOf(r.hop),
});

/** The configuration a worker serves: the primary's ports in place of 0. */
export function withWorkerPorts(cfg: ServeConfig, env: NodeJS.ProcessEnv = process.env): ServeConfig {
  const p = env[PORTS_ENV] ? (JSON.parse(env[PORTS_ENV]) as Ports) : null;
  if (!p) return cfg;
  return {
    ...cfg,
    apiListen: { ...cfg.apiListen, port: p.api },
    httpProxyListen: { ...cfg.httpProxyListen, port: p.httpProxy ?? cfg.httpProxyListen.port },
    socksListen: { ...cfg.socksListen, port: p.socks ?? cfg.socksListen.port },
    hopListen: { ...cfg.hopListen, port: p.hop ?? cfg.hopListen.port },
  };
}

/**
 * A port taken by another process is refused before any worker binds it: SO_REUSEPORT would otherwise let
 * our workers share it with another program of the same user. The probe sockets (bound without it) stay open
 * until every listener is probed, so two of our own listeners on one port (`--api-listen` and
 * `--http-proxy-listen` both on :8080) are refused too, as one process refuses them, instead of the kernel
 * spreading connections over both services.
 */
function portTaken(host: string, port: number, held: net.Server[]): Promise<NodeJS.ErrnoException | null> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', (e: NodeJS.ErrnoException) => resolve(e));
    s.listen({ host, port, exclusive: true }, () => {
      held.push(s);
      resolve(null);
    });
  });
}
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
  // A SIGHUP to the whole group (logrotate's `systemctl kill -s HUP`) killed every worker and the tunnels it
  // carried: the primary passes it on (HANGUP below), once per worker, so a worker's own copy is ignored.
  process.on('SIGHUP', () => {});
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
    // On PostgreSQL rows lock, not the file: every worker writes its own.
    daemon = await startDaemon(withWorkerPorts(cfg), log, {
      reusePort: true,
      sinks: cfg.databaseUrl ? null : primaryWriterSinks(),
    });
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (!process.connected) process.exit(1);
    process.send?.({ type: 'proxyd:failed', message: err.message, code: err.code } satisfies WorkerMessage, () =>
      process.exit(1),
    );
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
  let ports: Ports = configuredPorts(cfg);

  const fork = (): Worker => {
    const w = cluster.fork({ [PORTS_ENV]: JSON.stringify(ports) });
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

  /** Forks a worker and resolves with its ready line, or rejects with why it did not start. */
  const startOne = (): Promise<Ready> =>
    new Promise((resolve, reject) => {
      const w = fork();
      const onExit = (code: number | null, signal: string | null) =>
        reject(new StartError(`worker ${w.process.pid} exited ${signal ?? code} before it was ready`));
      w.on('message', function onMessage(m: WorkerMessage) {
        if (m?.type !== 'proxyd:ready' && m?.type !== 'proxyd:failed') return;
        w.off('message', onMessage);
        w.off('exit', onExit);
        if (m.type === 'proxyd:ready') resolve(m.ready);
        else reject(new StartError(m.message, m.code));
      });
      w.once('exit', onExit);
    });

  // Initial start: every worker must come up, on the same ports, or the whole start fails.
  let timer: NodeJS.Timeout | undefined;
  let readies: Ready[];
  let store: Store | null = null;
  let writer: PrimaryWriter | null = null;
  try {
    const host = {
      api: cfg.apiListen.host,
      httpProxy: cfg.httpProxyListen.host,
      socks: cfg.socksListen.host,
      hop: cfg.hopListen.host,
    };
    const held: net.Server[] = [];
    try {
      for (const k of Object.keys(ports) as Array<keyof Ports>) {
        const port = ports[k];
        if (!port) continue;
        const taken = await portTaken(host[k], port, held);
        if (taken) throw new StartError(taken.message, taken.code); // as one process reports it
      }
    } finally {
      await Promise.all(held.map((s) => new Promise((r) => s.close(r))));
    }
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new StartError('workers did not become ready in time')), START_TIMEOUT_MS);
    });
    // The one writer first: a worker's first flush may come as soon as it serves.
    if (!cfg.databaseUrl) {
      store = await openStore(cfg);
      writer = startPrimaryWriter(store, cfg, log);
    }
    // Port 0: the first worker's pick is the port every other worker binds.
    const first = Object.values(ports).includes(0) ? await Promise.race([startOne(), timeout]) : null;
    if (first) ports = portsOf(first);
    const rest = await Promise.race([
      Promise.all(Array.from({ length: cfg.workers - (first ? 1 : 0) }, startOne)),
      timeout,
    ]);
    readies = first ? [first, ...rest] : rest;
    const [one] = readies;
    const same = readies.every(
      (r) => r.api === one!.api && r.httpProxy === one!.httpProxy && r.socks5 === one!.socks5 && r.hop === one!.hop,
    );
    if (!same) throw new StartError(`workers bound different ports (${readies.map((r) => r.api).join(', ')})`);
  } catch (e) {
    stopping = true;
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGKILL');
    await writer?.stop();
    await store?.close();
    const err = e as StartError;
    const out = new Error(err.message) as NodeJS.ErrnoException;
    if (err.code) out.code = err.code;
    throw out;
  } finally {
    clearTimeout(timer);
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
    log.error(
      { event: 'worker_exit', worker: w.process.pid, code, signal, restartInMs: delay },
      'worker exited unexpectedly; replacing it',
    );
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
    // The workers' last records reach the writer before it stops.
    return Promise.all(exits).then(async () => {
      clearTimeout(killer);
      await writer?.stop();
      await store?.close();
    });
  };
  const hangup = (): void => {
    for (const w of Object.values(cluster.workers ?? {})) if (w?.isConnected()) w.send({ type: HANGUP });
  };
  return { ready, shutdown, hangup };
}
