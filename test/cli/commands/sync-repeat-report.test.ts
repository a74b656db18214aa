// Units of docs/cli.md (whitelist sync, check --repeat/--report, completion): the sync plan and its confirmation, repeated-check statistics, the report's redaction, completion vs the tree.
import * as commander from 'commander';
import { afterEach, describe, expect, it } from 'vitest';
import { summarize, percentile } from '../../../src/cli/check/repeat.js';
import { renderReport } from '../../../src/cli/check/report.js';
import type { CheckResult } from '../../../src/cli/check/runner.js';
import { parseProxyUrl } from '../../../src/cli/check/urls.js';
import { planSync, runSync } from '../../../src/cli/commands/whitelist-sync.js';
import { completionScript } from '../../../src/cli/completion.js';
import { buildProgram } from '../../../src/cli/main.js';
import { TOKEN, harness } from '../helpers/fakes.js';
import { batchReply, startScriptedServer, type ScriptedServer } from '../helpers/scripted-server.js';

const item = (ip: string, remark = '', id = 1) => ({
  whitelist_id: id,
  ip,
  remark,
  status: 1 as const,
  created_at: '2026-11-22T10:00:00Z',
});

describe('planSync', () => {
  it('add what is missing, delete what is not listed; a changed remark is its own group', () => {
    const plan = planSync(
      [item('8.8.8.8', 'office'), item('8.8.4.4'), item('9.9.9.9', 'old')],
      [{ ip: '8.8.8.8', remark: 'office' }, { ip: '1.1.1.1' }, { ip: '9.9.9.9', remark: 'new' }],
    );
    expect(plan).toEqual({
      add: [{ ip: '1.1.1.1' }],
      delete: ['8.8.4.4'],
      remarkChanges: [{ ip: '9.9.9.9', remark: 'new' }],
      same: 1,
    });
    // No remark in the file means "no remark".
    expect(planSync([item('8.8.8.8', 'office')], [{ ip: '8.8.8.8' }]).remarkChanges).toEqual([{ ip: '8.8.8.8' }]);
    expect(planSync([], [])).toEqual({ add: [], delete: [], remarkChanges: [], same: 0 });
  });
});

describe('sync on a terminal asks first', () => {
  let server: ScriptedServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  for (const [answer, sends] of [
    ['y\n', true],
    ['n\n', false],
    ['', false],
  ] as const) {
    it(`answer ${JSON.stringify(answer)}: ${sends ? 'runs the plan' : 'changes nothing'}`, async () => {
      server = await startScriptedServer((req) =>
        req.path.endsWith('/list')
          ? { code: 200, data: { items: [item('8.8.4.4')], page: 1, page_size: 100, total: 1 } }
          : batchReply(req),
      );
      const h = harness(server.url, { env: { PROXYCTL_API_KEY: TOKEN }, stdin: answer });
      h.io.stdinIsTTY = true;
      const dir = h.dir;
      const file = `${dir}/wl.txt`;
      (await import('node:fs')).writeFileSync(file, '8.8.8.8=office\n');
      const code = await runSync(
        { ctx: h.ctx, files: [file], dryRun: false, yes: false, updateRemarks: false, retry: 3 },
        h.deps,
      );
      expect(code).toBe(0);
      expect(h.io.err()).toContain('Add 1 and delete 1 whitelist entries? [y/N]');
      const writes = server.requests.filter((r) => !r.path.endsWith('/list')).map((r) => r.path.split('/').pop());
      expect(writes).toEqual(sends ? ['delete', 'add'] : []);
    });
  }
});

const result = (stages: Array<[string, 'ok' | 'fail' | 'skipped', number]>, diagnosis = 'fine'): CheckResult => {
  const failed = stages.find(([, s]) => s === 'fail');
  return {
    report: {
      stages: stages.map(([name, status, ms]) => ({ name: name as never, status, ms, detail: `d ${name}` })),
      egress_ip: '127.0.0.2',
      direct_ip: '127.0.0.1',
      diagnosis,
      request_id: null,
    },
    ok: !failed,
    failure: failed ? { stage: failed[0] as never, cause: { kind: 'timeout', ms: 1 } } : null,
    proxy: 'http://alice:****@127.0.0.1:3128',
    target: 'http://127.0.0.1/ip',
  };
};

