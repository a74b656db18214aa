// docs/cli.md end to end: the built proxyctl against a spawned proxyd on 127.0.0.1 — whitelist sync,
// add --current, check --repeat and --report, and shell completion in a real bash.
// The IPs are public-looking data only: the daemon stores them, nothing ever connects to them.
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  PROXYCTL,
  ROOT,
  admin,
  isolatedCliEnv,
  makeAccount,
  run,
  startDaemon,
  tempDir,
  type Daemon,
  type RunResult,
} from '../helpers/daemon.js';
import { patient } from '../helpers/patience.js';

const PASS = 'e2e-Sync-Pa55word';
const EMAIL = 'sync@example.test';
let daemon: Daemon;
let token: string;
let work: string;
let echo: Server;
let echoPort: number;
/** What the echo answers as the caller's IP. */
let echoIp = '8.8.4.4';
const secrets: string[] = [PASS];
const outputs: RunResult[] = [];

/** n public addresses outside mainland China (DB-IP: US), `${a}.${b}.x.y`. */
function ips(n: number, prefix: string): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}.${Math.floor(i / 250)}.${(i % 250) + 1}`);
}

async function ctl(args: string[], opts: { input?: string; env?: Record<string, string> } = {}): Promise<RunResult> {
  const r = await run(PROXYCTL, args, {
    ...(opts.input !== undefined ? { input: opts.input } : {}),
    env: isolatedCliEnv(work, daemon.api, { PROXYCTL_API_KEY: token, ...opts.env }),
    timeoutMs: 120_000,
  });
  outputs.push(r);
  return r;
}

/** A new token: a fresh per-token rate window, so one step's requests do not count against the next. */
async function newToken(): Promise<void> {
  const r = await admin(daemon.dataDir, ['token', 'reset', '--email', EMAIL]);
  if (r.code !== 0) throw new Error(r.stderr);
  token = r.json.token;
  secrets.push(token, token.split('.')[1]!);
}

async function listed(): Promise<Map<string, string>> {
  const r = await ctl(['whitelist', 'list', '--all', '--json']);
  expect(r.code, r.stderr).toBe(0);
  return new Map((JSON.parse(r.stdout).items as Array<{ ip: string; remark: string }>).map((i) => [i.ip, i.remark]));
}

/** Request log lines of the daemon for add/delete since `from`. */
function writes(from: number): Array<{ route: string; status: number }> {
  return daemon.logs
    .slice(from)
    .map((l) => {
      try {
        return JSON.parse(l) as { msg?: string; route?: string; status?: number };
      } catch {
        return {};
      }
    })
    .filter((l) => l.msg === 'request' && /\/whitelist\/(add|delete)$/.test(l.route ?? ''))
    .map((l) => ({ route: l.route!, status: l.status! }));
}

const fileOf = (name: string, lines: string[]) => {
  const f = path.join(work, name);
  writeFileSync(f, `# desired whitelist\n${lines.join('\n')}\n`);
  return f;
};

beforeAll(async () => {
  work = tempDir('proxyctl-sync-');
  daemon = await startDaemon({ args: ['--allow-private-targets'] });
  ({ token } = await makeAccount(daemon.dataDir, EMAIL));
  secrets.push(token, token.split('.')[1]!);
  const pu = await admin(
    daemon.dataDir,
    ['proxy-user', 'create', '--email', EMAIL, '--username', 'alice', '--password-stdin'],
    `${PASS}\n`,
  );
  if (pu.code !== 0) throw new Error(pu.stderr);
  echo = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ ip: req.url?.startsWith('/caller') ? req.socket.remoteAddress : echoIp }));
  });
  await new Promise<void>((ok) => echo.listen(0, '127.0.0.1', ok));
  echoPort = (echo.address() as AddressInfo).port;
}, patient(60_000));

afterAll(async () => {
  echo?.close();
  await daemon?.stop();
});

const A = ips(1000, '8.8');
const kept = A.slice(300); // 700
const added = ips(200, '9.9');
const B = [...kept.map((ip, i) => (i === 0 ? `${ip}=office` : ip)), ...added];

