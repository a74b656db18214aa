// Units of docs/cli.md (whitelist sync, check --repeat/--report, completion): the sync plan and its confirmation, repeated-check statistics, the report's redaction, completion vs the tree.
import * as commander from 'commander';
import { afterEach, describe, expect, it } from 'vitest';
import { summarize, percentile } from '../../src/cli/check/repeat.js';
import { renderReport } from '../../src/cli/check/report.js';
import type { CheckResult } from '../../src/cli/check/runner.js';
import { parseProxyUrl } from '../../src/cli/check/urls.js';
import { planSync, runSync } from '../../src/cli/commands/whitelist-sync.js';
import { completionScript } from '../../src/cli/completion.js';
import { buildProgram } from '../../src/cli/main.js';
import { TOKEN, harness } from './helpers/fakes.js';
import { batchReply, startScriptedServer, type ScriptedServer } from './helpers/scripted-server.js';

const item = (ip: string, remark = '', id = 1) => ({ whitelist_id: id, ip, remark, status: 1 as const, created_at: '2026-11-22T10:00:00Z' });

describe('planSync', () => {
  it('add what is missing, delete what is not listed; a changed remark is its own group', () => {
    const plan = planSync([item('8.8.8.8', 'office'), item('8.8.4.4'), item('9.9.9.9', 'old')], [{ ip: '8.8.8.8', remark: 'office' }, { ip: '1.1.1.1' }, { ip: '9.9.9.9', remark: 'new' }]);
    expect(plan).toEqual({ add: [{ ip: '1.1.1.1' }], delete: ['8.8.4.4'], remarkChanges: [{ ip: '9.9.9.9', remark: 'new' }], same: 1 });
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

  for (const [answer, sends] of [['y\n', true], ['n\n', false], ['', false]] as const) {
    it(`answer ${JSON.stringify(answer)}: ${sends ? 'runs the plan' : 'changes nothing'}`, async () => {
      server = await startScriptedServer((req) => (req.path.endsWith('/list') ? { code: 200, data: { items: [item('8.8.4.4')], page: 1, page_size: 100, total: 1 } } : batchReply(req)));
      const h = harness(server.url, { env: { PROXYCTL_API_KEY: TOKEN }, stdin: answer });
      h.io.stdinIsTTY = true;
      const dir = h.dir;
      const file = `${dir}/wl.txt`;
      (await import('node:fs')).writeFileSync(file, '8.8.8.8=office\n');
      const code = await runSync({ ctx: h.ctx, file, dryRun: false, yes: false, updateRemarks: false, retry: 3 }, h.deps);
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
    report: { stages: stages.map(([name, status, ms]) => ({ name: name as never, status, ms, detail: `d ${name}` })), egress_ip: '127.0.0.2', direct_ip: '127.0.0.1', diagnosis },
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
      result([['dns', 'ok', 1], ['tcp', 'ok', 2], ['auth', 'ok', 3]]),
      result([['dns', 'ok', 3], ['tcp', 'fail', 9], ['auth', 'skipped', 0]], 'tcp broke'),
      result([['dns', 'ok', 2], ['tcp', 'fail', 8], ['auth', 'skipped', 0]], 'tcp broke'),
    ]);
    expect(m).toMatchObject({ runs: 3, ok: 1, failed: 2, failures_by_stage: { tcp: 2 }, diagnoses: [{ diagnosis: 'tcp broke', count: 2 }] });
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
    const r = result([['dns', 'ok', 1], ['auth', 'fail', 2]], `rejected ${pass}`);
    r.report.stages[1]!.detail = `echo ${pass} | and a pipe\nand a newline`;
    const md = renderReport({ result: r, proxy, target: `https://echo.example/ip?api_key=${TOKEN}`, versions: { proxyctl: '9.9.9', node: 'v24.0.0', platform: 'linux x64' }, startedAt: new Date(Date.UTC(2026, 10, 22, 10, 0, 0)) });
    expect(md).not.toContain(pass);
    expect(md).not.toContain(TOKEN.split('.')[1]!);
    expect(md).toContain('| target | https://echo.example/ip?… |');
    expect(md).toContain('| proxy | http://proxy.example:3128 |');
    expect(md).toContain('| time (UTC) | 2026-11-22T10:00:00Z |');
    expect(md).toContain('| auth | fail | 2.0 | echo **** \\| and a pipe and a newline |');
  });
});

describe('completion follows the command tree', () => {
  it('every command and option of the program is in the bash and fish scripts', () => {
    const program = buildProgram(commander, async () => {}, { stdout: { write: () => true }, stderr: { write: () => true } });
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
    const { closedPort } = await import('./check/peers.js');
    const { runCheck } = await import('../../src/cli/commands/check.js');
    const h = harness('http://127.0.0.1:1', { globals: { json: true } });
    const updates: string[] = [];
    h.deps.progress = async () => ({ update: (p, verb) => void updates.push(`${verb} ${p.settled}/${p.total} ${p.failed}`), stop: () => void updates.push('stop') });
    const port = await closedPort();
    const code = await runCheck({ ctx: h.ctx, proxy: `http://127.0.0.1:${port}`, target: 'http://127.0.0.1:1/', timeoutMs: 2000, direct: false, repeat: 3, intervalMs: 5 }, h.deps);
    expect(code).toBe(6);
    expect(updates).toEqual(['checking 1/3 1', 'checking 2/3 2', 'checking 3/3 3', 'stop']);
    expect(h.clock.sleeps).toEqual([5, 5]);
    const doc = JSON.parse(h.io.out());
    expect(doc).toMatchObject({ runs: 3, ok: 0, failed: 3, failures_by_stage: { tcp: 3 } });
    expect(doc.diagnoses).toEqual([expect.objectContaining({ count: 3, diagnosis: expect.stringMatching(/^Nothing accepts connections/) })]);
  });
});