describe('repeat statistics', () => {
  it('nearest-rank percentiles', () => {
    const v = Array.from({ length: 20 }, (_, i) => i + 1);
    expect([percentile(v, 50), percentile(v, 95), percentile(v, 100)]).toEqual([10, 19, 20]);
    expect(percentile([], 50)).toBeNull();
    expect(percentile([7], 95)).toBe(7);
  });

  it('per stage over the runs it ran in; failures by stage; distinct diagnoses', () => {
    const m = summarize([
      result([
        ['dns', 'ok', 1],
        ['tcp', 'ok', 2],
        ['auth', 'ok', 3],
      ]),
      result(
        [
          ['dns', 'ok', 3],
          ['tcp', 'fail', 9],
          ['auth', 'skipped', 0],
        ],
        'tcp broke',
      ),
      result(
        [
          ['dns', 'ok', 2],
          ['tcp', 'fail', 8],
          ['auth', 'skipped', 0],
        ],
        'tcp broke',
      ),
    ]);
    expect(m).toMatchObject({
      runs: 3,
      ok: 1,
      failed: 2,
      failures_by_stage: { tcp: 2 },
      diagnoses: [{ diagnosis: 'tcp broke', count: 2 }],
    });
    expect(m.stages).toEqual([
      { name: 'dns', runs: 3, failed: 0, p50_ms: 2, p95_ms: 3, max_ms: 3 },
      { name: 'tcp', runs: 3, failed: 2, p50_ms: 8, p95_ms: 9, max_ms: 9 },
      { name: 'auth', runs: 1, failed: 0, p50_ms: 3, p95_ms: 3, max_ms: 3 },
    ]);
  });
});

describe('report', () => {
  it('never holds the password (even when a detail echoes it); the target loses its query; cells are escaped', () => {
    const pass = 'S3cret|Pass';
    const proxy = parseProxyUrl(`http://alice:${encodeURIComponent(pass)}@proxy.example:3128`);
    const r = result(
      [
        ['dns', 'ok', 1],
        ['auth', 'fail', 2],
      ],
      `rejected ${pass}`,
    );
    r.report.stages[1]!.detail = `echo ${pass} | and a pipe\nand a newline`;
    const md = renderReport({
      result: r,
      proxy,
      target: `https://echo.example/ip?api_key=${TOKEN}`,
      versions: { proxyctl: '9.9.9', node: 'v24.0.0', platform: 'linux x64' },
      startedAt: new Date(Date.UTC(2026, 10, 22, 10, 0, 0)),
    });
    expect(md).not.toContain(pass);
    expect(md).not.toContain(TOKEN.split('.')[1]!);
    expect(md).toContain('| target | https://echo.example/ip?… |');
    expect(md).toContain('| proxy | http://proxy.example:3128 |');
    expect(md).toContain('| time (UTC) | 2026-11-22T10:00:00Z |');
    expect(md).toContain('| auth | fail | 2.0 | echo **** \\| and a pipe and a newline |');
  });

  it('a password standing in the target URL (a path segment, encoded or not) is masked there too', () => {
    const pass = 'p@ss w0rd';
    const proxy = parseProxyUrl(`http://alice:${encodeURIComponent(pass)}@proxy.example:3128`);
    const r = result([['dns', 'ok', 1]]);
    const md = renderReport({
      result: r,
      proxy,
      target: `http://echo.example/${encodeURIComponent(pass)}/x`,
      versions: { proxyctl: '9.9.9', node: 'v24.0.0', platform: 'linux x64' },
      startedAt: new Date(),
    });
    expect(md).not.toContain(encodeURIComponent(pass));
    expect(md).toContain('| target | http://echo.example/****/x |');
  });
});

