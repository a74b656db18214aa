// What ships for operators beside the programs: the Containerfile's shape, the systemd unit and its environment
// file (systemd-analyze verify and security), the Prometheus alerts (promtool check and test rules) and the
// Grafana dashboard, and every metric either of them names served by a running daemon's /metrics (one process,
// and --workers 2). test/ops/container.test.ts builds and runs the image; global-install.test.ts the npm package.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/daemon/process/main.js';
import { toServeConfig } from '../../src/daemon/process/config.js';
import { PROXYD, ROOT, startDaemon, type Daemon } from '../helpers/daemon.js';

const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');
const has = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;
const serveCommand = () => buildProgram().commands.find((c) => c.name() === 'serve')!;
/** The PROXYD_* variables `proxyd serve` reads: its options' and those it reads without a flag. */
const serveEnv = () =>
  new Set([
    ...serveCommand()
      .options.map((o) => o.envVar)
      .filter(Boolean),
    'PROXYD_ALLOW_PRIVATE_TARGETS',
    'PROXYD_ALLOW_PRIVATE_WEBHOOKS',
    'PROXYD_SHARED_DATA_DIR',
    'PROXYD_DNS_SERVERS',
  ] as string[]);

/** A Containerfile's instructions, continuation lines joined, comments dropped, with the stage each is in (0-based). */
function instructions(text: string): Array<{ op: string; args: string; stage: number }> {
  const out: Array<{ op: string; args: string; stage: number }> = [];
  let stage = -1;
  for (const line of text.replace(/\\\n(\s*#.*\n)*/g, ' ').split('\n')) {
    const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (!m || line.trimStart().startsWith('#')) continue;
    const op = m[1]!.toUpperCase();
    if (op === 'FROM') stage++;
    out.push({ op, args: m[2]!.replace(/\s+/g, ' ').trim(), stage });
  }
  return out;
}

/**
 * The metric names a PromQL expression (or a Grafana query) reads: every identifier that is not a function,
 * a keyword, a label, a string, a duration or a Grafana variable. `label_values(metric, label)` names its metric.
 */
export function metricNames(expr: string): string[] {
  let s = expr.replace(/label_values\(\s*([A-Za-z_:][\w:]*(?:\{[^}]*\})?)\s*,\s*[A-Za-z_]\w*\s*\)/g, '$1');
  s = s.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""');
  s = s.replace(/\$\{?\w+\}?/g, ' ');
  s = s.replace(/\{[^}]*\}/g, ' ').replace(/\[[^\]]*\]/g, ' ');
  s = s.replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const keywords = new Set([
    'and',
    'or',
    'unless',
    'bool',
    'offset',
    'by',
    'without',
    'on',
    'ignoring',
    'group_left',
    'group_right',
    'inf',
    'nan',
    'atan2',
  ]);
  const names: string[] = [];
  for (const m of s.matchAll(/(?<![\w.:])[A-Za-z_:][\w:]*/g)) {
    const after = s.slice(m.index! + m[0].length).trimStart();
    if (after.startsWith('(') || keywords.has(m[0].toLowerCase())) continue;
    names.push(m[0]);
  }
  return [...new Set(names)];
}

/** The `expr:` of every alerting rule in a rule file (a one-line value or a `|` block), and the alert names. */
function alertRules(text: string): Array<{ alert: string; expr: string }> {
  const lines = text.split('\n');
  const out: Array<{ alert: string; expr: string }> = [];
  for (let i = 0; i < lines.length; i++) {
    const a = /^\s*- alert:\s*(\S+)/.exec(lines[i]!);
    if (a) out.push({ alert: a[1]!, expr: '' });
    const e = /^(\s*)expr:\s*(.*)$/.exec(lines[i]!);
    if (!e || !out.length) continue;
    if (e[2] === '|' || e[2] === '>') {
      const block: string[] = [];
      while (i + 1 < lines.length && (lines[i + 1]!.trim() === '' || lines[i + 1]!.search(/\S/) > e[1]!.length))
        block.push(lines[++i]!.trim());
      out[out.length - 1]!.expr = block.join(' ').trim();
    } else out[out.length - 1]!.expr = e[2]!;
  }
  return out;
}

/** Every PromQL expression of a Grafana dashboard: its panels' targets and its query variables. */
function dashboardQueries(dash: unknown): string[] {
  const out: string[] = [];
  const walk = (v: unknown, key = ''): void => {
    if (Array.isArray(v)) v.forEach((x) => walk(x));
    else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) walk(x, k);
    else if (typeof v === 'string' && (key === 'expr' || key === 'query' || key === 'definition') && /[a-z]_/.test(v))
      out.push(v);
  };
  walk(dash);
  return out;
}

