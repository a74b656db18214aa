// `check --report FILE`: a Markdown report for a support ticket. Redacted: the proxy appears as
// host:port and user name only, the target without its query; every text is scrubbed of the password.
import type { RepeatSummary } from './repeat.js';
import type { CheckResult } from './runner.js';
import { redactUrl, scrub, type ProxySpec } from './urls.js';
import { formatHostPort } from '../../rules/host-port.js';

interface ReportInput {
  result: CheckResult;
  proxy: ProxySpec;
  /** The target URL as given. */
  target: string;
  versions: { proxyctl: string; node: string; platform: string };
  /** When the check started. */
  startedAt: Date;
  summary?: RepeatSummary;
  /** With a summary: runs per egress IP (egressCounts). */
  egress?: Array<{ ip: string; count: number }>;
}

/** A table cell: one line, pipes escaped. */
function cell(text: string | number | null): string {
  return String(text ?? '-')
    .replace(/[\r\n]+/g, ' ')
    .replace(/\|/g, '\\|');
}

function table(head: string[], rows: Array<Array<string | number | null>>): string[] {
  return [
    `| ${head.join(' | ')} |`,
    `|${head.map(() => '---').join('|')}|`,
    ...rows.map((r) => `| ${r.map(cell).join(' | ')} |`),
  ];
}

/** The target without query or fragment (they may carry keys). */
function targetForReport(raw: string): string {
  try {
    const u = new URL(raw);
    return `${u.protocol}//${u.host}${u.pathname}${u.search ? '?…' : ''}`;
  } catch {
    return redactUrl(raw);
  }
}

export function renderReport(input: ReportInput): string {
  const { result, proxy, versions } = input;
  const { report } = result;
  const s = (t: string) => scrub(t, proxy.password);
  const lines = [
    '# proxyctl check report',
    '',
    ...table(
      ['item', 'value'],
      [
        ['time (UTC)', input.startedAt.toISOString().replace(/\.\d+Z$/, 'Z')],
        ['proxyctl', versions.proxyctl],
        ['Node.js', versions.node],
        ['platform', versions.platform],
        ['proxy', `${proxy.protocol}://${formatHostPort(proxy.host, proxy.port)}`],
        [
          'proxy user',
          proxy.username !== null ? `${proxy.username} (password not shown)` : 'none (source-IP whitelist)',
        ],
        ['target', s(targetForReport(input.target))],
        ['gateway request id', report.request_id ?? 'none (the proxy sent no X-Request-Id)'],
        ['result', result.ok ? 'passed' : `failed at stage ${result.failure?.stage ?? '?'}`],
      ],
    ),
    '',
    '## Stages',
    '',
    ...table(
      ['stage', 'result', 'ms', 'detail'],
      report.stages.map((st) => [st.name, st.status, st.status === 'skipped' ? '' : st.ms.toFixed(1), s(st.detail)]),
    ),
    '',
    '## Diagnosis',
    '',
    s(report.diagnosis),
    '',
    '## Egress',
    '',
    ...table(
      ['path', 'IP'],
      [
        ['via the proxy', report.egress_ip],
        ['direct (no proxy)', report.direct_ip],
      ],
    ),
  ];
  if (input.summary) {
    const m = input.summary;
    lines.push(
      '',
      `## ${m.runs} runs`,
      '',
      `${m.ok} passed, ${m.failed} failed. The stages and diagnosis above are from the ${result.ok ? 'last run' : 'first failed run'}.`,
      '',
      ...table(
        ['stage', 'runs', 'failed', 'p50 ms', 'p95 ms', 'max ms'],
        m.stages.map((st) => [st.name, st.runs, st.failed, st.p50_ms, st.p95_ms, st.max_ms]),
      ),
    );
    if (input.egress && input.egress.length > 0) {
      lines.push(
        '',
        ...table(
          ['egress IP via the proxy', 'runs'],
          input.egress.map((e) => [e.ip, e.count]),
        ),
      );
    }
    if (m.diagnoses.length > 0) {
      lines.push(
        '',
        ...table(
          ['failure diagnosis', 'runs'],
          m.diagnoses.map((d) => [s(d.diagnosis), d.count]),
        ),
      );
    }
  }
  return `${lines.join('\n')}\n`;
}