describe('completion follows the command tree', () => {
  it('every command and option of the program is in the bash and fish scripts', () => {
    const program = buildProgram(commander, async () => {}, {
      stdout: { write: () => true },
      stderr: { write: () => true },
    });
    const bash = completionScript('bash', program);
    const fish = completionScript('fish', program);
    const walk = (c: commander.Command): commander.Command[] => [c, ...c.commands.flatMap(walk)];
    for (const c of walk(program)) {
      if (c !== program) {
        expect(bash).toContain(c.name());
        expect(fish).toContain(`-a ${c.name()}`);
      }
      for (const o of c.options) {
        expect(bash, o.long).toContain(o.long!);
        expect(fish, o.long).toContain(`-l ${o.long!.slice(2)}`);
      }
    }
  });
});

describe('check --repeat through the command', () => {
  it('runs N times, draws progress when deps give a display, counts failures by stage, exit 6', async () => {
    const { closedPort } = await import('../check/peers.js');
    const { runCheck } = await import('../../../src/cli/commands/check.js');
    const h = harness('http://127.0.0.1:1', { globals: { json: true } });
    const updates: string[] = [];
    h.deps.progress = async () => ({
      update: (p, verb) => void updates.push(`${verb} ${p.settled}/${p.total} ${p.failed}`),
      stop: () => void updates.push('stop'),
    });
    const port = await closedPort();
    const code = await runCheck(
      {
        ctx: h.ctx,
        proxy: `http://127.0.0.1:${port}`,
        target: 'http://127.0.0.1:1/',
        timeoutMs: 2000,
        direct: false,
        repeat: 3,
        intervalMs: 5,
      },
      h.deps,
    );
    expect(code).toBe(6);
    expect(updates).toEqual(['checking 1/3 1', 'checking 2/3 2', 'checking 3/3 3', 'stop']);
    expect(h.clock.sleeps).toEqual([5, 5]);
    const doc = JSON.parse(h.io.out());
    expect(doc).toMatchObject({ runs: 3, ok: 0, failed: 3, failures_by_stage: { tcp: 3 } });
    expect(doc.diagnoses).toEqual([
      expect.objectContaining({ count: 3, diagnosis: expect.stringMatching(/^Nothing accepts connections/) }),
    ]);
  });
});

