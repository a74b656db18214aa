// `check --repeat N`: per-stage timing percentiles and failures counted by stage, over many runs.
import type { CheckResult } from './runner.js';
import { STAGE_NAMES, type StageName } from './types.js';

interface StageStats {
  name: StageName;
  /** Runs in which the stage ran (ok or failed; skipped runs are not counted). */
  runs: number;
  failed: number;
  p50_ms: number | null;
  p95_ms: number | null;
  max_ms: number | null;
}

export interface RepeatSummary {
  runs: number;
  ok: number;
  failed: number;
  stages: StageStats[];
  /** Failed runs by the stage that failed. */
  failures_by_stage: Partial<Record<StageName, number>>;
  /** Each distinct diagnosis of a failed run, with how often it came. */
  diagnoses: Array<{ diagnosis: string; count: number }>;
}

/** Nearest-rank percentile of sorted values. */
export function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1]!;
}

export function summarize(results: CheckResult[]): RepeatSummary {
  const stages: StageStats[] = [];
  for (const name of STAGE_NAMES) {
    const ran = results.flatMap((r) => r.report.stages.filter((s) => s.name === name && s.status !== 'skipped'));
    if (ran.length === 0) continue;
    const ms = ran.map((s) => s.ms).sort((a, b) => a - b);
    stages.push({
      name,
      runs: ran.length,
      failed: ran.filter((s) => s.status === 'fail').length,
      p50_ms: percentile(ms, 50),
      p95_ms: percentile(ms, 95),
      max_ms: ms[ms.length - 1] ?? null,
    });
  }
  const failures_by_stage: RepeatSummary['failures_by_stage'] = {};
  const diagnoses = new Map<string, number>();
  for (const r of results) {
    if (!r.failure) continue;
    failures_by_stage[r.failure.stage] = (failures_by_stage[r.failure.stage] ?? 0) + 1;
    diagnoses.set(r.report.diagnosis, (diagnoses.get(r.report.diagnosis) ?? 0) + 1);
  }
  const failed = results.filter((r) => !r.ok).length;
  return {
    runs: results.length,
    ok: results.length - failed,
    failed,
    stages,
    failures_by_stage,
    diagnoses: [...diagnoses].map(([diagnosis, count]) => ({ diagnosis, count })),
  };
}

/** How many runs left the proxy from each egress IP, most used first (rotation vs a sticky session at a glance). */
export function egressCounts(results: CheckResult[]): Array<{ ip: string; count: number }> {
  const counts = new Map<string, number>();
  for (const r of results)
    if (r.report.egress_ip) counts.set(r.report.egress_ip, (counts.get(r.report.egress_ip) ?? 0) + 1);
  return [...counts].map(([ip, count]) => ({ ip, count })).sort((a, b) => b.count - a.count);
}
