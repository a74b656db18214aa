// `proxyctl usage`: the account's usage by user, day, hour, domain or dedicated egress address (docs/cli.md, "Usage"), read from the usage
// API with the API key; a table in binary units (a bar per row on a terminal), the endpoint's data with --json, CSV with --csv.
import { API_DAY_EXPECTED, API_TIME_EXPECTED, parseApiDay, parseApiTime } from '../../contract/schemas.js';
import { formatSize } from '../../contract/size.js';
import { timeFlagProblem } from '../../contract/time.js';
import type { UsageParams } from '../api.js';
import type { Context } from '../context.js';
import type { Deps } from '../deps.js';
import { UsageError } from '../errors.js';
import { Exit, type ExitCode } from '../exit-codes.js';
import { keyFailure, openKeySession } from './shared.js';
import { terminalSafe } from '../output.js';

export type UsageBy = 'user' | 'day' | 'hour' | 'domain' | 'ip';

export interface UsageOptions {
  ctx: Context;
  by: UsageBy;
  from?: string;
  to?: string;
  user?: string;
  limit?: number;
  csv: boolean;
}

interface Row {
  key: string;
  bytes_up: number;
  bytes_down: number;
  connections: number;
}

/** The key column's name: also the CSV header's first field. */
const KEY: Record<UsageBy, 'user' | 'time' | 'domain' | 'address'> = {
  user: 'user',
  day: 'time',
  hour: 'time',
  domain: 'domain',
  ip: 'address',
};

/** What the domains' `other` is called in a table or CSV: no host name holds parentheses. */
export const OTHER_ROW = '(other)';

const BAR_WIDTH = 24;

function checkOptions(o: UsageOptions): void {
  if (o.csv && o.ctx.json) throw new UsageError('--csv and --json do not go together');
  if (o.limit !== undefined && o.by !== 'domain') throw new UsageError('--limit goes with --by domain');
  if (o.user !== undefined && (o.by === 'user' || o.by === 'ip'))
    throw new UsageError('--user goes with --by day, hour or domain');
  for (const [flag, v] of [
    ['--from', o.from],
    ['--to', o.to],
  ] as const) {
    if (v === undefined) continue;
    const day = o.by === 'domain';
    if ((day ? parseApiDay(v) : parseApiTime(v)) === null) {
      throw new UsageError(timeFlagProblem(flag, v, day ? `${API_DAY_EXPECTED} (UTC)` : API_TIME_EXPECTED, 'required'));
    }
  }
}