/** Metric families a /metrics text declares (`# TYPE name type`), with their types. */
function families(text: string): Map<string, string> {
  return new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
}

/** Whether a series name read by a query is served: a family, or a histogram's `_bucket`/`_sum`/`_count`. */
function served(name: string, fams: Map<string, string>): boolean {
  if (fams.has(name)) return true;
  const m = /^(.*)_(bucket|sum|count)$/.exec(name);
  return !!m && ['histogram', 'summary'].includes(fams.get(m[1]!) ?? '');
}

describe('reading PromQL for metric names', () => {
  it('keeps the series, drops functions, labels, strings, durations, keywords and Grafana variables', () => {
    expect(
      metricNames(
        'sum by (reason) (rate(proxyd_gateway_refusals_total{job=~"$job", reason="no_exit"}[$__rate_interval])) / on (instance) group_left proxyd_x > 0.05 and bool up offset 5m',
      ),
    ).toEqual(['proxyd_gateway_refusals_total', 'proxyd_x', 'up']);
    expect(metricNames('histogram_quantile(0.99, sum by (le) (rate(a_bucket[5m]))) * 1e3')).toEqual(['a_bucket']);
    expect(metricNames('label_values(proxyd_process_cpu_seconds_total{job=~"$job"}, instance)')).toEqual([
      'proxyd_process_cpu_seconds_total',
    ]);
    expect(metricNames('max by (instance, exit) (proxyd_hop_links) == 0')).toEqual(['proxyd_hop_links']);
  });
});

describe('Containerfile', () => {
  const text = read('Containerfile');
  const ins = instructions(text);
  const last = Math.max(...ins.map((i) => i.stage));
  const final = ins.filter((i) => i.stage === last);

  it('builds in stages on ARG BASE (node:24-bookworm-slim unless told), the last one without the compilers', () => {
    expect(ins[0]).toMatchObject({ op: 'ARG', args: 'BASE=node:24-bookworm-slim', stage: -1 });
    const froms = ins.filter((i) => i.op === 'FROM');
    expect(froms.length).toBeGreaterThanOrEqual(2);
    expect(froms[0]!.args).toBe('${BASE} AS build');
    expect(froms.at(-1)!.args).toBe('${BASE}');
    expect(final.some((i) => i.op === 'RUN' && /apt-get|g\+\+|make/.test(i.args))).toBe(false);
    expect(
      final
        .filter((i) => i.op === 'COPY')
        .every((i) => i.args.startsWith('--from=build') || i.args === 'LICENSE README.md ./'),
    ).toBe(true);
  });

  it('runs as a user of its own under an init, the data dir a volume, and its health checked by `proxyd health` (no curl)', () => {
    const user = final.filter((i) => i.op === 'USER').at(-1)?.args;
    expect(user).toBe('proxyd');
    expect(final.some((i) => i.op === 'RUN' && /useradd --uid 10001 .*proxyd/.test(i.args))).toBe(true);
    expect(final.find((i) => i.op === 'ENTRYPOINT')?.args).toBe('["/usr/bin/tini", "--", "proxyd"]');
    expect(final.find((i) => i.op === 'CMD')?.args).toBe('["serve"]');
    expect(final.find((i) => i.op === 'VOLUME')?.args).toBe('/var/lib/proxyd');
    expect(final.find((i) => i.op === 'HEALTHCHECK')?.args).toMatch(/ CMD \["proxyd", "health"\]$/);
    expect(text).not.toMatch(/curl|wget/i);
  });

  it('sets every listener by environment to 0.0.0.0 and exposes exactly their ports; every variable is one proxyd reads', () => {
    const env = new Map([
      ...final
        .filter((i) => i.op === 'ENV')
        .flatMap((i) => i.args.split(' ').map((kv) => kv.split('=') as [string, string])),
    ]);
    for (const name of env.keys()) expect(serveEnv(), name).toContain(name);
    expect(env.get('PROXYD_DATA_DIR')).toBe('/var/lib/proxyd');
    const listens = ['PROXYD_API_LISTEN', 'PROXYD_HTTP_PROXY_LISTEN', 'PROXYD_SOCKS_LISTEN', 'PROXYD_HOP_LISTEN'].map(
      (v) => env.get(v),
    );
    for (const l of listens) expect(l).toMatch(/^0\.0\.0\.0:\d+$/);
    const exposed = final
      .find((i) => i.op === 'EXPOSE')!
      .args.split(' ')
      .map((p) => p.replace('/tcp', ''));
    expect(exposed.sort()).toEqual(listens.map((l) => l!.split(':')[1]!).sort());
  });

  it('.containerignore (and .dockerignore, alike) lets only what the build copies reach it', () => {
    const patterns = read('.containerignore')
      .split('\n')
      .filter((l) => l.trim() && !l.startsWith('#'));
    expect(patterns[0]).toBe('*');
    const allowed = patterns.slice(1).map((p) => p.replace(/^!/, '').replace(/\/$/, ''));
    const copied = ins
      .filter((i) => i.op === 'COPY' && !i.args.startsWith('--from'))
      .flatMap((i) => i.args.split(' ').slice(0, -1));
    for (const c of copied) expect(allowed, c).toContain(c);
    for (const never of ['node_modules', 'dist', '.git', 'test']) expect(allowed).not.toContain(never);
    // Docker reads .dockerignore (Podman .containerignore first): the same patterns.
    expect(
      read('.dockerignore')
        .split('\n')
        .filter((l) => l.trim() && !l.startsWith('#')),
    ).toEqual(patterns);
  });
});

