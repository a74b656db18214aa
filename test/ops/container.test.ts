// The container image as an operator builds and runs it, on Podman: built from the Containerfile on a Node 24
// base image (`--build-arg BASE=`), started with its settings by environment only, healthy by its own
// HEALTHCHECK (`proxyd health`), a CONNECT and a SOCKS5 tunnel through it to a loopback target, stopped by
// SIGTERM with a clean exit, its data kept in the volume. And the systemd unit under a real systemd, in a
// privileged container of the same base: started once healthy, its sandbox, proxyd admin, reload and stop.
//
// No registry is reachable from here, so the base is made locally the way node:24-bookworm-slim is made: a
// Debian bookworm minbase (mmdebstrap, from the Debian mirror) with this machine's Node 24 (binary, headers, npm)
// in /usr/local, and this machine's CA bundle for its network's TLS proxy. The image build runs `npm ci` against
// the npm registry and compiles better-sqlite3 in its build stage. Podman keeps the base image and the build's
// layers between runs: the first run takes 4-6 minutes (base ~1 min, apt-get and npm ci ~2-3 min, systemd's
// image ~1 min), later runs about one (the TypeScript build and the containers). Runs as root only; skipped,
// saying why, elsewhere.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/daemon.js';
import { freePort } from '../helpers/net.js';
import { sleep } from '../helpers/wait.js';

const has = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;
const IMAGE = 'localhost/proxyd-test:latest';
const BASE = `localhost/proxyd-test-node:${process.version}`;

/** The version of the Node headers under `dir` (include/node/node_version.h), or null. */
function headersVersion(dir: string): string | null {
  try {
    const h = readFileSync(path.join(dir, 'include/node/node_version.h'), 'utf8');
    const part = (p: string) => new RegExp(`#define NODE_${p}_VERSION (\\d+)`).exec(h)?.[1];
    return `${part('MAJOR')}.${part('MINOR')}.${part('PATCH')}`;
  } catch {
    return null;
  }
}

/**
 * Where this Node's own headers are, which the base image carries as node:24 images do (/usr/local/include/node):
 * npm_config_nodedir when it names them (npm may set it to another Node's), beside the binary (the official
 * tarball's layout), or in the `node` npm package's platform package.
 */
function nodeHeadersDir(): string | null {
  const root = path.resolve(path.dirname(process.execPath), '..');
  const candidates = [
    process.env.npm_config_nodedir,
    root,
    path.join(root, `node_modules/node-${process.platform}-${process.arch}`),
    '/usr/local',
  ];
  return candidates.find((d): d is string => !!d && headersVersion(d) === process.versions.node) ?? null;
}
const NODE_DIR = nodeHeadersDir();

function skipReason(): string | null {
  if (process.getuid?.() !== 0)
    return 'needs root (rootless Podman needs subordinate user ids this machine does not set up)';
  if (!has('podman')) return 'podman is not installed (.ci/run installs it)';
  if (!has('unshare') || !has('nsenter')) return 'unshare and nsenter (util-linux) are needed';
  if (!NODE_DIR)
    return `no headers of Node ${process.versions.node} found (give their directory in npm_config_nodedir)`;
  return null;
}
const skip = skipReason();
if (skip) process.stdout.write(`container test skipped: ${skip}\n`);

/**
 * Podman runs here in a mount namespace of its own, without the cgroup v2 mount of this machine's hybrid
 * layout (podman then uses cgroup v1). One namespace for the whole file, held by a sleeping process: the
 * containers' file systems are mounted in it, so every podman command must run there.
 */
class PodmanNamespace {
  private readonly holder: ChildProcess;
  constructor() {
    this.holder = spawn(
      'unshare',
      [
        '-m',
        '--propagation',
        'private',
        'sh',
        '-c',
        'umount /sys/fs/cgroup/unified 2>/dev/null; echo ready; exec sleep infinity',
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
  }
  ready(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.holder.stdout!.once('data', () => resolve());
      this.holder.once('exit', (code) => reject(new Error(`unshare exited ${code}`)));
    });
  }
  podman(
    args: string[],
    opts: { input?: string; timeoutMs?: number; nice?: boolean } = {},
  ): Promise<{ code: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve, reject) => {
      // A build (apt-get, npm ci, a C++ compile) at low priority: the suite's other worker keeps its CPU.
      const command = [...(opts.nice ? ['nice', '-n', '15'] : []), 'podman', ...args];
      const p = spawn('nsenter', ['-t', String(this.holder.pid), '-m', ...command], {
        stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      p.stdout!.on('data', (b) => (stdout += b));
      p.stderr!.on('data', (b) => (stderr += b));
      const t = setTimeout(() => {
        p.kill('SIGKILL');
        reject(new Error(`podman ${args.join(' ')} took over ${opts.timeoutMs} ms\n${stderr.slice(-3000)}`));
      }, opts.timeoutMs ?? 60_000);
      p.on('exit', (code) => {
        clearTimeout(t);
        resolve({ code, stdout, stderr });
      });
      if (p.stdin) {
        p.stdin.on('error', () => {}); // a command that does not read its input
        p.stdin.end(opts.input);
      }
    });
  }
  close(): void {
    this.holder.kill('SIGKILL');
  }
}