describe('whitelist sync', { timeout: 120_000 }, () => {
  // Every step lists all pages a few times: a fresh token per step keeps the list limit (60/min) out of the way.
  beforeEach(newToken);

  it('1,000 IPs from empty: 10 paced batches, no 429, exact result', async () => {
    const from = daemon.logs.length;
    const r = await ctl(['whitelist', 'sync', '--file', fileOf('a.txt', A), '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ added: 1000, deleted: 0, unchanged: 0, failed_items: [], dry_run: false });
    const w = writes(from);
    expect(w).toHaveLength(10);
    expect(w.every((x) => x.status === 200)).toBe(true);
    expect(new Set((await listed()).keys())).toEqual(new Set(A));
  });

  it('--dry-run prints the exact plan (300 to delete, 200 to add) and changes nothing', async () => {
    const from = daemon.logs.length;
    const r = await ctl(['whitelist', 'sync', '--file', fileOf('b.txt', B), '--dry-run', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(doc).toMatchObject({ added: 200, deleted: 300, unchanged: 700, failed_items: [], dry_run: true });
    expect(new Set(doc.plan.add)).toEqual(new Set(added));
    expect(new Set(doc.plan.delete)).toEqual(new Set(A.slice(0, 300)));
    expect(doc.plan.update_remarks).toEqual([]);
    const human = await ctl(['whitelist', 'sync', '--file', path.join(work, 'b.txt'), '--dry-run']);
    expect(human.stdout).toMatch(/^plan: 200 to add, 300 to delete, 700 unchanged$/m);
    // The same list in two files, each given with --file: the plan is the same (a repeated --file kept only the last).
    const split = await ctl([
      'whitelist',
      'sync',
      '--file',
      fileOf('b1.txt', B.slice(0, 450)),
      '--file',
      fileOf('b2.txt', B.slice(450)),
      '--dry-run',
      '--json',
    ]);
    expect(split.code, split.stderr).toBe(0);
    expect(JSON.parse(split.stdout)).toMatchObject({ added: 200, deleted: 300, unchanged: 700, dry_run: true });
    expect(human.stdout).toContain('  + 9.9.0.1');
    expect(human.stdout).toMatch(/^ {2}- 8\.8\.[01]\.\d+$/m);
    expect(human.stdout).toContain('… and 290 more');
    expect(writes(from)).toEqual([]);
    expect((await listed()).size).toBe(1000);
  });

  it('a line that is not a dotted-decimal IPv4 (a typo, 008.008.0.1) refuses the whole sync: exit 2, nothing sent, nothing deleted', async () => {
    const from = daemon.logs.length;
    const typo = [
      ...A.slice(1),
      A[0]!
        .split('.')
        .map((o) => o.padStart(3, '0'))
        .join('.'),
      'not-an-ip',
    ];
    for (const extra of [[], ['--dry-run']]) {
      const r = await ctl(['whitelist', 'sync', '--file', fileOf('typo.txt', typo), '--yes', ...extra]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(
        /^error: 2 lines are not an IPv4 address in dotted decimal \(0\d\d\.[^,]+, not-an-ip\): nothing was changed$/m,
      );
    }
    expect(writes(from)).toEqual([]);
    expect((await listed()).size).toBe(1000);
  });

  it('not on a terminal and without --yes, a plan with deletes is refused: exit 2, nothing sent', async () => {
    const from = daemon.logs.length;
    const r = await ctl(['whitelist', 'sync', '--file', path.join(work, 'b.txt')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error: the plan deletes 300 entries: pass --yes/m);
    expect(writes(from)).toEqual([]);
    // stdin as the file: still no terminal to ask on.
    const piped = await ctl(['whitelist', 'sync', '--file', '-'], { input: B.join('\n') });
    expect(piped.code).toBe(2);
  });

  it('--yes applies it: exactly 300 deleted and 200 added; a changed remark stays unless --update-remarks', async () => {
    const from = daemon.logs.length;
    const r = await ctl(['whitelist', 'sync', '--file', path.join(work, 'b.txt'), '--yes', '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      added: 200,
      deleted: 300,
      unchanged: 700,
      failed_items: [],
      dry_run: false,
    });
    const w = writes(from);
    expect(w.filter((x) => x.route.endsWith('/delete'))).toHaveLength(3);
    expect(w.filter((x) => x.route.endsWith('/add'))).toHaveLength(2);
    const now = await listed();
    expect(new Set(now.keys())).toEqual(new Set([...kept, ...added]));
    // b.txt gave kept[0] the remark "office", but it was already listed without one: unchanged.
    expect(now.get(kept[0]!)).toBe('');
  });

  it('a second identical sync sends no add or delete request', async () => {
    const from = daemon.logs.length;
    const r = await ctl(['whitelist', 'sync', '--file', path.join(work, 'b.txt'), '--yes', '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ added: 0, deleted: 0, unchanged: 900, failed_items: [], dry_run: false });
    expect(writes(from)).toEqual([]);
    const human = await ctl(['whitelist', 'sync', '--file', path.join(work, 'b.txt')]);
    expect(human.stdout).toContain('nothing to do');
  });

  it('--update-remarks applies a changed remark as delete + add', async () => {
    const r = await ctl([
      'whitelist',
      'sync',
      '--file',
      path.join(work, 'b.txt'),
      '--update-remarks',
      '--yes',
      '--json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ added: 1, deleted: 1, unchanged: 899, failed_items: [], dry_run: false });
    expect((await listed()).get(kept[0]!)).toBe('office');
  });

  it('killed mid-way, the next run converges on the file', async () => {
    // 1,000 more IPs: 10 add batches; this token first spends 2 adds of its 10 a minute, so the server
    // answers the 9th batch with 429 and proxyctl waits out Retry-After — that is when it is killed.
    expect((await ctl(['whitelist', 'add', '9.11.0.1'])).code).toBe(0);
    expect((await ctl(['whitelist', 'delete', '9.11.0.1'])).code).toBe(0);
    expect((await ctl(['whitelist', 'add', '9.11.0.2'])).code).toBe(0);
    expect((await ctl(['whitelist', 'delete', '9.11.0.2'])).code).toBe(0);
    const C = [...B, ...ips(1000, '9.10')];
    const file = fileOf('c.txt', C);
    const from = daemon.logs.length;
    const proc = spawn(process.execPath, [PROXYCTL, 'whitelist', 'sync', '--file', file, '--yes'], {
      env: { ...process.env, ...isolatedCliEnv(work, daemon.api, { PROXYCTL_API_KEY: token }) },
      stdio: 'ignore',
    });
    const exited = new Promise<void>((ok) => proc.on('exit', () => ok()));
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('no 429 seen')), 60_000);
      const poll = setInterval(() => {
        if (writes(from).some((x) => x.status === 429)) {
          clearTimeout(t);
          clearInterval(poll);
          resolve();
        }
      }, 20);
    });
    proc.kill('SIGKILL');
    await exited;
    const partial = await listed();
    expect(partial.size).toBeGreaterThan(900);
    expect(partial.size).toBeLessThan(1900);

    await newToken();
    const again = await ctl(['whitelist', 'sync', '--file', file, '--yes', '--json']);
    expect(again.code, again.stderr).toBe(0);
    const doc = JSON.parse(again.stdout);
    expect(doc).toMatchObject({ deleted: 0, failed_items: [] });
    expect(doc.added + doc.unchanged).toBe(1900);
    expect(doc.added).toBe(1900 - partial.size);
    expect(new Set((await listed()).keys())).toEqual(new Set(C.map((l) => l.split('=')[0]!)));
  });
});

describe('whitelist add --current', () => {
  it('adds the IP a local echo reports', async () => {
    await newToken();
    echoIp = '8.8.4.4';
    const r = await ctl([
      'whitelist',
      'add',
      '--current',
      '--echo',
      `http://127.0.0.1:${echoPort}/`,
      '--remark',
      'laptop',
      '--json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ success_count: 1, failed_count: 0 });
    expect(r.stderr).toContain('8.8.4.4');
    expect((await listed()).get('8.8.4.4')).toBe('laptop');
  });

  it("default echo is the API's /ip: on loopback that is 127.0.0.1, which the API refuses (exit 3, 10421)", async () => {
    const r = await ctl(['whitelist', 'add', '--current', '--json']);
    expect(r.code).toBe(3);
    expect(JSON.parse(r.stdout).failed_items).toEqual([expect.objectContaining({ ip: '127.0.0.1', code: 10421 })]);
  });

  it('an echo without an IPv4 is an error; --echo without --current is a usage error', async () => {
    echoIp = 'not an ip';
    const r = await ctl(['whitelist', 'add', '--current', '--echo', `http://127.0.0.1:${echoPort}/`]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/did not answer with an IPv4 address/);
    expect((await ctl(['whitelist', 'add', '8.8.8.8', '--echo', `http://127.0.0.1:${echoPort}/`])).code).toBe(2);
  });
});

describe('check --repeat and --report', { timeout: 60_000 }, () => {
  const proxy = (pass = PASS) => `http://alice:${pass}@${daemon.httpProxy}`;
  const target = () => `http://127.0.0.1:${echoPort}/caller`;

  it('--repeat 20 --json: per-stage p50/p95/max, no failures, exit 0', async () => {
    const r = await ctl([
      '--json',
      'check',
      '--proxy',
      proxy(),
      '--target',
      target(),
      '--no-direct',
      '--repeat',
      '20',
      '--interval',
      '0',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(Object.keys(doc)).toEqual(['runs', 'ok', 'failed', 'stages', 'failures_by_stage', 'diagnoses']);
    expect(doc).toMatchObject({ runs: 20, ok: 20, failed: 0, failures_by_stage: {}, diagnoses: [] });
    expect(doc.stages.map((s: { name: string }) => s.name)).toEqual(['dns', 'tcp', 'auth', 'connect', 'status']);
    for (const s of doc.stages) {
      expect(s).toMatchObject({ runs: 20, failed: 0 });
      expect(s.p50_ms).toBeLessThanOrEqual(s.p95_ms);
      expect(s.p95_ms).toBeLessThanOrEqual(s.max_ms);
    }
  });

  it('--repeat with a wrong password: every run fails at auth, counted by stage, exit 6; the table on a pipe', async () => {
    const bad = 'Wr0ng-Sync-Secret';
    secrets.push(bad);
    const r = await ctl([
      'check',
      '--proxy',
      proxy(bad),
      '--target',
      target(),
      '--no-direct',
      '--repeat',
      '5',
      '--interval',
      '10',
    ]);
    expect(r.code).toBe(6);
    expect(r.stdout).toMatch(/5 runs, 0 ok, 5 failed/);
    expect(r.stdout).toMatch(/p50 ms\s*│\s*p95 ms\s*│\s*max ms/);
    expect(r.stdout).toContain('failures by stage: auth 5');
    expect(r.stdout).toMatch(/diagnosis \(5×\): .*rejected the username or password/);
    expect(r.stdout + r.stderr).not.toContain(bad);
    // No progress display off a terminal.
    expect(r.stderr).toBe('');
  });

  it('--report writes redacted, well-formed Markdown: versions, proxy host:port and user, stages, diagnosis, egress, UTC time', async () => {
    const file = path.join(work, 'report.md');
    const r = await ctl(['check', '--proxy', proxy(), '--target', `${target()}?api_key=${token}`, '--report', file]);
    expect(r.code, r.stderr).toBe(0);
    const md = readFileSync(file, 'utf8');
    for (const s of secrets) expect(md.includes(s), 'a secret in the report').toBe(false);
    const version = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version;
    expect(md.startsWith('# proxyctl check report\n')).toBe(true);
    expect(md).toContain(`| proxyctl | ${version} |`);
    expect(md).toContain(`| Node.js | ${process.version} |`);
    expect(md).toContain(`| proxy | http://${daemon.httpProxy} |`);
    expect(md).toContain('| proxy user | alice (password not shown) |');
    expect(md).toMatch(/\| time \(UTC\) \| \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \|/);
    expect(md).toMatch(/\| via the proxy \| 127\.0\.0\.1 \|/);
    for (const h of ['## Stages', '## Diagnosis', '## Egress']) expect(md).toContain(`\n${h}\n`);
    for (const stage of ['dns', 'tcp', 'auth', 'connect', 'status'])
      expect(md).toMatch(new RegExp(`\\n\\| ${stage} \\| ok \\| \\d+\\.\\d \\| `));
    // Every table: a header, a delimiter row, and rows with as many cells as the header.
    const cells = (l: string) => l.replace(/\\\|/g, '').split('|').length;
    const lines = md.split('\n');
    for (let i = 0; i < lines.length; i++) {
      if (!lines[i]!.startsWith('|') || (i > 0 && lines[i - 1]!.startsWith('|'))) continue;
      expect(lines[i + 1], `delimiter row after line ${i}`).toMatch(/^\|(---\|)+$/);
      for (let j = i; j < lines.length && lines[j]!.startsWith('|'); j++)
        expect(cells(lines[j]!)).toBe(cells(lines[i]!));
    }
  });

  it('--report with --repeat adds the run summary', async () => {
    const file = path.join(work, 'report-repeat.md');
    const r = await ctl([
      'check',
      '--proxy',
      proxy(),
      '--target',
      target(),
      '--no-direct',
      '--repeat',
      '3',
      '--interval',
      '0',
      '--report',
      file,
      '--quiet',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const md = readFileSync(file, 'utf8');
    expect(md).toContain('## 3 runs');
    expect(md).toMatch(/\| stage \| runs \| failed \| p50 ms \| p95 ms \| max ms \|/);
  });
});

describe('completion', () => {
  it('bash: `complete -p` registers it and compgen-driven completion follows the command tree', async () => {
    const script = (await ctl(['completion', 'bash'])).stdout;
    const file = path.join(work, 'proxyctl.bash');
    writeFileSync(file, script);
    const probe = `
source ${JSON.stringify(file)}
complete -p proxyctl
t() { COMP_WORDS=("$@"); COMP_CWORD=$((\${#COMP_WORDS[@]} - 1)); _proxyctl; echo "$*=>\${COMPREPLY[*]}"; }
t proxyctl ''
t proxyctl whitelist ''
t proxyctl whitelist s
t proxyctl whitelist sync --d
t proxyctl --json whitelist list --status ''
t proxyctl check --re
t proxyctl completion ''
`;
    const r = spawnSync('bash', ['--norc', '--noprofile', '-c', probe], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    const out = r.stdout.split('\n');
    expect(out[0]).toBe('complete -F _proxyctl proxyctl');
    const got = (prefix: string) =>
      out
        .find((l) => l.startsWith(`${prefix}=>`))!
        .slice(prefix.length + 2)
        .split(' ');
    expect(got('proxyctl ')).toEqual(
      expect.arrayContaining([
        'login',
        'logout',
        'auth',
        'config',
        'whitelist',
        'check',
        'completion',
        '--json',
        '--base-url',
      ]),
    );
    expect(got('proxyctl whitelist ')).toEqual(expect.arrayContaining(['list', 'add', 'delete', 'sync']));
    expect(got('proxyctl whitelist s')).toEqual(['sync']);
    expect(got('proxyctl whitelist sync --d')).toEqual(['--dry-run']);
    expect(got('proxyctl --json whitelist list --status ')).toEqual(['all', 'active', 'disabled']);
    expect(got('proxyctl check --re')).toEqual(['--repeat', '--report']);
    expect(got('proxyctl completion ')).toEqual(expect.arrayContaining(['bash', 'zsh', 'fish']));
  });

  it('zsh and fish scripts come from the same tree', async () => {
    const zsh = (await ctl(['completion', 'zsh'])).stdout;
    expect(zsh.split('\n')[0]).toBe('#compdef proxyctl');
    expect(zsh).toContain('complete -F _proxyctl proxyctl');
    const fish = (await ctl(['completion', 'fish'])).stdout;
    expect(fish).toContain(
      "complete -c proxyctl -n '__fish_seen_subcommand_from whitelist; and not __fish_seen_subcommand_from list add delete sync' -a sync",
    );
    expect(fish).toMatch(/-l update-remarks/);
    expect((await ctl(['completion', 'tcsh'])).code).toBe(2);
  });
});

it('no output of any run contains a token or a password', () => {
  expect(outputs.length).toBeGreaterThan(20);
  for (const r of outputs) for (const s of secrets) expect(r.stdout.includes(s) || r.stderr.includes(s)).toBe(false);
});
