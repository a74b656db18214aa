// README's quick start, steps 1 to 5, run as a new user runs them: the `sh` blocks as written, in a shell, with
// the substitutions the README itself asks for (the token and proxy password that step 2 printed where
// `<API_KEY>` and `<PROXY_PASSWORD>` stand) and the one it offers for a busy machine: other ports (port 0, the
// ready line's addresses), with proxyctl told where the API is by PROXYCTL_BASE_URL. A step that fails, or
// output that is not what the README says it is, fails the test: the README cannot drift from the programs.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, isolatedCliEnv, tempDir, type Ready } from '../helpers/daemon.js';
import { freePort } from '../helpers/net.js';
import { waitFor } from '../helpers/wait.js';
import { patient } from '../helpers/patience.js';

/** The quick start's `sh` blocks, in order (steps 1 to 5). */
function quickStartBlocks(): string[] {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Quick start'), readme.indexOf('**6. '));
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

/** One block in bash from the repository (`set -e`: a failing line fails the step); stdout, stderr and status. */
function sh(
  script: string,
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn('bash', ['-e', '-c', script], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    p.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('README quick start, as written', () => {
  const started: ChildProcess[] = [];
  afterAll(() => {
    for (const p of started) if (p.exitCode === null) p.kill('SIGTERM');
  });

  it(
    'steps 1 to 5 run and print what the README says',
    async () => {
      const [serve, accounts, curl, proxyctl, check] = quickStartBlocks();
      expect([serve, accounts, curl, proxyctl, check].every(Boolean)).toBe(true);
      const dataDir = path.join(tempDir('proxyd-quick-start-'), 'demo');
      const work = tempDir('proxyctl-quick-start-');
      const demo = (s: string) => s.replaceAll('/tmp/proxyd-demo', dataDir);

      // 1. The daemon, in its own "terminal": on ports of its own (the README's advice for a busy machine).
      const daemon = spawn(
        'bash',
        [
          '-c',
          demo(serve!)
            .split('\n')
            .filter((l) => !l.startsWith('#'))
            .map((l) => l.replace(/^\.\/bin\/proxyd /, 'exec ./bin/proxyd '))
            .join('\n'),
        ],
        {
          cwd: ROOT,
          env: {
            ...process.env,
            PROXYD_API_LISTEN: '127.0.0.1:0',
            PROXYD_HTTP_PROXY_LISTEN: '127.0.0.1:0',
            PROXYD_SOCKS_LISTEN: '127.0.0.1:0',
          },
          stdio: ['ignore', 'pipe', 'ignore'],
          detached: false,
        },
      );
      started.push(daemon);
      const ready = await new Promise<Ready>((resolve, reject) => {
        createInterface({ input: daemon.stdout! }).once('line', (l) => resolve(JSON.parse(l) as Ready));
        daemon.once('exit', (c) => reject(new Error(`proxyd exited ${c}`)));
      });
      expect(ready).toMatchObject({ event: 'ready', api: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/) });
      const api = ready.api;
      const ports = (s: string) =>
        s
          .replaceAll('http://127.0.0.1:8080', api)
          .replaceAll('127.0.0.1:3128', ready.httpProxy!)
          .replaceAll('127.0.0.1:1080', ready.socks5!);
      // Terminal 2: proxyctl told where the API is, as the README says; no keychain on this machine (the file fallback).
      const env = isolatedCliEnv(work, api, { PROXYCTL_BASE_URL: api, PROXYCTL_API_KEY: '' });

      // 2. Account, token, proxy user: one JSON object each; the secrets for the later steps.
      const made = await sh(demo(accounts!), env);
      expect(made.code, made.stderr).toBe(0);
      const lines = made.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, string>);
      expect(lines[0]).toMatchObject({ email: 'you@example.com' });
      const token = lines[1]!.token!;
      const proxyPassword = lines[2]!.password!;
      expect(lines[2]).toMatchObject({ username: 'demo' });
      const secrets = (s: string) =>
        ports(s).replaceAll('<API_KEY>', token).replaceAll('<PROXY_PASSWORD>', proxyPassword);

      // 3. curl: the README's answer.
      const listed = await sh(secrets(curl!), env);
      expect(listed.code, listed.stderr).toBe(0);
      expect(JSON.parse(listed.stdout)).toMatchObject({
        code: 200,
        message: 'success',
        data: { items: [], page: 1, page_size: 20, total: 0 },
      });

      // 4. proxyctl: login, add, list.
      const ctl = await sh(secrets(proxyctl!), env);
      expect(ctl.code, ctl.stderr).toBe(0);
      expect(ctl.stdout).toMatch(/8\.8\.8\.8/);
      expect(ctl.stdout).toMatch(/office/);

      // 5. The echo (on a free port: 8081 may be taken) and the check, with --json to read its stages.
      const echoPort = String(await freePort());
      const [echoLine, checkLine] = secrets(check!).replaceAll('8081', echoPort).split('\n').filter(Boolean);
      expect(echoLine).toMatch(/^node -e .* &$/);
      expect(checkLine).toMatch(/^\.\/bin\/proxyctl check /);
      const five = [
        `${echoLine} ECHO=$!; trap 'kill $ECHO' EXIT`,
        `for i in $(seq 1 200); do (exec 3<>/dev/tcp/127.0.0.1/${echoPort}) 2>/dev/null && break; sleep 0.1; done`,
        `${checkLine} --json`,
      ].join('\n');
      const checked = await sh(five, env);
      expect(checked.code, checked.stdout + checked.stderr).toBe(0);
      const doc = JSON.parse(checked.stdout) as {
        stages: Array<{ name: string; status: string }>;
        egress_ip: string;
        request_id: string;
      };
      expect(doc.stages.map((s) => `${s.name}:${s.status}`)).toEqual([
        'dns:ok',
        'tcp:ok',
        'auth:ok',
        'connect:ok',
        'status:ok',
      ]);
      expect(doc.egress_ip).toBe('127.0.0.2');
      expect(doc.request_id).toMatch(/^[0-9a-f]{12}-/);

      // Stopped with SIGTERM (the README's Ctrl-C): it drains and exits 0.
      daemon.kill('SIGTERM');
      expect(
        await waitFor(
          'the daemon to stop',
          () => (daemon.exitCode !== null ? { code: daemon.exitCode } : null),
          20_000,
        ),
      ).toEqual({ code: 0 });
    },
    patient(120_000),
  );
});
