// What the tunnel benches (bench/setup.mjs, bench/hop.mjs, bench/daemon-ab.mjs, bench/instructions.mjs) share: a
// free loopback port, percentiles over samples, loops that repeat a call for a while, a report's opening fields, the
// CPU seconds of a process tree from /proc, the client side of an upload to the target (bench/target-protocol.mjs's
// U: the bytes, then one "K" back), a daemon's bench user and arguments, its ready line, a deadline, and tunnels with a
// byte echoed (bench/perf-split.mjs too). The target itself is bench/gateway.mjs's target role (`--role target [--host H]
// [--port P]`).
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import { createInterface } from 'node:readline';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A port free on `host` right now (the kernel's pick). */
export async function freePort(host = '127.0.0.1') {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, host, r));
  const port = s.address().port;
  await new Promise((r) => s.close(r));
  return port;
}

/** The p-th percentile of `xs` (nearest rank). */
export const pct = (xs, p) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.max(0, Math.ceil((p / 100) * xs.length) - 1))];
export const med = (xs) => pct(xs, 50);
/** "min–max" with `d` decimals. */
export const range = (xs, d = 2) => `${Math.min(...xs).toFixed(d)}–${Math.max(...xs).toFixed(d)}`;

/** `loops` loops each running `once()` one call after another until `ms` have passed: how many calls finished. */
export async function countFor(ms, loops, once) {
  let done = 0;
  const until = performance.now() + ms;
  await Promise.all(
    Array.from({ length: loops }, async () => {
      while (performance.now() < until) {
        await once();
        done++;
      }
    }),
  );
  return done;
}

/** A report's opening fields: when, the arguments, the machine, and its load average before and after. */
export const runInfo = (argv, loadBefore, loadAfter) => ({
  when: new Date().toISOString(),
  args: argv.join(' '),
  cpu: `${os.cpus().length} x ${os.cpus()[0].model}`,
  node: process.version,
  loadBefore: loadBefore.map((x) => +x.toFixed(2)),
  loadAfter: loadAfter.map((x) => +x.toFixed(2)),
});

const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;

/** CPU seconds a process has used (all its threads), user and system apart, from /proc/<pid>/stat. */
export function cpuOf(pid) {
  const st = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
  return { user: Number(f[11]) / CLK_TCK, system: Number(f[12]) / CLK_TCK };
}

/** CPU seconds (user + system) of the processes `pids` and their live descendants. */
export function treeCpu(pids) {
  const kids = new Map();
  const cpu = new Map();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const st = readFileSync(`/proc/${d}/stat`, 'utf8');
      const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
      const ppid = Number(f[1]);
      if (!kids.has(ppid)) kids.set(ppid, []);
      kids.get(ppid).push(Number(d));
      cpu.set(Number(d), (Number(f[11]) + Number(f[12])) / CLK_TCK);
    } catch {
      /* gone */
    }
  }
  let total = 0;
  const walk = (q) => {
    total += cpu.get(q) ?? 0;
    for (const k of kids.get(q) ?? []) walk(k);
  };
  pids.forEach(walk);
  return total;
}

const UPLOAD_CHUNK = Buffer.alloc(256 * 1024, 0x62);

/**
 * Writes `size` bytes on `socket` (a tunnel whose U<size> is already sent, its handshake done) as fast as it
 * drains; resolves when the target's answer arrives (the socket is then destroyed), rejects on an error.
 */
export function pumpUpload(socket, size) {
  return new Promise((resolve, reject) => {
    socket.removeAllListeners('data');
    socket.on('data', () => (socket.destroy(), resolve()));
    socket.on('error', reject);
    let left = size;
    const pump = () => {
      while (left > 0) {
        const n = Math.min(left, UPLOAD_CHUNK.length);
        left -= n;
        if (!socket.write(n === UPLOAD_CHUNK.length ? UPLOAD_CHUNK : UPLOAD_CHUNK.subarray(0, n)))
          return void socket.once('drain', pump);
      }
    };
    pump();
  });
}

