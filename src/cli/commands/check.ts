// `proxyctl check`: the staged connectivity check (src/cli/check) as a command like the others:
// options in, output through deps, an exit status back. Also --repeat N and --report FILE.
import { open, readFile, type FileHandle } from 'node:fs/promises';
import { checkTable, renderHuman, renderJson } from '../check/render.js';
import { egressCounts, summarize, type RepeatSummary } from '../check/repeat.js';
import { renderReport } from '../check/report.js';
import { DEFAULT_TARGET, performCheck, type CheckResult } from '../check/runner.js';
import type { CheckOptions } from '../check/types.js';
import { CheckUsageError, parseProxyUrl, scrub, type ProxySpec } from '../check/urls.js';
import type { Context } from '../context.js';
import type { Deps } from '../deps.js';
import { CliError, UsageError, scrubSecrets } from '../errors.js';
import { Exit, type ExitCode } from '../exit-codes.js';
import { terminalSafe } from '../output.js';
import { VERSION } from '../../contract/version.js';

interface CheckCommandOptions {
  ctx: Context;
  proxy: string;
  /** Default: config `check.target`, else DEFAULT_TARGET. */
  target?: string;
  timeoutMs: number;
  /** PEM file with extra CA certificates for the target. */
  caFile?: string;
  direct: boolean;
  /** Run the check this many times and print timing percentiles (1 = a single check). */
  repeat?: number;
  /** Pause between repeated runs. */
  intervalMs?: number;
  /** Write a redacted Markdown report here. */
  report?: string;
}

const DEFAULT_INTERVAL_MS = 1000;

