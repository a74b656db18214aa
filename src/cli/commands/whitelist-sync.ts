// `proxyctl whitelist sync --file F|-`: the file is the truth. Reads every page, plans add / delete /
// unchanged, prints the plan, asks (TTY) or needs --yes (deletes off a TTY), then runs the plan with
// the batch engine. Every run plans from the live list, so an interrupted run converges when run again.
import type { FailedItem, WhitelistItem } from '../../contract/index.js';
import { isStrictIPv4 } from '../../rules/ipv4-syntax.js';
import { runBatches, type BatchItem, type BatchOp, type BatchRunResult } from '../batch.js';
import type { Context } from '../context.js';
import type { Deps } from '../deps.js';
import { UsageError } from '../errors.js';
import { Exit, type ExitCode } from '../exit-codes.js';
import { collectItems } from '../input.js';
import { apiFailure, openSession, rejectedTokenHint } from './shared.js';
import { listAll } from './whitelist-list.js';
import { terminalSafe } from '../output.js';

interface SyncOptions {
  ctx: Context;
  /** --file, once or more: together they are the whole whitelist. */
  files: string[];
  dryRun: boolean;
  yes: boolean;
  /** A changed remark is applied as delete + add; without it the entry counts as unchanged. */
  updateRemarks: boolean;
  retry: number;
}

interface SyncPlan {
  add: BatchItem[];
  delete: string[];
  /** Listed in both with another remark: delete + add with --update-remarks, else unchanged. */
  remarkChanges: BatchItem[];
  /** In both with the same remark. */
  same: number;
}

/** The JSON document of a sync (docs/cli.md): counts, and with --dry-run the planned IPs. */
interface SyncDoc {
  added: number;
  deleted: number;
  unchanged: number;
  failed_items: FailedItem[];
  dry_run: boolean;
  plan?: { add: string[]; delete: string[]; update_remarks: string[] };
}

export function planSync(current: WhitelistItem[], desired: BatchItem[]): SyncPlan {
  const now = new Map(current.map((i) => [i.ip, i.remark] as const));
  const want = new Set(desired.map((d) => d.ip));
  const plan: SyncPlan = { add: [], delete: [], remarkChanges: [], same: 0 };
  for (const d of desired) {
    const remark = now.get(d.ip);
    if (remark === undefined) plan.add.push(d);
    else if (remark === (d.remark ?? '')) plan.same++;
    else plan.remarkChanges.push(d);
  }
  for (const c of current) if (!want.has(c.ip)) plan.delete.push(c.ip);
  return plan;
}

const SHOWN = 10;

function printPlan(plan: SyncPlan, opts: SyncOptions, deps: Deps): void {
  const { out } = deps;
  const upd = opts.updateRemarks ? plan.remarkChanges.length : 0;
  const unchanged = plan.same + (opts.updateRemarks ? 0 : plan.remarkChanges.length);
  out.line(
    `plan: ${out.paint('green', `${plan.add.length + upd} to add`)}, ${out.paint('red', `${plan.delete.length + upd} to delete`)}, ${unchanged} unchanged`,
  );
  const list = (sign: string, rows: string[]) => {
    for (const r of rows.slice(0, SHOWN)) out.line(`  ${sign} ${r}`);
    if (rows.length > SHOWN) out.line(out.paint('dim', `  … and ${rows.length - SHOWN} more`));
  };
  list(
    '+',
    plan.add.map((i) => (i.remark ? `${i.ip}=${i.remark}` : i.ip)),
  );
  list('-', plan.delete);
  if (plan.remarkChanges.length > 0) {
    if (opts.updateRemarks)
      list(
        '~',
        plan.remarkChanges.map((i) => `${i.ip}=${i.remark ?? ''} (delete + add)`),
      );
    else
      out.line(
        out.paint(
          'dim',
          `  ${plan.remarkChanges.length} listed with another remark: left as they are (--update-remarks applies them)`,
        ),
      );
  }
}

