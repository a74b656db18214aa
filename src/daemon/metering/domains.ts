// Which domain a target's usage is kept under (docs/operations.md, "Usage per domain"): its registrable domain
// (eTLD+1) by the Public Suffix List, ICANN and private sections, as the tldts package ships it.
import { isIP } from 'node:net';
import { getDomain } from 'tldts';

/**
 * `a.b.example.co.uk` → `example.co.uk`; an IP literal under its address; a name with no registrable domain
 * (`localhost`, `co.uk`) under itself. `host` is already lower-case, without a trailing dot or brackets (the gateway's meterHost).
 */
export function registrableDomain(host: string): string {
  if (isIP(host)) return host;
  return getDomain(host, { allowPrivateDomains: true, extractHostname: false, validateHostname: false }) ?? host;
}