/** The Node 24 base image, made once (kept by Podman between runs). */
async function ensureBase(ns: PodmanNamespace): Promise<string | null> {
  if ((await ns.podman(['image', 'exists', BASE])).code === 0) return null;
  if (!has('mmdebstrap')) return 'mmdebstrap is needed to make the Node 24 base image (.ci/run installs it)';
  const npmDir = path.resolve(
    path.dirname(realpathSync(spawnSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).stdout.trim())),
    '..',
  );
  const ca = '/etc/ssl/certs/ca-certificates.crt';
  const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
  const hook = [
    'mkdir -p "$1/usr/local/bin" "$1/usr/local/include" "$1/usr/local/lib/node_modules" "$1/etc/ssl/certs"',
    `cp ${q(process.execPath)} "$1/usr/local/bin/node"`,
    `cp -r ${q(path.join(NODE_DIR!, 'include/node'))} "$1/usr/local/include/"`,
    `cp -r ${q(npmDir)} "$1/usr/local/lib/node_modules/npm"`,
    'ln -s ../lib/node_modules/npm/bin/npm-cli.js "$1/usr/local/bin/npm"',
    'ln -s ../lib/node_modules/npm/bin/npx-cli.js "$1/usr/local/bin/npx"',
    ...(existsSync(ca) ? [`cp ${ca} "$1${ca}"`] : []),
  ].join(' && ');
  const tar = path.join(tmpdir(), `proxyd-test-base-${process.pid}.tar`);
  try {
    const made = spawnSync(
      'nice',
      [
        '-n',
        '15',
        'mmdebstrap',
        '--variant=minbase',
        '--mode=root',
        `--customize-hook=${hook}`,
        'bookworm',
        tar,
        'http://deb.debian.org/debian',
      ],
      { encoding: 'utf8', timeout: 600_000 },
    );
    if (made.status !== 0) throw new Error(`mmdebstrap failed:\n${made.stderr.slice(-3000)}`);
    const imported = await ns.podman(
      [
        'import',
        ...(existsSync(ca) ? ['--change', `ENV NODE_EXTRA_CA_CERTS=${ca}`] : []),
        '--change',
        'CMD ["node"]',
        tar,
        BASE,
      ],
      { timeoutMs: 300_000 },
    );
    if (imported.code !== 0) throw new Error(`podman import failed:\n${imported.stderr}`);
  } finally {
    spawnSync('rm', ['-f', tar]);
  }
  return null;
}