describe('systemd unit', () => {
  const unit = read('packaging/systemd/proxyd.service');
  const settings = (section: string) => {
    const body = unit.split(/^\[/m).find((s) => s.startsWith(`${section}]`)) ?? '';
    const out = new Map<string, string[]>();
    for (const l of body.split('\n').slice(1)) {
      const m = /^([A-Za-z]+)=(.*)$/.exec(l);
      if (m) out.set(m[1]!, [...(out.get(m[1]!) ?? []), m[2]!]);
    }
    return out;
  };

  it('is hardened as docs/operations.md says: a dynamic user, its state directory, one capability, no MemoryDenyWriteExecute', () => {
    const s = settings('Service');
    const one = (k: string) => {
      expect(s.get(k), k).toHaveLength(1);
      return s.get(k)![0];
    };
    expect(one('DynamicUser')).toBe('yes');
    expect(one('StateDirectory')).toBe('proxyd');
    expect(one('AmbientCapabilities')).toBe('CAP_NET_BIND_SERVICE');
    expect(one('CapabilityBoundingSet')).toBe('CAP_NET_BIND_SERVICE');
    expect(one('ProtectSystem')).toBe('strict');
    expect(one('NoNewPrivileges')).toBe('yes');
    expect(Number(one('LimitNOFILE'))).toBeGreaterThanOrEqual(1_048_576);
    expect(unit).not.toMatch(/^MemoryDenyWriteExecute=/m);
    expect(one('ExecStart')).toBe('/usr/local/bin/proxyd serve');
    // Ready once it serves: the unit's start waits for GET /healthz, reading the same settings as the daemon.
    expect(one('ExecStartPost')).toMatch(/^\/usr\/local\/bin\/proxyd health --wait \d+$/);
    expect(one('EnvironmentFile')).toBe('/etc/proxyd/proxyd.env');
  });

  it.skipIf(!has('systemd-analyze'))(
    "passes systemd-analyze verify (proxyd at this checkout's path) and rates 2.5 or lower in systemd-analyze security",
    () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'proxyd-unit-'));
      // The only change: where proxyd is (verify checks that the programs exist).
      writeFileSync(path.join(dir, 'proxyd.service'), unit.replaceAll('/usr/local/bin/proxyd', PROXYD));
      const verify = spawnSync('systemd-analyze', ['verify', path.join(dir, 'proxyd.service')], { encoding: 'utf8' });
      expect({ status: verify.status, stderr: verify.stderr }).toEqual({ status: 0, stderr: '' });
      const security = spawnSync(
        'systemd-analyze',
        ['security', '--offline=yes', path.join(ROOT, 'packaging/systemd/proxyd.service')],
        { encoding: 'utf8', env: { ...process.env, SYSTEMD_COLORS: '0' } },
      );
      const level = /Overall exposure level for proxyd\.service: (\d+(?:\.\d+)?) (\w+)/.exec(security.stdout);
      expect(level, security.stdout + security.stderr).not.toBeNull();
      expect(Number(level![1])).toBeLessThanOrEqual(2.5);
      expect(level![2]).toBe('OK');
    },
  );

  it('proxyd.env names only variables proxyd serve reads, and the settings it gives are valid', () => {
    const text = read('packaging/systemd/proxyd.env');
    const named = [...text.matchAll(/^#?(PROXYD_[A-Z_]+)=/gm)].map((m) => m[1]!);
    expect(named.length).toBeGreaterThan(5);
    for (const v of named) expect(serveEnv(), v).toContain(v);
    expect(named).not.toContain('PROXYD_DATA_DIR'); // the unit's StateDirectory
    const env = Object.fromEntries([...text.matchAll(/^(PROXYD_[A-Z_]+)=(.*)$/gm)].map((m) => [m[1]!, m[2]!]));
    const raw: Record<string, string | undefined> = {};
    for (const o of serveCommand().options)
      raw[o.attributeName()] =
        o.envVar && env[o.envVar] !== undefined ? env[o.envVar] : (o.defaultValue as string | undefined);
    const cfg = toServeConfig(
      { ...(raw as unknown as Parameters<typeof toServeConfig>[0]), dataDir: '/var/lib/proxyd' },
      env,
    );
    expect(cfg.apiListen).toEqual({ host: '127.0.0.1', port: 8080 });
    expect(cfg.httpProxyListen.host).toBe('0.0.0.0');
  });
});

