// Real redis-server processes on free loopback ports, and small HTTP helpers for the ops suites.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { recordBody, type Daemon } from '../helpers/daemon.js';
import { freePort } from '../helpers/net.js';
import { sleep } from '../helpers/wait.js';
import { patient } from '../helpers/patience.js';

function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect({ host: '127.0.0.1', port });
    let buf = '';
    const done = (ok: boolean) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(300, () => done(false));
    sock.on('error', () => done(false));
    sock.on('connect', () => sock.write('PING\r\n'));
    sock.on('data', (d) => {
      buf += d.toString();
      if (buf.includes('\r\n')) done(buf.startsWith('+PONG'));
    });
  });
}

export interface RedisServer {
  port: number;
  url: string;
  proc: ChildProcess;
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Starts a new redis-server on the same port (after kill). */
  restart(): Promise<void>;
  stop(): void;
  cont(): void;
}

async function spawnRedis(port: number): Promise<ChildProcess> {
  const proc = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  const until = Date.now() + patient(10_000);
  while (Date.now() < until) {
    if (await ping(port)) return proc;
    if (proc.exitCode !== null) throw new Error(`redis-server exited ${proc.exitCode}`);
    await sleep(50);
  }
  proc.kill('SIGKILL');
  throw new Error('redis-server did not start');
}

export async function startRedis(): Promise<RedisServer> {
  const port = await freePort();
  const r: RedisServer = {
    port,
    url: `redis://127.0.0.1:${port}`,
    proc: await spawnRedis(port),
    async kill(signal = 'SIGKILL') {
      if (r.proc.exitCode !== null || r.proc.signalCode !== null) return;
      const exited = new Promise((res) => r.proc.once('exit', res));
      r.proc.kill('SIGCONT');
      r.proc.kill(signal);
      await exited;
    },
    async restart() {
      r.proc = await spawnRedis(port);
    },
    stop() {
      r.proc.kill('SIGSTOP');
    },
    cont() {
      r.proc.kill('SIGCONT');
    },
  };
  return r;
}

export async function api(base: string, path: string, token: string, body?: unknown) {
  const url = `${base}${path}${path.includes('?') ? '&' : '?'}api_key=${encodeURIComponent(token)}`;
  const t0 = performance.now();
  const res = await fetch(
    url,
    body === undefined
      ? {}
      : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) },
  );
  const json = JSON.parse(recordBody(await res.text())) as any;
  return { status: res.status, json, headers: res.headers, ms: performance.now() - t0 };
}

/** 8.8.x.y public IPs (no mainland-China ranges). */
export const pub = (i: number) => `8.8.${(i >> 8) & 255}.${i & 255}`;

/** Direct children of a pid (cluster workers). */
export function childPids(pid: number): number[] {
  try {
    return execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

export function readyPid(d: Daemon): number {
  return d.proc.pid!;
}