export async function runSync(opts: SyncOptions, deps: Deps): Promise<ExitCode> {
  const { ctx } = opts;
  const { out } = deps;
  const { items: desired, duplicates } = await collectItems({
    args: [],
    files: opts.files,
    remarks: true,
    stdin: deps.io.stdin,
  });
  if (duplicates > 0)
    out.info(
      `${duplicates} repeated ${duplicates === 1 ? 'IP' : 'IPs'} folded into ${duplicates === 1 ? 'its' : 'their'} first occurrence`,
    );
  // The file is the whole whitelist, and deletes go first: a line that is not an IPv4 address as the API writes
  // it (a typo, `008.008.003.003`) would delete the entry it meant and then fail to add. Refused before anything.
  const bad = desired.filter((i) => !isStrictIPv4(i.ip));
  if (bad.length > 0) {
    const shown = bad
      .slice(0, 5)
      .map((i) => terminalSafe(i.ip))
      .join(', ');
    throw new UsageError(
      `${bad.length} ${bad.length === 1 ? 'line is' : 'lines are'} not an IPv4 address in dotted decimal (${shown}${bad.length > 5 ? ', …' : ''}): nothing was changed`,
    );
  }

  const { api, resolved } = await openSession(ctx, deps);
  try {
    let current: WhitelistItem[];
    try {
      current = (await listAll(api, deps.clock, { status: 'all' }, opts.retry)).items;
    } catch (err) {
      throw apiFailure(err, resolved.source);
    }
    const plan = planSync(current, desired);
    const updates = opts.updateRemarks ? plan.remarkChanges : [];
    const toDelete = [...plan.delete, ...updates.map((i) => i.ip)];
    // Remark updates are deleted last and added back first: between the two the IP is out of the whitelist
    // (the gateway refuses it, another account could take it), so no other batch may wait in that gap.
    const toAdd = [...updates, ...plan.add];
    const unchanged = plan.same + (opts.updateRemarks ? 0 : plan.remarkChanges.length);
    const doc: SyncDoc = { added: 0, deleted: 0, unchanged, failed_items: [], dry_run: opts.dryRun };

    if (!ctx.json) printPlan(plan, opts, deps);
    if (opts.dryRun || (toDelete.length === 0 && toAdd.length === 0)) {
      if (opts.dryRun)
        doc.plan = { add: plan.add.map((i) => i.ip), delete: plan.delete, update_remarks: updates.map((i) => i.ip) };
      if (ctx.json) out.writeJson(opts.dryRun ? { ...doc, added: toAdd.length, deleted: toDelete.length } : doc);
      else if (!opts.dryRun) out.line('nothing to do: the whitelist already matches the file');
      return Exit.OK;
    }
    if (!opts.yes) {
      if (deps.io.stdinIsTTY && !opts.files.includes('-')) {
        const { askYesNo } = await import('../prompt.js');
        if (
          !(await askYesNo(
            deps.io.stdin,
            deps.io.stderr,
            `Add ${toAdd.length} and delete ${toDelete.length} whitelist entries?`,
          ))
        ) {
          out.info('nothing changed');
          return Exit.OK;
        }
      } else if (toDelete.length > 0) {
        throw new UsageError(
          `the plan deletes ${toDelete.length} ${toDelete.length === 1 ? 'entry' : 'entries'}: pass --yes to confirm when not on a terminal (--dry-run shows the plan)`,
        );
      }
    }

    let stop: BatchRunResult['stop'];
    const run = async (op: BatchOp, items: BatchItem[]) => {
      if (items.length === 0) return;
      if (stop) {
        // An earlier phase stopped the run: these were not tried.
        for (const i of items) doc.failed_items.push({ ip: i.ip, code: 0, reason: `not processed: ${stop.message}` });
        return;
      }
      const progress = await deps.progress();
      try {
        const r = await runBatches({
          op,
          items,
          api,
          clock: deps.clock,
          retry: opts.retry,
          doneIsDone: true,
          ...(progress ? { onProgress: (p) => progress.update(p, op === 'add' ? 'adding' : 'deleting') } : {}),
        });
        const done = r.summary.success_count + r.summary.already_done;
        if (op === 'add') doc.added = done;
        else doc.deleted = done;
        doc.failed_items.push(...r.summary.failed_items);
        stop = r.stop;
      } finally {
        progress?.stop();
      }
    };
    // Deletes first: an IP moved between remarks must be gone before it is added again.
    await run(
      'delete',
      toDelete.map((ip) => ({ ip })),
    );
    await run('add', toAdd);

    if (ctx.json) out.writeJson(doc);
    else printResult(doc, deps, ctx.quiet);
    if (stop) {
      out.error(stop.exitCode === Exit.AUTH ? `${stop.message}; ${rejectedTokenHint(resolved.source)}` : stop.message);
      return stop.exitCode;
    }
    return doc.failed_items.length > 0 ? Exit.ITEMS_FAILED : Exit.OK;
  } finally {
    await api.close();
  }
}

function printResult(doc: SyncDoc, deps: Deps, quiet: boolean): void {
  const { out } = deps;
  const failed = doc.failed_items.length;
  if (quiet && failed === 0) return;
  out.line(
    `${out.paint('green', `${doc.added} added`)}, ${doc.deleted} deleted, ${doc.unchanged} unchanged, ${failed > 0 ? out.paint('red', `${failed} failed`) : '0 failed'}`,
  );
  if (failed > 0)
    out.line(
      out.table(
        ['IP', 'Code', 'Reason'],
        doc.failed_items.map((f) => [terminalSafe(f.ip), f.code, terminalSafe(f.reason)]),
      ),
    );
}
