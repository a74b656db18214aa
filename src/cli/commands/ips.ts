// `proxyctl ips list|replace` (docs/cli.md "Dedicated addresses"): the account's dedicated egress addresses through the
// customer API with the API key (`users:read` / `users:write`). A replacement carries an Idempotency-Key and is resent
// with the same key after a timeout, a cut connection or a 5xx; the month's allowance (10429, Retry-After to the
// month's end) and "no free address" are final answers, never waited out.
import { isStrictIPv4 } from '../../contract/ipv4.js';
import { IPS_PATHS } from '../../contract/paths.js';
import { IpReplaceDataSchema, IpsDataSchema, type IpsData } from '../../contract/schemas.js';
import { formatSize } from '../../contract/size.js';
import { ApiError, isRateLimited, isTransient } from '../api.js';
import type { Context } from '../context.js';
import { BadShape, isStillInProgress, newIdempotencyKey } from '../customer-api.js';
import type { Deps } from '../deps.js';
import { CliError, UsageError } from '../errors.js';
import { Exit, type ExitCode } from '../exit-codes.js';
import { terminalSafe, renderTsv } from '../output.js';
import { withKey } from './with-key.js';

/** A key-limit 10429 waits its Retry-After when at most this long; the month's allowance is never waited out. */
const MAX_WAIT_MS = 60_000;
const RESENDS = 3;

function parse<T>(
  schema: { safeParse(v: unknown): { success: true; data: T } | { success: false } },
  data: unknown,
  what: string,
): T {
  const r = schema.safeParse(data);
  if (!r.success) throw new BadShape(`the API returned ${what} in an unexpected shape`);
  return r.data;
}

export async function runIpsList(opts: { ctx: Context }, deps: Deps): Promise<ExitCode> {
  const { ctx } = opts;
  const { out } = deps;
  const doc: IpsData = await withKey(ctx, deps, async (api) =>
    parse(IpsDataSchema, (await api.request('GET', IPS_PATHS.list)).data, 'a list of addresses'),
  );
  if (ctx.json) {
    out.writeJson(doc);
    return Exit.OK;
  }
  const left = Math.max(0, doc.replacements.limit - doc.replacements.used);
  if (!deps.io.stdoutIsTTY) {
    if (doc.items.length)
      out.line(
        renderTsv(doc.items.map((i) => [i.address, i.country ?? '', i.city ?? '', i.since, i.bytes_up, i.bytes_down])),
      );
    return Exit.OK;
  }
  if (doc.items.length === 0) {
    out.line('This account holds no dedicated addresses: its traffic leaves from the shared pool.');
    return Exit.OK;
  }
  out.line(
    out.table(
      ['Address', 'Country', 'City', 'Since (UTC)', 'Up', 'Down'],
      doc.items.map((i) => [
        i.address,
        terminalSafe((i.country ?? '-').toUpperCase()),
        terminalSafe(i.city ?? '-'),
        i.since,
        formatSize(i.bytes_up),
        formatSize(i.bytes_down),
      ]),
    ),
  );
  out.line(
    out.paint(
      'dim',
      `bytes since ${doc.period_start}; replacements left this month: ${left} of ${doc.replacements.limit}`,
    ),
  );
  return Exit.OK;
}

export async function runIpsReplace(
  opts: { ctx: Context; address: string; yes: boolean },
  deps: Deps,
): Promise<ExitCode> {
  const { ctx, address } = opts;
  if (!isStrictIPv4(address))
    throw new UsageError(`ADDRESS: "${terminalSafe(address)}" is not an IPv4 address A.B.C.D`);
  if (!opts.yes) {
    if (!deps.io.stdinIsTTY || !deps.io.stderrIsTTY)
      throw new UsageError(`replacing ${address} needs --yes when not on a terminal`);
    const { askYesNo } = await import('../prompt.js');
    const ok = await askYesNo(
      deps.io.stdin,
      deps.io.stderr,
      `Replace ${address}? It uses one of this month's replacements, and connections open from it end.`,
    );
    if (!ok) {
      deps.out.info('nothing replaced');
      return Exit.ERROR;
    }
  }
  const swapped = await withKey(ctx, deps, async (api) => {
    const key = newIdempotencyKey();
    for (let attempt = 0; ; attempt++) {
      try {
        const env = await api.request('POST', IPS_PATHS.replace, { body: { address }, idempotencyKey: key });
        return parse(IpReplaceDataSchema, env.data, 'a replacement');
      } catch (err) {
        if (attempt >= RESENDS) throw err;
        if (err instanceof ApiError && /no free address/.test(err.message)) throw err;
        if (isRateLimited(err)) {
          // The key's own limit (seconds) is waited for; the month's allowance (weeks) is the answer.
          if (err.retryAfterMs !== undefined && err.retryAfterMs > MAX_WAIT_MS) {
            const when = new Date(deps.clock.now() + err.retryAfterMs).toISOString().slice(0, 10);
            throw new CliError(`${err.describe()}; more from ${when} (UTC)`, Exit.RATE_LIMITED);
          }
          if (err.retryAfterMs === undefined) throw err;
          deps.out.info(`waiting ${Math.ceil(err.retryAfterMs / 1000)} s (the server asked: Retry-After)`);
          await deps.clock.sleep(err.retryAfterMs);
          continue;
        }
        if (!isTransient(err) && !isStillInProgress(err)) throw err;
        const ms = 1000 * 2 ** attempt;
        deps.out.info(`waiting ${Math.ceil(ms / 1000)} s before a resend (same Idempotency-Key)`);
        await deps.clock.sleep(ms);
      }
    }
  });
  if (ctx.json) deps.out.writeJson(swapped);
  else
    deps.out.line(
      `${deps.out.paint('green', '✓')} Replaced ${swapped.old} with ${swapped.new}; connections open from ${swapped.old} end within seconds`,
    );
  return Exit.OK;
}