describe.skipIf(skip !== null)('the container image (Podman)', () => {
  const ns = new PodmanNamespace();
  const name = `proxyd-test-${process.pid}`;
  const volume = `proxyd-test-data-${process.pid}`;
  let baseSkip: string | null = null;
  let target: http.Server;
  const ports = { api: 0, http: 0, socks: 0 };
  const nofile = spawnSync('sh', ['-c', 'ulimit -Hn'], { encoding: 'utf8' }).stdout.trim();
  const limits = ['--ulimit', `nofile=${nofile}:${nofile}`, '--ulimit', 'nproc=4096:4096'];
  const podman = (args: string[], opts?: { input?: string; timeoutMs?: number; nice?: boolean }) =>
    ns.podman(args, opts);

  beforeAll(async () => {
    await ns.ready();
    // Podman installed but unable to run here (no overlay, no runtime): said, and the tests skipped.
    const info = await ns.podman(['info', '--format', '{{.Host.OCIRuntime.Name}}']);
    baseSkip =
      info.code !== 0 ? `podman cannot run here: ${info.stderr.trim().split('\n').at(-1)}` : await ensureBase(ns);
    if (baseSkip) process.stdout.write(`container test skipped: ${baseSkip}\n`);
    target = http.createServer((req, res) => res.end(`hello ${req.socket.remoteAddress}`));
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', () => r()));
    for (const k of Object.keys(ports) as Array<keyof typeof ports>) ports[k] = await freePort();
  }, 900_000);

  afterAll(async () => {
    await podman(['rm', '-f', '-v', name]).catch(() => {});
    await podman(['volume', 'rm', '-f', volume]).catch(() => {});
    ns.close();
    target?.close();
  }, 120_000);

  it('builds from the Containerfile on a Node 24 base given by --build-arg BASE', async (ctx) => {
    if (baseSkip) ctx.skip(baseSkip);
    await podman(['rmi', '-f', IMAGE]); // the last run's, so images do not pile up (its layers stay cached)
    const built = await podman(
      [
        'build',
        '--format',
        'docker',
        '--network',
        'host',
        ...limits,
        '--build-arg',
        `BASE=${BASE}`,
        '-t',
        IMAGE,
        '-f',
        'Containerfile',
        ROOT,
      ],
      { timeoutMs: 900_000, nice: true },
    );
    expect(built.code, built.stderr.slice(-4000)).toBe(0);
    const [image] = JSON.parse((await podman(['image', 'inspect', IMAGE])).stdout) as Array<{
      Config: { User: string; Entrypoint: string[]; Cmd: string[] };
      Healthcheck?: { Test: string[] };
    }>;
    expect(image!.Config).toMatchObject({
      User: 'proxyd',
      Entrypoint: ['/usr/bin/tini', '--', 'proxyd'],
      Cmd: ['serve'],
    });
    // Kept by --format docker (the OCI format has no HEALTHCHECK).
    expect(image!.Healthcheck?.Test).toEqual(['CMD', 'proxyd', 'health']);
  }, 900_000);

  it('runs by environment alone: healthy by its HEALTHCHECK, tunnels CONNECT and SOCKS5, drains on SIGTERM and exits 0', async (ctx) => {
    if (baseSkip) ctx.skip(baseSkip);
    const started = await podman([
      'run',
      '-d',
      '--name',
      name,
      '--network',
      'host',
      ...limits,
      '-v',
      `${volume}:/var/lib/proxyd`,
      '-e',
      `PROXYD_API_LISTEN=127.0.0.1:${ports.api}`,
      '-e',
      `PROXYD_HTTP_PROXY_LISTEN=127.0.0.1:${ports.http}`,
      '-e',
      `PROXYD_SOCKS_LISTEN=127.0.0.1:${ports.socks}`,
      '-e',
      'PROXYD_ALLOW_PRIVATE_TARGETS=1',
      IMAGE,
    ]);
    expect(started.code, started.stderr).toBe(0);
    // Healthy: the image's own check (`proxyd health` in the container), run as the runtime's timer would.
    const until = Date.now() + 90_000;
    let check = await podman(['healthcheck', 'run', name]);
    while (check.code !== 0 && Date.now() < until) {
      await sleep(500);
      check = await podman(['healthcheck', 'run', name]);
    }
    expect(check.code, `${check.stdout}${check.stderr}\n${(await podman(['logs', name])).stderr.slice(-3000)}`).toBe(0);
    expect((await podman(['inspect', '--format', '{{.State.Health.Status}}', name])).stdout.trim()).toBe('healthy');
    const ready = JSON.parse((await podman(['logs', name])).stdout.split('\n')[0]!) as {
      event: string;
      httpProxy: string;
    };
    expect(ready).toMatchObject({ event: 'ready', httpProxy: `127.0.0.1:${ports.http}` });

    // An account and a proxy user, by `proxyd admin` in the container (its data dir from the image's environment).
    const account = await podman(
      [
        'exec',
        '-i',
        name,
        'proxyd',
        'admin',
        'account',
        'create',
        '--email',
        'ops@example.com',
        '--password-stdin',
        '--verified',
      ],
      { input: 'a-console-password\n' },
    );
    expect(account.code, account.stderr).toBe(0);
    const user = await podman([
      'exec',
      name,
      'proxyd',
      'admin',
      'proxy-user',
      'create',
      '--email',
      'ops@example.com',
      '--username',
      'demo',
    ]);
    expect(user.code, user.stderr).toBe(0);
    const password = (JSON.parse(user.stdout) as { password: string }).password;
    const targetUrl = `http://127.0.0.1:${(target.address() as AddressInfo).port}/`;
    // curl runs beside this process's event loop, which serves the target.
    const curl = (proxy: string, extra: string[] = []) =>
      new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
        const c = spawn('curl', ['-sS', '--max-time', '20', ...extra, '-x', proxy, targetUrl], {
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let stdout = '';
        let stderr = '';
        c.stdout.on('data', (b) => (stdout += b));
        c.stderr.on('data', (b) => (stderr += b));
        c.on('exit', (status) => resolve({ status, stdout, stderr }));
      });
    const viaConnect = await curl(`http://demo:${password}@127.0.0.1:${ports.http}`, ['-p']);
    expect(viaConnect).toEqual({ status: 0, stdout: 'hello 127.0.0.1', stderr: '' });
    const viaSocks = await curl(`socks5h://demo:${password}@127.0.0.1:${ports.socks}`);
    expect({ status: viaSocks.status, stdout: viaSocks.stdout }).toEqual({ status: 0, stdout: 'hello 127.0.0.1' });

    // SIGTERM from the runtime (the image's STOPSIGNAL), through tini: drained, `stopped`, exit 0.
    const stopped = await podman(['stop', '--time', '30', name], { timeoutMs: 60_000 });
    expect(stopped.code, stopped.stderr).toBe(0);
    expect((await podman(['inspect', '--format', '{{.State.ExitCode}}', name])).stdout.trim()).toBe('0');
    const logs = (await podman(['logs', name])).stderr
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { event?: string; signal?: string; exitCode?: number });
    expect(logs).toContainEqual(expect.objectContaining({ event: 'shutdown', signal: 'SIGTERM' }));
    expect(logs.at(-1)).toMatchObject({ event: 'stopped', exitCode: 0 });

    // The data lives in the volume: another container of the image (any proxyd command as its arguments) finds the account.
    const again = await podman([
      'run',
      '--rm',
      '--network',
      'host',
      ...limits,
      '-v',
      `${volume}:/var/lib/proxyd`,
      IMAGE,
      'admin',
      'plan',
      'show',
      '--email',
      'ops@example.com',
    ]);
    expect(again.code, again.stderr).toBe(0);
  }, 300_000);

  // packaging/systemd/proxyd.service under a real systemd (PID 1 of a privileged container, its own network): the
  // package installed where `npm install -g` puts it, the unit and env file installed as docs/operations.md says.
  it('the systemd unit under systemd: started once healthy, a dynamic user with one capability, proxyd admin through systemd-run, a tunnel, reload and stop', async (ctx) => {
    if (baseSkip) ctx.skip(baseSkip);
    const dir = mkdtempSync(path.join(tmpdir(), 'proxyd-unit-image-'));
    for (const f of ['proxyd.service', 'proxyd.env'])
      copyFileSync(path.join(ROOT, 'packaging/systemd', f), path.join(dir, f));
    writeFileSync(
      path.join(dir, 'Containerfile'),
      [
        `FROM ${BASE}`,
        'RUN apt-get update && apt-get install -y --no-install-recommends systemd systemd-sysv dbus && rm -rf /var/lib/apt/lists/*',
        `COPY --from=${IMAGE} /opt/proxyd /usr/local/lib/node_modules/proxyctl`,
        'RUN ln -s ../lib/node_modules/proxyctl/bin/proxyd /usr/local/bin/proxyd',
        'COPY proxyd.service /etc/systemd/system/proxyd.service',
        'RUN install -d -m 0755 /etc/proxyd',
        'COPY proxyd.env /etc/proxyd/proxyd.env',
        // The one change for the test: the loopback target is a private one.
        'RUN chmod 0600 /etc/proxyd/proxyd.env && echo PROXYD_ALLOW_PRIVATE_TARGETS=1 >> /etc/proxyd/proxyd.env && systemctl enable proxyd',
        'CMD ["/lib/systemd/systemd"]',
        'STOPSIGNAL SIGRTMIN+3',
      ].join('\n'),
    );
    const unitImage = 'localhost/proxyd-test-unit:latest';
    await podman(['rmi', '-f', unitImage]);
    const built = await podman(
      [
        'build',
        '--format',
        'docker',
        '--network',
        'host',
        ...limits,
        '-t',
        unitImage,
        '-f',
        path.join(dir, 'Containerfile'),
        dir,
      ],
      { timeoutMs: 600_000, nice: true },
    );
    rmSync(dir, { recursive: true, force: true });
    expect(built.code, built.stderr.slice(-3000)).toBe(0);
    const unitName = `${name}-unit`;
    const started = await podman([
      'run',
      '-d',
      '--name',
      unitName,
      '--privileged',
      '--systemd=always',
      ...limits,
      unitImage,
    ]);
    expect(started.code, started.stderr).toBe(0);
    try {
      const sh = (script: string, input?: string) =>
        podman(['exec', ...(input === undefined ? [] : ['-i']), unitName, 'sh', '-c', script], {
          input,
          timeoutMs: 120_000,
        });
      // `systemctl is-active` says active only after ExecStartPost (proxyd health --wait) saw /healthz answer 200.
      const until = Date.now() + 120_000;
      let state = '';
      while (Date.now() < until && state !== 'active' && state !== 'failed') {
        await sleep(500);
        state = (await sh('systemctl is-active proxyd')).stdout.trim();
      }
      expect(state, (await sh('journalctl -u proxyd -o cat --no-pager -n 30')).stdout).toBe('active');
      const log = (await sh('journalctl -u proxyd -o cat --no-pager')).stdout;
      expect(log).toContain('{"status":"ok"}'); // the start-up check's answer, before systemd said Started
      expect(log.indexOf('{"status":"ok"}')).toBeLessThan(log.indexOf('Started proxyd.service'));
      // Its own user, ambient CAP_NET_BIND_SERVICE (bit 10) alone, no new privileges, a system-call filter.
      const status = (
        await sh(
          'grep -E "^(Uid|CapEff|CapAmb|NoNewPrivs|Seccomp):" /proc/$(systemctl show -p MainPID --value proxyd)/status',
        )
      ).stdout;
      const field = (k: string) => new RegExp(`^${k}:\\s+(\\S+)`, 'm').exec(status)?.[1];
      expect(Number(field('Uid'))).toBeGreaterThan(0);
      expect([field('CapEff'), field('CapAmb'), field('NoNewPrivs'), field('Seccomp')]).toEqual([
        '0000000000000400',
        '0000000000000400',
        '1',
        '2',
      ]);

      // proxyd admin as docs/operations.md gives it: the unit's dynamic user, through systemd-run.
      const admin = `systemd-run --quiet --wait --pipe --collect -p DynamicUser=yes -p User=proxyd -p Group=proxyd -p StateDirectory=proxyd -p EnvironmentFile=/etc/proxyd/proxyd.env -E PROXYD_DATA_DIR=/var/lib/proxyd /usr/local/bin/proxyd admin`;
      const account = await sh(
        `${admin} account create --email unit@example.com --password-stdin --verified`,
        'a-console-password\n',
      );
      expect(account.stdout, account.stderr).toMatch(/^\{"account_id":1,/);
      const user = await sh(`${admin} proxy-user create --email unit@example.com --username demo`);
      const password = (JSON.parse(user.stdout) as { password: string }).password;
      expect((await sh('stat -c %u /var/lib/private/proxyd/proxyd.db')).stdout.trim()).toBe(field('Uid'));
      // A CONNECT through the unit's gateway (0.0.0.0:3128 of the env file) to a target in the container.
      const tunnel = await sh(
        `node -e "const http=require('http');const t=http.createServer((q,s)=>s.end('through the unit')).listen(18081,'127.0.0.1',()=>{http.request({host:'127.0.0.1',port:3128,method:'CONNECT',path:'127.0.0.1:18081',headers:{'proxy-authorization':'Basic '+Buffer.from('demo:'+process.argv[1]).toString('base64')}}).on('connect',(r,s)=>{s.end('GET / HTTP/1.1\\r\\nHost: t\\r\\nConnection: close\\r\\n\\r\\n');let b='';s.on('data',d=>b+=d).on('end',()=>{console.log(r.statusCode,b.split('\\r\\n\\r\\n')[1]);t.close()})}).end()})" ${password}`,
      );
      expect(tunnel.stdout.trim(), tunnel.stderr).toBe('200 through the unit');
      // reload: SIGHUP (the admission view reloaded, its thread at nice 19: setpriority is not filtered); stop: drained, exit 0.
      await sh('systemctl reload proxyd');
      const reloaded = async () =>
        (await sh('journalctl -u proxyd -o cat --no-pager')).stdout.includes('"event":"admission_view_reloaded"');
      for (const t0 = Date.now(); !(await reloaded()) && Date.now() - t0 < 20_000;) await sleep(250);
      expect((await sh('journalctl -u proxyd -o cat --no-pager')).stdout).toMatch(
        /"event":"admission_view_reloaded".*"nice":19/,
      );
      await sh('systemctl stop proxyd');
      expect(
        (await sh('systemctl show proxyd -p Result -p ExecMainStatus')).stdout.split('\n').filter(Boolean).sort(),
      ).toEqual(['ExecMainStatus=0', 'Result=success']);
    } finally {
      await podman(['rm', '-f', unitName]);
    }
  }, 900_000);
});
