// performCheck(options, deps): the staged connectivity check (docs/support.md The stages). Stages run in order, each under
// its own timeout; the first failure stops the run and the remaining stages are marked skipped.
import { promises as dnsPromises } from 'node:dns';
import { performance } from 'node:perf_hooks';
import { authStage } from './auth.js';
import { connectStage } from './connect.js';
import { diagnose, type DiagnosisInput } from './diagnosis.js';
import { dnsStage } from './dns.js';
import { fetchDirect } from './egress-ip.js';
import { runStage, type StageFn } from './stage.js';
import { statusStage } from './status.js';
import { tcpStage } from './tcp.js';
import { tlsStage } from './tls.js';
import type {
  CheckContext,
  CheckDeps,
  CheckOptions,
  CheckReport,
  FailureCause,
  StageName,
  StageResult,
} from './types.js';
import { parseProxyUrl, parseTargetUrl, scrub } from './urls.js';

export const DEFAULT_TARGET = 'https://api.ipify.org/?format=json';

const STAGES: Record<StageName, StageFn> = {
  dns: dnsStage,
  tcp: tcpStage,
  auth: authStage,
  connect: connectStage,
  tls: tlsStage,
  status: statusStage,
};

const defaultLookup: CheckDeps['lookup'] = (host) => dnsPromises.lookup(host, { all: true, order: 'verbatim' });

function defaultDeps(): CheckDeps {
  return { lookup: defaultLookup, now: () => performance.now() };
}

export interface CheckResult {
  report: CheckReport;
  ok: boolean;
  /** The first failure as a value (null when every stage passed). */
  failure: { stage: StageName; cause: FailureCause } | null;
  proxy: string; // redacted
  target: string;
}

/** Runs the stages and the egress comparison; no output. Throws CheckUsageError for bad URLs. */
export async function performCheck(opts: CheckOptions, deps: Partial<CheckDeps> = {}): Promise<CheckResult> {
  const d: CheckDeps = { ...defaultDeps(), ...deps };
  const proxy = parseProxyUrl(opts.proxy);
  const target = parseTargetUrl(opts.target);
  const ctx: CheckContext = { proxy, target, opts, deps: d, sockets: new Set() };
  // An http:// target has no TLS stage (docs/support.md The stages).
  const plan = (Object.keys(STAGES) as StageName[]).filter((n) => n !== 'tls' || target.protocol === 'https');
  const stages: StageResult[] = [];
  let failure: CheckResult['failure'] = null;
  try {
    for (const name of plan) {
      if (failure) {
        stages.push({ name, status: 'skipped', ms: 0, detail: `not run: ${failure.stage} failed` });
        continue;
      }
      const { result, cause } = await runStage(name, STAGES[name], ctx, opts.timeouts?.[name] ?? opts.timeoutMs);
      result.detail = scrub(result.detail, proxy.password);
      stages.push(result);
      if (cause) failure = { stage: name, cause };
    }
  } finally {
    ctx.forwardResponse?.destroy();
    for (const s of ctx.sockets) s.destroy();
  }
  const egress = failure ? null : (ctx.egressIp ?? null);
  let directIp: string | null = null;
  let direct: DiagnosisInput['direct'] = 'skipped';
  if (!failure && egress && opts.direct) {
    const r = await fetchDirect(target, { ca: opts.ca, timeoutMs: opts.timeouts?.direct ?? opts.timeoutMs });
    if (r.ok) {
      directIp = r.ip;
      direct = 'ok';
    } else {
      direct = { error: r.error };
    }
  }
  const diagnosis = scrub(
    diagnose({
      failed: failure,
      proxy,
      target,
      egressIp: egress,
      directIp,
      direct,
      viaMissing: ctx.viaMissing === true,
    }),
    proxy.password,
  );
  return {
    report: { stages, egress_ip: egress, direct_ip: directIp, diagnosis, request_id: ctx.requestId ?? null },
    ok: !failure,
    failure,
    proxy: proxy.redacted,
    // The password may stand in the target too (a path, a query): never shown there either.
    target: scrub(target.href, proxy.password),
  };
}