describe('check --repeat interrupted by Ctrl-C', () => {
  it('stops after the run in progress, prints the summary of the runs done and writes the report', async () => {
    const { readFileSync, mkdtempSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const path = await import('node:path');
    const { closedPort } = await import('../check/peers.js');
    const { runCheck } = await import('../../../src/cli/commands/check.js');
    const h = harness('http://127.0.0.1:1', { globals: { json: true } });
    let fire: (() => void) | undefined;
    let listening = false;
    h.deps.onInterrupt = (handler) => {
      fire = handler;
      listening = true;
      return () => void (listening = false);
    };
    // Ctrl-C during the second pause: the runs done so far are what the user wanted to see.
    const sleep = h.deps.clock.sleep;
    let pauses = 0;
    h.deps.clock = {
      now: () => h.clock.now(),
      sleep: async (ms, signal) => (++pauses === 2 ? fire!() : undefined, sleep(ms, signal)),
    };
    const report = path.join(mkdtempSync(path.join(tmpdir(), 'proxyctl-report-')), 'r.md');
    const port = await closedPort();
    const code = await runCheck(
      {
        ctx: h.ctx,
        proxy: `http://127.0.0.1:${port}`,
        target: 'http://127.0.0.1:1/',
        timeoutMs: 2000,
        direct: false,
        repeat: 1000,
        intervalMs: 5,
        report,
      },
      h.deps,
    );
    expect(code).toBe(6);
    expect(JSON.parse(h.io.out())).toMatchObject({ runs: 2, ok: 0, failed: 2, failures_by_stage: { tcp: 2 } });
    expect(readFileSync(report, 'utf8')).toMatch(/Nothing accepts connections/);
    expect(h.io.err()).toContain('warning: interrupted');
    expect(listening).toBe(false);
  });
});

describe('check --report to a path that cannot be written', () => {
  it('is a usage error (exit 2) before the first run, not an error after all of them', async () => {
    const { closedPort } = await import('../check/peers.js');
    const { runCheck } = await import('../../../src/cli/commands/check.js');
    const { UsageError } = await import('../../../src/cli/errors.js');
    const h = harness('http://127.0.0.1:1', { globals: { json: true } });
    const port = await closedPort();
    const run = runCheck(
      {
        ctx: h.ctx,
        proxy: `http://127.0.0.1:${port}`,
        target: 'http://127.0.0.1:1/',
        timeoutMs: 2000,
        direct: false,
        repeat: 3,
        intervalMs: 5,
        report: '/nonexistent-dir/r.md',
      },
      h.deps,
    );
    await expect(run).rejects.toThrow(UsageError);
    await expect(run).rejects.toMatchObject({
      exitCode: 2,
      message: 'cannot write --report /nonexistent-dir/r.md: ENOENT',
    });
    expect(h.clock.sleeps).toEqual([]);
    expect(h.io.out()).toBe('');
  });
});

describe('check --repeat shows the egress IPs the runs left from', () => {
  const withEgress = (ip: string | null, ok = true): CheckResult => {
    const r = result(
      ok
        ? [
            ['dns', 'ok', 1],
            ['status', 'ok', 2],
          ]
        : [
            ['dns', 'ok', 1],
            ['tcp', 'fail', 2],
          ],
      ok ? 'fine' : 'tcp broke',
    );
    return { ...r, report: { ...r.report, egress_ip: ip } };
  };

  it('counts runs per egress IP, most used first; failed runs without an egress are left out', async () => {
    const { egressCounts } = await import('../../../src/cli/check/repeat.js');
    const runs = [withEgress('127.0.0.3'), withEgress('127.0.0.2'), withEgress('127.0.0.2'), withEgress(null, false)];
    expect(egressCounts(runs)).toEqual([
      { ip: '127.0.0.2', count: 2 },
      { ip: '127.0.0.3', count: 1 },
    ]);
  });

  it('the report lists them under the run summary (a sticky session shows one IP, rotation many)', () => {
    const runs = [withEgress('127.0.0.5'), withEgress('127.0.0.5')];
    const md = renderReport({
      result: runs[1]!,
      proxy: parseProxyUrl('http://alice-session-s1:pw-secret-1@proxy.example:3128'),
      target: 'http://echo.example/ip',
      versions: { proxyctl: '9.9.9', node: 'v24.0.0', platform: 'linux x64' },
      startedAt: new Date(0),
      summary: summarize(runs),
      egress: [{ ip: '127.0.0.5', count: 2 }],
    });
    expect(md).toContain('| egress IP via the proxy | runs |\n|---|---|\n| 127.0.0.5 | 2 |');
    expect(md).not.toContain('pw-secret-1');
  });
});

describe('check --repeat through the command, on a terminal-less stdout', () => {
  it('prints the egress IP line under the stage table', async () => {
    const { httpEcho, httpProxyPeer } = await import('../check/peers.js');
    const { runCheck } = await import('../../../src/cli/commands/check.js');
    const echo = await httpEcho();
    const proxy = await httpProxyPeer({ kind: 'tunnel', user: 'alice', pass: 'pw-secret-1', egress: '127.0.0.2' });
    try {
      const h = harness('http://127.0.0.1:1');
      const code = await runCheck(
        {
          ctx: h.ctx,
          proxy: `http://alice:pw-secret-1@127.0.0.1:${proxy.port}`,
          target: `http://127.0.0.1:${echo.port}/ip`,
          timeoutMs: 5000,
          direct: false,
          repeat: 2,
          intervalMs: 1,
        },
        h.deps,
      );
      expect(code).toBe(0);
      expect(h.io.out()).toContain('egress IP via proxy: 127.0.0.2 (2×)');
      // The statistics are drawn as one run's stages are: compact (one rule, under the head), numbers on the right.
      const one = harness('http://127.0.0.1:1');
      expect(
        await runCheck(
          {
            ctx: one.ctx,
            proxy: `http://alice:pw-secret-1@127.0.0.1:${proxy.port}`,
            target: `http://127.0.0.1:${echo.port}/ip`,
            timeoutMs: 5000,
            direct: false,
          },
          one.deps,
        ),
      ).toBe(0);
      const tableOf = (text: string) => text.split('\n').filter((l) => /^[┌├└│]/.test(l));
      const [single, repeated] = [tableOf(one.io.out()), tableOf(h.io.out())];
      for (const t of [single, repeated]) expect(t.filter((l) => l.startsWith('├'))).toHaveLength(1);
      expect(single[0]![0]).toBe(repeated[0]![0]);
      const tcp = repeated
        .find((l) => l.startsWith('│ tcp'))!
        .split('│')
        .map((c) => c);
      expect(tcp[2]).toMatch(/^ +2 $/); // runs, right-aligned under its head
      expect(tcp[2]!.length).toBe(repeated[1]!.split('│')[2]!.length);
    } finally {
      await Promise.all([echo.close(), proxy.close()]);
    }
  });
});

describe('check --repeat with Ctrl-C during its last run', () => {
  it('leaves nothing undone: the command ends as it would have (0), not 130', async () => {
    const net = await import('node:net');
    const { httpEcho, httpProxyPeer } = await import('../check/peers.js');
    const { runCheck } = await import('../../../src/cli/commands/check.js');
    const echo = await httpEcho();
    const proxy = await httpProxyPeer({ kind: 'tunnel', user: 'alice', pass: 'pw-secret-1', egress: '127.0.0.2' });
    const h = harness('http://127.0.0.1:1');
    let fire: (() => void) | undefined;
    h.deps.onInterrupt = (handler) => ((fire = handler), () => {});
    // A relay in front of the proxy: the second run's connection is Ctrl-C'd as it arrives.
    let connections = 0;
    const relay = net.createServer((c) => {
      if (++connections === 2) fire!();
      const p = net.connect(proxy.port, '127.0.0.1');
      c.pipe(p).pipe(c);
      c.on('error', () => p.destroy());
      p.on('error', () => c.destroy());
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    try {
      const port = (relay.address() as import('node:net').AddressInfo).port;
      const code = await runCheck(
        {
          ctx: h.ctx,
          proxy: `http://alice:pw-secret-1@127.0.0.1:${port}`,
          target: `http://127.0.0.1:${echo.port}/ip`,
          timeoutMs: 5000,
          direct: false,
          repeat: 2,
          intervalMs: 1,
        },
        h.deps,
      );
      expect(connections).toBe(2);
      expect(h.io.err()).toContain('warning: interrupted');
      expect(code).toBe(0);
    } finally {
      relay.close();
      await Promise.all([echo.close(), proxy.close()]);
    }
  });
});

describe('sync --update-remarks', () => {
  it('adds remark updates back first, so no batch of new IPs waits while they are out of the whitelist', async () => {
    const { ipsOf } = await import('../helpers/scripted-server.js');
    const server = await startScriptedServer((req) =>
      req.path.endsWith('/list')
        ? {
            code: 200,
            data: { items: [item('9.9.9.9', 'old', 2), item('8.8.4.4', '', 1)], page: 1, page_size: 100, total: 2 },
          }
        : batchReply(req),
    );
    try {
      const h = harness(server.url, { env: { PROXYCTL_API_KEY: TOKEN } });
      const file = `${h.dir}/wl.txt`;
      const news = Array.from({ length: 150 }, (_, i) => `8.8.${i >> 8}.${(i & 255) + 1}`);
      (await import('node:fs')).writeFileSync(file, `${news.join('\n')}\n9.9.9.9=new\n`);
      const code = await runSync(
        { ctx: h.ctx, files: [file], dryRun: false, yes: true, updateRemarks: true, retry: 3 },
        h.deps,
      );
      expect(code).toBe(0);
      const writes = server.requests
        .filter((r) => !r.path.endsWith('/list'))
        .map((r) => [r.path.split('/').pop(), ipsOf(r)] as const);
      expect(
        writes.map(([op, ips]) => `${op} ${ips.length}`),
        JSON.stringify(writes),
      ).toEqual(['delete 2', 'add 100', 'add 51']);
      expect(writes[0]![1]).toEqual(['8.8.4.4', '9.9.9.9']); // the remark update is deleted last
      expect(writes[1]![1][0]).toBe('9.9.9.9'); // and added back in the very next request
    } finally {
      await server.close();
    }
  });
});