async function readCa(file: string): Promise<string> {
  let ca: string;
  try {
    ca = await readFile(file, 'utf8');
  } catch (err) {
    throw new UsageError(`cannot read --ca ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  if (!ca.includes('-----BEGIN CERTIFICATE-----')) throw new UsageError(`--ca ${file} holds no PEM certificate`);
  return ca;
}

function parseProxy(raw: string): ProxySpec {
  try {
    return parseProxyUrl(raw);
  } catch (err) {
    if (err instanceof CheckUsageError) throw new UsageError(scrub(err.message, null));
    throw err;
  }
}

export async function runCheck(opts: CheckCommandOptions, deps: Deps): Promise<ExitCode> {
  const { ctx } = opts;
  const proxy = parseProxy(opts.proxy);
  const checkOpts: CheckOptions = {
    proxy: opts.proxy,
    target: opts.target ?? ctx.checkTarget ?? DEFAULT_TARGET,
    timeoutMs: opts.timeoutMs,
    ca: opts.caFile !== undefined ? await readCa(opts.caFile) : undefined,
    direct: opts.direct,
  };
  // Opened before the first run: a report path that cannot be written must not cost the runs (exit 2, like --ca).
  const reportFile = opts.report !== undefined ? await openReport(opts.report) : undefined;
  try {
    return await checkAndReport(opts, deps, proxy, checkOpts, reportFile);
  } finally {
    await reportFile?.close();
  }
}

async function checkAndReport(
  opts: CheckCommandOptions,
  deps: Deps,
  proxy: ProxySpec,
  checkOpts: CheckOptions,
  reportFile: FileHandle | undefined,
): Promise<ExitCode> {
  const { ctx } = opts;
  const startedAt = new Date(deps.clock.now());
  const repeat = opts.repeat ?? 1;
  const results: CheckResult[] = [];
  const progress = repeat > 1 ? await deps.progress() : null;
  // Ctrl-C during --repeat ends the runs, not the command: the runs done are summarized (and reported).
  const interrupt = new AbortController();
  const stopListening =
    repeat > 1
      ? deps.onInterrupt?.(() => {
          interrupt.abort();
          deps.out.warn(
            'interrupted: stopping after the run in progress, then summarizing the runs done (Ctrl-C again to quit at once)',
          );
        })
      : undefined;
  try {
    for (let i = 0; i < repeat && !interrupt.signal.aborted; i++) {
      if (i > 0) await deps.clock.sleep(opts.intervalMs ?? DEFAULT_INTERVAL_MS, interrupt.signal);
      if (interrupt.signal.aborted) break;
      results.push(await performCheck(checkOpts, deps.check ?? {}));
      const failed = results.filter((r) => !r.ok).length;
      progress?.update(
        { total: repeat, settled: results.length, succeeded: results.length - failed, alreadyDone: 0, failed },
        'checking',
      );
    }
  } catch (err) {
    if (err instanceof CheckUsageError) throw new UsageError(scrub(err.message, proxy.password));
    // Not expected; the message is scrubbed of the proxy password before main prints it.
    throw new CliError(`unexpected error: ${scrub(String((err as Error)?.message ?? err), proxy.password)}`);
  } finally {
    stopListening?.();
    progress?.stop();
  }
  const summary = repeat > 1 ? summarize(results) : undefined;
  // The report shows the first failed run, or the last one when all passed.
  const shown = results.find((r) => !r.ok) ?? results[results.length - 1]!;
  const egress = summary ? egressCounts(results) : undefined;
  if (reportFile)
    await writeReport(reportFile, opts.report!, {
      result: shown,
      proxy,
      target: checkOpts.target,
      startedAt,
      summary,
      egress,
    });

  if (summary) printSummary(summary, shown, egress ?? [], ctx, deps);
  else if (ctx.json) deps.io.stdout.write(renderJson(shown.report));
  else if (ctx.quiet) deps.out.line(terminalSafe(shown.report.diagnosis));
  else
    deps.io.stdout.write(
      renderHuman(
        shown.report,
        { proxy: shown.proxy, target: scrubSecrets(shown.target, [deps.env.PROXYCTL_API_KEY]) },
        { color: ctx.color, columns: deps.io.stdoutColumns },
      ),
    );
  if (opts.report !== undefined) deps.out.info(`report written to ${opts.report}`);
  if (!results.every((r) => r.ok)) return Exit.CHECK_FAILED;
  // 130 when Ctrl-C left runs undone (one pressed during the last run left nothing: the command finished).
  return results.length < repeat ? Exit.INTERRUPTED : Exit.OK;
}

async function openReport(file: string): Promise<FileHandle> {
  try {
    return await open(file, 'w', 0o600);
  } catch (err) {
    throw new UsageError(`cannot write --report ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
}

async function writeReport(
  handle: FileHandle,
  file: string,
  input: {
    result: CheckResult;
    proxy: ProxySpec;
    target: string;
    startedAt: Date;
    summary: RepeatSummary | undefined;
    egress: Array<{ ip: string; count: number }> | undefined;
  },
): Promise<void> {
  const { summary, egress, ...rest } = input;
  const text = renderReport({
    ...rest,
    ...(summary ? { summary } : {}),
    ...(egress ? { egress } : {}),
    versions: { proxyctl: VERSION, node: process.version, platform: `${process.platform} ${process.arch}` },
  });
  try {
    await handle.writeFile(text, 'utf8');
  } catch (err) {
    throw new CliError(`cannot write ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
}

function printSummary(
  m: RepeatSummary,
  shown: CheckResult,
  egress: Array<{ ip: string; count: number }>,
  ctx: Context,
  deps: Deps,
): void {
  const { out } = deps;
  if (ctx.json) {
    out.writeJson(m);
    return;
  }
  const fmt = (ms: number | null) => (ms === null ? '-' : ms.toFixed(1));
  if (!ctx.quiet || m.failed > 0) {
    out.line(
      `check ${shown.proxy} -> ${scrubSecrets(shown.target, [deps.env.PROXYCTL_API_KEY])}: ${m.runs} runs, ${out.paint('green', `${m.ok} ok`)}, ${m.failed > 0 ? out.paint('red', `${m.failed} failed`) : '0 failed'}`,
    );
  }
  if (!ctx.quiet) {
    const rows = m.stages.map((s) => [
      terminalSafe(s.name),
      String(s.runs),
      String(s.failed),
      fmt(s.p50_ms),
      fmt(s.p95_ms),
      fmt(s.max_ms),
    ]);
    out.line(
      checkTable(['stage', 'runs', 'failed', 'p50 ms', 'p95 ms', 'max ms'], rows, {
        color: ctx.color,
        right: [false, true, true, true, true, true],
      }),
    );
  }
  if (!ctx.quiet && egress.length > 0)
    out.line(`egress IP via proxy: ${egress.map((e) => `${e.ip} (${e.count}×)`).join(', ')}`);
  if (m.failed > 0) {
    const by = Object.entries(m.failures_by_stage)
      .map(([stage, n]) => `${stage} ${n}`)
      .join(', ');
    out.line(`failures by stage: ${by}`);
    for (const d of m.diagnoses)
      out.line(`${out.paint('red', 'diagnosis')} (${d.count}×): ${terminalSafe(d.diagnosis)}`);
  }
}