export async function runUsage(opts: UsageOptions, deps: Deps): Promise<ExitCode> {
  checkOptions(opts);
  const { ctx } = opts;
  const { out } = deps;
  // The usage endpoints take an API key with usage:read (the account token opens only the whitelist).
  const session = await openKeySession(ctx, deps);
  const { api } = session;
  const params: UsageParams = {};
  if (opts.from !== undefined) params.from = opts.from;
  if (opts.to !== undefined) params.to = opts.to;
  if (opts.user !== undefined) params.user = opts.user;
  let data: unknown;
  let rows: Row[];
  let total: Omit<Row, 'key'>;
  let caption: string;
  try {
    if (opts.by === 'user') {
      const d = await api.usageSummary(params);
      data = d;
      rows = d.users.map((u) => ({
        key: u.user,
        bytes_up: u.bytes_up,
        bytes_down: u.bytes_down,
        connections: u.connections,
      }));
      total = { bytes_up: d.bytes_up, bytes_down: d.bytes_down, connections: d.connections };
      const limit =
        d.plan?.traffic_limit != null
          ? ` of ${formatSize(d.plan.traffic_limit)} ${d.plan.period === 'lifetime' ? "for the plan's lifetime" : `per ${d.plan.period}`}`
          : '';
      caption = `${d.from} to ${d.to}: ${formatSize(total.bytes_up + total.bytes_down)}${limit}`;
    } else if (opts.by === 'ip') {
      // The summary's `ips`: present only when the account holds dedicated addresses (docs/api.md).
      const d = await api.usageSummary(params);
      data = d;
      rows = (d.ips ?? []).map((x) => ({
        key: x.address,
        bytes_up: x.bytes_up,
        bytes_down: x.bytes_down,
        connections: x.connections,
      }));
      total = sum(rows);
      caption =
        d.ips === undefined
          ? ''
          : `${d.from} to ${d.to}: ${rows.length} ${rows.length === 1 ? 'address' : 'addresses'}`;
    } else if (opts.by === 'domain') {
      const d = await api.usageDomains({ ...params, ...(opts.limit !== undefined ? { limit: opts.limit } : {}) });
      data = d;
      rows = d.domains.map((x) => ({
        key: x.domain,
        bytes_up: x.bytes_up,
        bytes_down: x.bytes_down,
        connections: x.connections,
      }));
      const other = d.other.bytes_up + d.other.bytes_down + d.other.connections > 0;
      if (other) rows.push({ key: OTHER_ROW, ...d.other });
      total = sum(rows);
      caption = `${count(d.domains.length, 'domain')}${other ? `, the rest as ${OTHER_ROW}` : ''}`;
    } else {
      const d = await api.usageSeries({ ...params, granularity: opts.by });
      data = d;
      rows = d.points.map((p) => ({
        key: p.time,
        bytes_up: p.bytes_up,
        bytes_down: p.bytes_down,
        connections: p.connections,
      }));
      total = sum(rows);
      caption = count(rows.length, opts.by);
    }
  } catch (err) {
    throw keyFailure(err, session);
  } finally {
    await api.close();
  }

  if (ctx.json) {
    out.writeJson(data);
    return Exit.OK;
  }
  if (opts.csv) {
    deps.io.stdout.write(usageCsv(KEY[opts.by], rows));
    return Exit.OK;
  }
  if (opts.by === 'ip' && caption === '') {
    out.line('This account holds no dedicated addresses: its traffic leaves from the shared pool.');
    return Exit.OK;
  }
  if (rows.length === 0) {
    out.line('No usage in this range.');
    return Exit.OK;
  }
  const bars = deps.io.stdoutIsTTY;
  const max = Math.max(1, ...rows.map((r) => r.bytes_up + r.bytes_down));
  const label = (k: string) =>
    opts.by === 'day' ? k.slice(0, 10) : opts.by === 'hour' ? `${k.slice(0, 10)} ${k.slice(11, 16)}` : k;
  const head = [
    { user: 'User', time: 'Time (UTC)', domain: 'Domain', address: 'Address' }[KEY[opts.by]],
    'Up',
    'Down',
    'Total',
    'Connections',
    ...(bars ? [''] : []),
  ];
  const body = rows.map((r) => [
    terminalSafe(label(r.key)),
    formatSize(r.bytes_up),
    formatSize(r.bytes_down),
    formatSize(r.bytes_up + r.bytes_down),
    r.connections,
    ...(bars ? [out.paint('cyan', bar((r.bytes_up + r.bytes_down) / max))] : []),
  ]);
  body.push([
    out.paint('bold', 'total'),
    formatSize(total.bytes_up),
    formatSize(total.bytes_down),
    formatSize(total.bytes_up + total.bytes_down),
    total.connections,
    ...(bars ? [''] : []),
  ]);
  out.line(out.table(head, body));
  out.line(out.paint('dim', caption));
  return Exit.OK;
}

/** `1 domain`, `3 days`. */
const count = (n: number, what: string): string => `${n} ${what}${n === 1 ? '' : 's'}`;

function sum(rows: Row[]): Omit<Row, 'key'> {
  return rows.reduce(
    (t, r) => ({
      bytes_up: t.bytes_up + r.bytes_up,
      bytes_down: t.bytes_down + r.bytes_down,
      connections: t.connections + r.connections,
    }),
    { bytes_up: 0, bytes_down: 0, connections: 0 },
  );
}

/** A bar of BAR_WIDTH cells for a share in [0, 1], in eighths; any traffic at all shows at least a sliver. */
export function bar(share: number): string {
  const eighths = Math.round(Math.min(1, Math.max(0, share)) * BAR_WIDTH * 8);
  const n = share > 0 ? Math.max(1, eighths) : 0;
  return '█'.repeat(Math.floor(n / 8)) + (n % 8 ? '▏▎▍▌▋▊▉'[(n % 8) - 1]! : '');
}

/** RFC 4180 CSV, raw byte counts; a field a spreadsheet would run as a formula is prefixed with '. */
export function usageCsv(key: 'user' | 'time' | 'domain' | 'address', rows: Row[]): string {
  const cell = (s: string) => {
    const safe = /^[=+\-@]/.test(s) ? `'${s}` : s;
    return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
  };
  const lines = [
    `${key},bytes_up,bytes_down,connections`,
    ...rows.map((r) => [cell(r.key), r.bytes_up, r.bytes_down, r.connections].join(',')),
  ];
  return `${lines.join('\r\n')}\r\n`;
}
