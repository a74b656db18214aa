// `proxyctl proxies export` (docs/cli.md "Proxy lists"): proxy lines from /proxy/gateway (the API key) and the password
// typed or piped in; never stored, never sent to the API. Lines go to stdout or --out (created 0600: they hold the password).
import { chmod, writeFile } from 'node:fs/promises';
import { ApiError } from '../api.js';
import type { Context } from '../context.js';
import { BadShape, getGateway, getUser, type Gateway } from '../customer-api.js';
import type { Deps } from '../deps.js';
import { CliError, looksLikeToken, UsageError } from '../errors.js';
import { Exit, type ExitCode } from '../exit-codes.js';
import { readAll } from '../io.js';
import { buildLines, formatLines, readGatewayAddress, type ExportFormat, type ExportProtocol } from '../proxy-lines.js';
import { checkUsername } from '../user-input.js';
import { keyFailure, openKeySession } from './shared.js';

export interface ExportOptions {
  ctx: Context;
  user: string;
  passwordStdin: boolean;
  protocol: ExportProtocol;
  country?: string;
  city?: string;
  sticky?: number;
  rotating: boolean;
  count: number;
  format?: ExportFormat;
  out?: string;
}

export async function runProxiesExport(opts: ExportOptions, deps: Deps): Promise<ExitCode> {
  const { ctx } = opts;
  const { out, io } = deps;
  if (opts.sticky !== undefined && opts.rotating) throw new UsageError('--sticky and --rotating do not go together');
  if (opts.country !== undefined && !/^[A-Za-z]{2}$/.test(opts.country))
    throw new UsageError(`--country: expected a two-letter country code (ISO 3166, e.g. us), got "${opts.country}"`);
  if (opts.city !== undefined && !/^[A-Za-z0-9_]{1,64}$/.test(opts.city))
    throw new UsageError(`--city: expected 1-64 of A-Z a-z 0-9 _ (e.g. nyc), got "${opts.city}"`);
  checkUsername(opts.user, '--user');
  const format: ExportFormat = opts.format ?? (ctx.json ? 'json' : 'url');
  if (opts.format !== undefined && opts.format !== 'json' && ctx.json)
    throw new UsageError(`--json and --format ${opts.format} do not go together`);

  let password: string;
  if (opts.passwordStdin || !io.stdinIsTTY) {
    password = (await readAll(io.stdin)).split('\n')[0]?.replace(/\r$/, '') ?? '';
  } else {
    password = await deps.readSecret(`Password of proxy user ${opts.user}: `);
  }
  if (password === '')
    throw new UsageError(
      `no password given for ${opts.user} (pipe it with --password-stdin, or type it at the prompt)`,
    );
  if (looksLikeToken(password))
    throw new UsageError("that is an API token or key, not the proxy user's password; nothing exported");

  const session = await openKeySession(ctx, deps);
  let gw: Gateway;
  try {
    gw = await getGateway(session.api);
    // A typo in --user is caught here rather than by every tool the lines go to; a key without users:read skips it.
    try {
      await getUser(session.api, opts.user);
    } catch (err) {
      if (err instanceof ApiError && err.httpStatus === 404)
        throw new CliError(`no proxy user "${opts.user}" in this account${err.refs()}; see \`proxyctl users list\``);
      if (!(err instanceof ApiError && err.httpStatus === 403)) throw err;
    }
  } catch (err) {
    if (err instanceof CliError) throw err;
    if (err instanceof BadShape) throw new CliError(err.message);
    throw keyFailure(err, session);
  } finally {
    await session.api.close();
  }

  const addrText = opts.protocol === 'socks5h' ? gw.socks5 : gw.http;
  if (!addrText)
    throw new CliError(
      `this service has no ${opts.protocol === 'socks5h' ? 'SOCKS5' : 'HTTP'} proxy address (the gateway endpoint names none)`,
    );
  const address = readGatewayAddress(addrText);
  if (!address) throw new CliError(`the API returned a gateway address that is not HOST:PORT: "${addrText}"`);
  // Targeting no exit serves is refused by the gateway (502 "no exit for country …"): said now, not by every tool.
  if (opts.country !== undefined || opts.city !== undefined) {
    const cc = opts.country?.toLowerCase();
    const city = opts.city?.toLowerCase();
    const known = gw.locations.map((l) => l.country).join(', ') || 'none';
    const loc = cc === undefined ? undefined : gw.locations.find((l) => l.country.toLowerCase() === cc);
    if (cc !== undefined && !loc)
      out.warn(
        `no exit serves country ${cc} now (the gateway's countries: ${known}); connections through these lines are refused until one does`,
      );
    else if (
      city !== undefined &&
      !(loc ? [loc] : gw.locations).some((l) => l.cities.map((c) => c.toLowerCase()).includes(city))
    ) {
      out.warn(
        `no exit serves city ${city}${cc ? ` in ${cc}` : ''} now; connections through these lines are refused until one does`,
      );
    }
  }

  const lines = buildLines(address, {
    user: opts.user,
    password,
    protocol: opts.protocol,
    ...(opts.country !== undefined ? { country: opts.country } : {}),
    ...(opts.city !== undefined ? { city: opts.city } : {}),
    ...(opts.sticky !== undefined ? { stickyMinutes: opts.sticky } : {}),
    rotating: opts.rotating,
    count: opts.count,
  });
  const text = formatLines(lines, format);
  // `-` is stdout, as `--file -` is stdin elsewhere (not a file named "-").
  if (opts.out === undefined || opts.out === '-') {
    io.stdout.write(text);
    return Exit.OK;
  }
  try {
    await writeFile(opts.out, text, { mode: 0o600 });
    await chmod(opts.out, 0o600);
  } catch (err) {
    throw new CliError(`cannot write ${opts.out}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  out.info(
    `${lines.length} ${lines.length === 1 ? 'line' : 'lines'} written to ${opts.out} (mode 0600: it holds the password)`,
  );
  return Exit.OK;
}