describe('Prometheus alerts and the Grafana dashboard', () => {
  const alertsText = read('packaging/prometheus/alerts.yml');
  const rules = alertRules(alertsText);
  const dash = JSON.parse(read('packaging/grafana/proxyd.json')) as {
    uid: string;
    templating: { list: Array<{ name: string; type: string; query: unknown }> };
    panels: Array<Record<string, any>>;
  };
  const queries = dashboardQueries(dash);
  const daemons: Daemon[] = [];
  let one: Map<string, string>;
  let workers: Map<string, string>;

  beforeAll(async () => {
    const [a, b] = await Promise.all([startDaemon(), startDaemon({ args: ['--workers', '2'], timeoutMs: 30_000 })]);
    daemons.push(a, b);
    one = families(await (await fetch(`${a.api}/metrics`)).text());
    workers = families(await (await fetch(`${b.api}/metrics`)).text());
  }, 60_000);
  afterAll(async () => {
    await Promise.all(daemons.map((d) => d.stop()));
  });

  it.skipIf(!has('promtool'))('promtool check rules and promtool test rules (alerts.test.yml) pass', () => {
    const check = spawnSync('promtool', ['check', 'rules', 'alerts.yml'], {
      cwd: path.join(ROOT, 'packaging/prometheus'),
      encoding: 'utf8',
    });
    expect(check.status, check.stdout + check.stderr).toBe(0);
    expect(check.stdout).toContain(`SUCCESS: ${rules.length} rules found`);
    const test = spawnSync('promtool', ['test', 'rules', 'alerts.test.yml'], {
      cwd: path.join(ROOT, 'packaging/prometheus'),
      encoding: 'utf8',
    });
    expect(test.status, test.stdout + test.stderr).toBe(0);
  });

  it('alerts.test.yml shows every alert firing (an example whose exp_alerts is not empty), not only quiet', () => {
    const examples = read('packaging/prometheus/alerts.test.yml');
    const firing = new Set(
      [...examples.matchAll(/alertname: (\w+)\n\s+exp_alerts:\n\s+- exp_labels:/g)].map((m) => m[1]!),
    );
    expect(rules.map((r) => r.alert).filter((a) => !firing.has(a))).toEqual([]);
  });

  it('alerts on what an operator must hear of, each with a severity and a runbook line in docs/operations.md', () => {
    const names = rules.map((r) => r.alert);
    for (const a of [
      'ProxydDown',
      'ProxydDatabaseUnreachable',
      'ProxydAdmissionViewStale',
      'ProxydInternalRefusals',
      'ProxydNoExitRefusals',
      'ProxydUsageFlushLagging',
      'ProxydHopLinkDown',
      'ProxydConnectionLogDropping',
      'ProxydDataDirDiskLow',
    ]) {
      expect(names).toContain(a);
    }
    for (const r of rules) expect(r.expr, r.alert).not.toBe('');
    expect((alertsText.match(/^\s+severity: (critical|warning)$/gm) ?? []).length).toBe(rules.length);
    const runbooks = [...alertsText.matchAll(/runbook: 'docs\/operations\.md, "Alerts": (\w+)'/g)].map((m) => m[1]!);
    expect(runbooks).toHaveLength(rules.length);
    const ops = read('docs/operations.md');
    const section = ops.slice(ops.indexOf('\n## Alerts'), ops.indexOf('\n## ', ops.indexOf('\n## Alerts') + 1));
    for (const r of runbooks) expect(section, `the runbook line ${r}`).toMatch(new RegExp(`^- \\*\\*${r}\\*\\*`, 'm'));
    for (const a of names) expect(section, `${a} in the runbook`).toContain(`**${a}**`);
  });

  it('the dashboard: a stable uid, a data source variable every panel uses, and the panels the SPEC lists', () => {
    expect(dash.uid).toBe('proxyd-overview');
    const ds = dash.templating.list.find((v) => v.type === 'datasource');
    expect(ds).toMatchObject({ name: 'datasource', query: 'prometheus' });
    const panels = dash.panels.filter((p) => p.type !== 'row');
    expect(new Set(dash.panels.map((p) => p.id)).size).toBe(dash.panels.length);
    for (const p of panels) {
      expect(p.datasource, p.title).toEqual({ type: 'prometheus', uid: '${datasource}' });
      for (const t of p.targets) expect(t.datasource, p.title).toEqual({ type: 'prometheus', uid: '${datasource}' });
    }
    const reads = (metric: string) =>
      panels
        .filter((p) => p.targets.some((t: { expr: string }) => metricNames(t.expr).includes(metric)))
        .map((p) => p.title);
    expect(reads('proxyd_relayed_bytes_total')).toContain('Traffic');
    expect(reads('proxyd_gateway_setup_seconds_count')).toContain('Tunnels opened');
    expect(reads('proxyd_gateway_refusals_total')).toContain('Refused, by reason');
    expect(reads('proxyd_gateway_setup_seconds_bucket')).toContain('Set-up latency');
    expect(reads('proxyd_admission_view_age_seconds')).toContain('Admission view lag');
    expect(reads('proxyd_dependency_up')).toContain('Database and Redis');
    expect(reads('proxyd_usage_flush_lag_seconds')).toContain('Usage flush lag');
    expect(reads('proxyd_hop_links')).toContain('Hop links per exit');
    expect(reads('proxyd_udp_associations_open')).toContain('UDP associations');
    expect(reads('proxyd_udp_dropped_total')).toContain('UDP datagrams dropped');
    expect(reads('proxyd_webhooks_pending')).toContain('Webhooks pending');
  });

  it.skipIf(!has('promtool'))('every dashboard query is PromQL promtool accepts (its Grafana variables set)', () => {
    const exprs = queries.filter((q) => !q.startsWith('label_values'));
    const dir = mkdtempSync(path.join(tmpdir(), 'proxyd-dash-'));
    const rulesFile = path.join(dir, 'dashboard-rules.yml');
    const asRules = exprs.map((q, i) => ({
      record: `dashboard:query_${i}`,
      expr: q.replaceAll('$__rate_interval', '5m').replaceAll('$job', '.*').replaceAll('$instance', '.*'),
    }));
    writeFileSync(rulesFile, JSON.stringify({ groups: [{ name: 'dashboard', rules: asRules }] })); // JSON is YAML
    const check = spawnSync('promtool', ['check', 'rules', rulesFile], { encoding: 'utf8' });
    expect(check.status, check.stdout + check.stderr).toBe(0);
    expect(check.stdout).toContain(`SUCCESS: ${exprs.length} rules found`);
  });

  it('every metric the alerts and the dashboard name is served by a running daemon, alone or with --workers 2', () => {
    const named = new Set([...rules.flatMap((r) => metricNames(r.expr)), ...queries.flatMap(metricNames)]);
    expect(named.size).toBeGreaterThan(25);
    const missing: string[] = [];
    for (const name of named) {
      if (name === 'up') continue; // Prometheus's own, per scrape target
      if (!served(name, workers)) missing.push(`${name} (--workers 2)`);
      // The cluster's own gauges exist only with workers; all else in a lone process too.
      if (!name.startsWith('proxyd_cluster_') && !served(name, one)) missing.push(`${name} (one process)`);
    }
    expect(missing).toEqual([]);
  });

  it("/metrics passes promtool check metrics' lint (names, help, counter suffixes)", async () => {
    if (!has('promtool')) return;
    const text = await (await fetch(`${daemons[0]!.api}/metrics`)).text();
    const lint = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    // promtool says every problem it finds; none of ours (a library's defaults aside) may be among them.
    const ours = (lint.stdout + lint.stderr)
      .split('\n')
      .filter((l) => /^proxyd_/.test(l) && !/^proxyd_(process|nodejs)_/.test(l));
    expect(ours).toEqual([]);
  });
});
