// Stage dns: resolve the proxy's host name.
import { isIP } from 'node:net';
import { fail, ok, type StageFn } from './stage.js';

const DNS_TEXT: Record<string, string> = {
  ENOTFOUND: 'name does not resolve (ENOTFOUND)',
  ENODATA: 'name has no address records (ENODATA)',
  EAI_AGAIN: 'temporary DNS failure (EAI_AGAIN): the resolver did not answer',
  ESERVFAIL: 'DNS server failure (ESERVFAIL)',
  EREFUSED: 'DNS query refused (EREFUSED)',
};

export const dnsStage: StageFn = async (ctx) => {
  const { host } = ctx.proxy;
  const family = isIP(host);
  if (family !== 0) {
    ctx.proxyAddress = { address: host, family };
    return ok(`${host} (IP literal, no lookup)`);
  }
  try {
    const addrs = await ctx.deps.lookup(host);
    // Prefer IPv4: the gateway admits by source IPv4.
    const first = addrs.find((a) => a.family === 4) ?? addrs[0];
    if (!first) return fail(`${host}: no addresses`, { kind: 'dns', code: 'ENODATA' });
    ctx.proxyAddress = { address: first.address, family: first.family };
    const more = addrs.length > 1 ? ` (+${addrs.length - 1} more)` : '';
    return ok(`${host} -> ${first.address}${more}`);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'ERROR';
    return fail(`${host}: ${DNS_TEXT[code] ?? `${code}: ${(err as Error).message}`}`, { kind: 'dns', code });
  }
};
