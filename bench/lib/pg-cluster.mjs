// A PostgreSQL cluster of the bench's own (Debian's postgresql-15 binaries) in a temp dir on a free port,
// so a bench can restart or stop it without touching the machine's server. initdb refuses root: as root the
// server binaries run as `postgres` through runuser.
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

const BIN = '/usr/lib/postgresql/15/bin';

const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString()) || 100;

/** CPU seconds of every process of the postgres user (the bench's cluster is the only one it runs here). */
export function postgresCpu() {
  const uid = execFileSync('id', ['-u', 'postgres']).toString().trim();
  let ticks = 0;
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (!readFileSync(`/proc/${pid}/status`, 'utf8').includes(`\nUid:\t${uid}\t`)) continue;
      const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      /* gone */
    }
  }
  return ticks / CLK_TCK;
}

function pgCtl(cmd, args) {
  const root = process.getuid?.() === 0;
  const r = spawnSync(
    root ? 'runuser' : path.join(BIN, cmd),
    root ? ['-u', 'postgres', '--', path.join(BIN, cmd), ...args] : args,
    { encoding: 'utf8', timeout: 120_000 },
  );
  if (r.status !== 0) throw new Error(`${cmd}: ${r.stderr || r.stdout}`);
}

const freePort = () =>
  new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

/** Starts a throwaway cluster; `settings` are extra `-c` server settings. */
export async function pgCluster(settings = {}) {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyd-bench-pg-'));
  if (process.getuid?.() === 0) {
    const id = (flag) => Number(execFileSync('id', [flag, 'postgres']).toString());
    chownSync(dir, id('-u'), id('-g'));
  }
  const data = path.join(dir, 'data');
  pgCtl('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C']);
  const port = await freePort();
  const conf = { port, listen_addresses: '127.0.0.1', unix_socket_directories: dir, max_connections: 300, ...settings };
  const opts = Object.entries(conf)
    .map(([k, v]) => `-c ${k}=${v}`)
    .join(' ');
  const ctl = (...args) => pgCtl('pg_ctl', ['-D', data, ...args]);
  const start = () => ctl('-l', path.join(dir, 'log'), '-o', opts, '-w', '-t', '60', 'start');
  start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    start,
    /** `immediate`: the server dies as in a crash (clients see their connections cut). */
    stop: (mode = 'immediate') => ctl('-m', mode, '-w', 'stop'),
    destroy() {
      try {
        ctl('-m', 'immediate', '-w', 'stop');
      } catch {
        /* already stopped */
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
