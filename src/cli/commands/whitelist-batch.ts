// `proxyctl whitelist add|delete`: collect IPs, run the batch engine, print a summary, write --failed-out.
import { constants as fsConstants } from 'node:fs';
import { access, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { runBatches, type BatchItem, type BatchOp, type BatchSummary } from '../batch.js';
import type { Context } from '../context.js';
import type { Deps } from '../deps.js';
import { CliError, UsageError } from '../errors.js';
import { Exit, type ExitCode } from '../exit-codes.js';
import { collectItems } from '../input.js';
import { openSession, rejectedTokenHint, stopBetweenRequests } from './shared.js';
import { terminalSafe } from '../output.js';

interface BatchCommandOptions {
  ctx: Context;
  op: BatchOp;
  /** `IP` or `IP=REMARK` (add), `-` for stdin. */
  args: string[];
  files?: string[];
  remark?: string;
  retry: number;
  failedOut?: string;
  /** add: also the caller's own public IPv4, as this echo URL sees it. */
  currentFrom?: string;
}

/** The caller's IP as an echo sees it (JSON {"ip":…} or a plain-text IP), for `add --current`. */
async function currentIp(echo: string, remark: string | undefined): Promise<BatchItem> {
  const [{ parseTargetUrl, CheckUsageError }, { fetchDirect }] = await Promise.all([
    import('../check/urls.js'),
    import('../check/egress-ip.js'),
  ]);
  let target;
  try {
    target = parseTargetUrl(echo);
  } catch (err) {
    if (err instanceof CheckUsageError) throw new UsageError(`--echo: ${err.message}`);
    throw err;
  }
  const r = await fetchDirect(target, { timeoutMs: 10_000 });
  if (!r.ok) throw new CliError(`cannot learn your IP from ${target.href}: ${r.error}`);
  if (r.status !== 200) throw new CliError(`cannot learn your IP from ${target.href}: it answered HTTP ${r.status}`);
  if (r.ip === null || !/^\d+\.\d+\.\d+\.\d+$/.test(r.ip))
    throw new CliError(
      `${target.href} did not answer with an IPv4 address${r.ip ? `: ${r.ip}` : ''}; use --echo with an IPv4 echo`,
    );
  return remark !== undefined && remark !== '' ? { ip: r.ip, remark } : { ip: r.ip };
}

export async function runBatchCommand(opts: BatchCommandOptions, deps: Deps): Promise<ExitCode> {
  const { ctx, op } = opts;
  const { out } = deps;
  if (!Number.isInteger(opts.retry) || opts.retry < 0) throw new UsageError('--retry must be a whole number ≥ 0');
  const { items, duplicates } = await collectItems({
    args: opts.args,
    ...(opts.files !== undefined ? { files: opts.files } : {}),
    ...(opts.remark !== undefined ? { defaultRemark: opts.remark } : {}),
    remarks: op === 'add',
    stdin: deps.io.stdin,
  });
  if (opts.currentFrom !== undefined) {
    const mine = await currentIp(opts.currentFrom, opts.remark);
    if (!items.some((i) => i.ip === mine.ip)) items.push(mine);
    out.info(`your IP as ${opts.currentFrom} sees it: ${mine.ip}`);
  }
  if (items.length === 0)
    throw new UsageError(
      `no IP addresses given: pass them as arguments${op === 'add' ? ' (IP or IP=REMARK)' : ''}, or use --file FILE (- for stdin)`,
    );
  if (duplicates > 0)
    out.info(
      `${duplicates} repeated ${duplicates === 1 ? 'IP' : 'IPs'} folded into ${duplicates === 1 ? 'its' : 'their'} first occurrence`,
    );

  // Found before anything is sent: a run whose failed IPs cannot be kept would lose them.
  if (opts.failedOut !== undefined) await assertWritable(opts.failedOut);
  const { api, resolved } = await openSession(ctx, deps);
  const progress = await deps.progress();
  const verb = op === 'add' ? 'adding' : 'deleting';
  const interrupt = stopBetweenRequests(deps);
  let result;
  try {
    result = await runBatches({
      op,
      items,
      api,
      clock: deps.clock,
      retry: opts.retry,
      signal: interrupt.signal,
      ...(progress ? { onProgress: (p) => progress.update(p, verb) } : {}),
    });
  } finally {
    interrupt.release();
    progress?.stop();
    await api.close();
  }
  const { summary } = result;

  // The summary first: what was applied is said even when the file cannot be written after all.
  if (ctx.json) out.writeJson(summary);
  else printSummary(op, summary, deps, ctx.quiet);
  if (result.stop)
    out.error(
      result.stop.exitCode === Exit.AUTH
        ? `${result.stop.message}; ${rejectedTokenHint(resolved.source)}`
        : result.stop.message,
    );
  if (opts.failedOut !== undefined) {
    const lines = summary.failed_items.map((f) => f.ip);
    try {
      await writeFile(opts.failedOut, lines.length ? `${lines.join('\n')}\n` : '', 'utf8');
    } catch (err) {
      out.error(`cannot write ${opts.failedOut}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
      return result.exitCode === Exit.OK ? Exit.ERROR : result.exitCode;
    }
    if (summary.failed_count > 0)
      out.info(
        `${summary.failed_count} failed ${summary.failed_count === 1 ? 'IP' : 'IPs'} written to ${opts.failedOut}`,
      );
  }
  return result.exitCode;
}

/** A usage error unless `file` can be written: its directory exists and is writable, and so is the file if it exists. */
async function assertWritable(file: string): Promise<void> {
  try {
    const st = await stat(file).catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') return null;
      throw e;
    });
    if (st?.isDirectory()) throw Object.assign(new Error('EISDIR'), { code: 'EISDIR' });
    await access(st ? file : path.dirname(path.resolve(file)), fsConstants.W_OK);
  } catch (err) {
    throw new UsageError(`--failed-out: cannot write ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
}

function printSummary(op: BatchOp, s: BatchSummary, deps: Deps, quiet: boolean): void {
  const { out } = deps;
  if (quiet && s.failed_count === 0) return;
  const done = op === 'add' ? 'added' : 'deleted';
  const parts = [
    out.paint('green', `${s.success_count} ${done}`),
    `${s.already_done} already done`,
    s.failed_count > 0 ? out.paint('red', `${s.failed_count} failed`) : `${s.failed_count} failed`,
  ];
  out.line(parts.join(', '));
  if (s.failed_count > 0) {
    out.line(
      out.table(
        ['IP', 'Code', 'Reason'],
        s.failed_items.map((f) => [terminalSafe(f.ip), f.code, terminalSafe(f.reason)]),
      ),
    );
  }
}
