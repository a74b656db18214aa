// Human output (cli-table3, colour only when allowed) and the --json document.
import Table from 'cli-table3';
import { terminalSafe } from '../output.js';
import type { CheckReport, StageStatus } from './types.js';

interface RenderOptions {
  color: boolean;
  /** Terminal width, to wrap the detail column; undefined: no wrapping. */
  columns?: number | undefined;
}

const COLORS: Record<StageStatus, string> = { ok: '\x1b[32m', fail: '\x1b[31m', skipped: '\x1b[90m' };
const RESET = '\x1b[0m';

export function renderJson(report: CheckReport): string {
  const doc: CheckReport = {
    stages: report.stages.map(({ name, status, ms, detail }) => ({ name, status, ms, detail })),
    egress_ip: report.egress_ip,
    direct_ip: report.direct_ip,
    diagnosis: report.diagnosis,
    request_id: report.request_id,
  };
  return `${JSON.stringify(doc, null, 2)}\n`;
}

/**
 * The check's tables, one run's stages and `--repeat`'s statistics, drawn alike: compact (no rule between rows),
 * the head in bold when colour is on, the columns `right` says (milliseconds, counts) aligned on the right.
 */
export function checkTable(
  head: string[],
  rows: string[][],
  o: { color: boolean; right: readonly boolean[]; colWidths?: number[] | undefined },
): string {
  const table = new Table({
    head,
    style: { head: o.color ? ['bold'] : [], border: [], compact: true },
    ...(o.colWidths ? { colWidths: o.colWidths, wordWrap: true, wrapOnWordBoundary: true } : {}),
    colAligns: o.right.map((r) => (r ? 'right' : 'left')),
  });
  for (const r of rows) table.push(r);
  return table.toString();
}

export function renderHuman(report: CheckReport, meta: { proxy: string; target: string }, opts: RenderOptions): string {
  const paint = (s: StageStatus, text: string) => (opts.color ? `${COLORS[s]}${text}${RESET}` : text);
  const fixed = 9 + 9 + 9 + 5; // stage, result, ms columns plus borders
  const wrap = opts.columns && opts.columns > fixed + 30 ? opts.columns - fixed : undefined;
  // A detail may quote what the proxy or the target sent: shown, never acted on by the terminal.
  const rows = report.stages.map((s) => [
    s.name,
    paint(s.status, s.status),
    s.status === 'skipped' ? '' : s.ms.toFixed(1),
    terminalSafe(s.detail),
  ]);
  const table = checkTable(['stage', 'result', 'ms', 'detail'], rows, {
    color: opts.color,
    right: [false, false, true, false],
    colWidths: wrap ? [9, 9, 9, wrap] : undefined,
  });
  const lines = [`check ${meta.proxy} -> ${meta.target}`, table];
  if (report.egress_ip !== null || report.direct_ip !== null) {
    lines.push(`egress IP via proxy: ${report.egress_ip ?? '-'}   direct: ${report.direct_ip ?? '-'}`);
  }
  // Support finds the gateway's record of this very attempt by it (docs/support.md).
  if (report.request_id) lines.push(`gateway request id: ${report.request_id}`);
  const failed = report.stages.some((s) => s.status === 'fail');
  const warn = !failed && report.diagnosis.startsWith('Warning');
  const label = failed ? 'diagnosis' : warn ? 'warning' : 'result';
  const color = failed ? COLORS.fail : warn ? '\x1b[33m' : COLORS.ok;
  // The label says it is a warning: not "warning: Warning: …".
  const text = terminalSafe(warn ? report.diagnosis.replace(/^Warning:\s*/, '') : report.diagnosis);
  lines.push(`${opts.color ? `${color}${label}:${RESET}` : `${label}:`} ${text}`);
  return `${lines.join('\n')}\n`;
}