/** An account and its proxy user `bench-user` in a daemon's data dir (`proxyd admin`): the user's credentials. */
export function benchUser(proxyd, dataDir) {
  const admin = (a, input = '') => {
    const r = spawnSync(process.execPath, [proxyd, 'admin', ...a, '--data-dir', dataDir], { input, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(r.stderr);
    return JSON.parse(r.stdout);
  };
  admin(
    ['account', 'create', '--email', 'bench@example.com', '--password-stdin', '--verified'],
    'bench password 123\n',
  );
  return {
    user: 'bench-user',
    password: admin(['proxy-user', 'create', '--email', 'bench@example.com', '--username', 'bench-user']).password,
  };
}

/**
 * `proxyd serve` (the script `proxyd`) as the per-tunnel benches run it: SQLite in `dataDir` (made) with metering and
 * the connection log on, every listener on a free loopback port, private targets allowed (the target is on loopback),
 * then `more`; with the bench user's credentials.
 */
export function benchDaemon(proxyd, dataDir, more = []) {
  mkdirSync(dataDir, { recursive: true });
  const auth = benchUser(proxyd, dataDir);
  const args = [
    proxyd,
    'serve',
    '--data-dir',
    dataDir,
    '--api-listen',
    '127.0.0.1:0',
    '--http-proxy-listen',
    '127.0.0.1:0',
    '--socks-listen',
    '127.0.0.1:0',
    '--allow-private-targets',
    '--log-level',
    'warn',
    ...more,
  ];
  return { auth, args };
}

/** `promise`, or an error with `message` once `ms` have passed (the timer cleared either way). */
export async function within(promise, ms, message) {
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * What a daemon `p` says once it listens: proxyd's JSON line ({ httpProxy, socks5, … }), or the bare relay's `ready`
 * (its CONNECT port `port`, its SOCKS5 port `socksPort`). `p` is killed when neither comes within `ms`.
 */
export function readyOf(p, what, ms, port = 0, socksPort = 0) {
  const said = new Promise((resolve, reject) => {
    p.once('exit', (c) => reject(new Error(`${what} exited ${c}`)));
    createInterface({ input: p.stdout }).on('line', (l) => {
      if (l === 'ready') resolve({ httpProxy: `127.0.0.1:${port}`, socks5: `127.0.0.1:${socksPort}` });
      else if (l.startsWith('{')) resolve(JSON.parse(l));
    });
  });
  return within(said, ms, `${what}: no ready line within ${ms / 1000} s`).catch((e) => {
    p.kill('SIGKILL');
    throw e;
  });
}

/** `n` tunnels through `d` (tunnelOnce), eight at a time. */
export async function tunnelLoops(d, tport, n) {
  let left = n;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (left-- > 0) await tunnelOnce(d, tport, 60_000);
    }),
  );
}

/**
 * One tunnel through `d` ({ label, port, kind: 'connect' | 'socks5', auth: { user, password } | null }) to the
 * target role on `tport`: the handshake (CONNECT with Basic credentials, or SOCKS5 with RFC 1929), one byte
 * echoed, close (bench/daemon-ab.mjs, bench/instructions.mjs).
 */
export function tunnelOnce(d, tport, timeoutMs = 15_000) {
  return new Promise((resolve, reject) => {
    const s = net.connect({ port: d.port, host: '127.0.0.1', noDelay: true });
    let buf = Buffer.alloc(0);
    let open = false;
    let step = 0;
    const a = d.auth;
    s.setTimeout(timeoutMs, () => (s.destroy(), reject(new Error(`${d.label}: tunnel timed out`))));
    s.on('error', reject);
    s.on('connect', () => {
      if (d.kind === 'connect') {
        const h = a
          ? `Proxy-Authorization: Basic ${Buffer.from(`${a.user}:${a.password}`).toString('base64')}\r\n`
          : '';
        s.write(`CONNECT 127.0.0.1:${tport} HTTP/1.1\r\nHost: 127.0.0.1:${tport}\r\n${h}\r\n`);
      } else s.write(Buffer.from([5, 1, 2]));
    });
    s.on('data', (chunk) => {
      if (open) return void (s.destroy(), resolve());
      buf = Buffer.concat([buf, chunk]);
      const begin = () => ((open = true), s.write('Ex')); // E: the target echoes what follows
      if (d.kind === 'connect') {
        if (buf.indexOf('\r\n\r\n') < 0) return;
        if (!buf.toString('latin1', 0, 12).startsWith('HTTP/1.1 200'))
          return reject(new Error(`${d.label}: ${buf.toString('latin1', 0, 60)}`));
        return begin();
      }
      for (;;) {
        if (step === 0 && buf.length >= 2) {
          buf = buf.subarray(2);
          step = 1;
          const u = Buffer.from(a.user);
          const pw = Buffer.from(a.password);
          s.write(Buffer.concat([Buffer.from([1, u.length]), u, Buffer.from([pw.length]), pw]));
        } else if (step === 1 && buf.length >= 2) {
          buf = buf.subarray(2);
          step = 2;
          s.write(Buffer.from([5, 1, 0, 1, 127, 0, 0, 1, tport >> 8, tport & 255]));
        } else if (step === 2 && buf.length >= 10) {
          if (buf[1] !== 0) return reject(new Error(`${d.label}: socks reply ${buf[1]}`));
          return begin();
        } else return;
      }
    });
  });
}
