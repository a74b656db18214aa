// One line naming the likely cause and what to try, built from the failing stage's cause value.
import { formatHostPort } from '../../rules/host-port.js';
import { hex, socksReplyName } from './socks5.js';
import type { FailureCause, StageName } from './types.js';
import type { ProxySpec, TargetSpec } from './urls.js';

export interface DiagnosisInput {
  failed: { stage: StageName; cause: FailureCause } | null;
  proxy: ProxySpec;
  target: TargetSpec;
  egressIp: string | null;
  directIp: string | null;
  /** null: not attempted (--no-direct); string: why the direct request failed. */
  direct: 'skipped' | 'ok' | { error: string };
  /** An HTTP proxy forwarded the request but its answer carries no Via (RFC 9110 7.6.3). */
  viaMissing?: boolean;
}

const TIMEOUT_HINT: Record<StageName, string> = {
  dns: 'the DNS resolver did not answer in time; check the network/DNS settings or use the proxy IP address',
  tcp: 'no answer to the TCP connect: a firewall drops the traffic, or the host is down; check host, port and outbound firewall rules',
  auth: 'the proxy accepted the connection but never answered: it may be stuck reaching the target (an HTTP proxy answers a request for an http:// target only once the target has), this port may speak another protocol (HTTP vs SOCKS5), or the gateway is overloaded; try another target, and check the port and the URL scheme',
  connect:
    'the proxy never answered the CONNECT: the target is slow or unreachable from the proxy; try another target or raise --timeout',
  tls: 'the TLS handshake with the target stalled: the target port may not speak TLS, or something in between holds the tunnel; check the target URL scheme and port',
  status: 'the target accepted the request but did not answer in time; try another target or raise --timeout',
};

function failureLine(stage: StageName, cause: FailureCause, proxy: ProxySpec, target: TargetSpec): string {
  const gw = formatHostPort(proxy.host, proxy.port);
  switch (cause.kind) {
    case 'timeout':
      return `The ${stage} stage timed out after ${cause.ms} ms: ${TIMEOUT_HINT[stage]}.`;
    case 'dns':
      return cause.code === 'EAI_AGAIN'
        ? `The proxy host name ${proxy.host} could not be resolved right now (resolver not answering): check the DNS settings of this machine, or use the proxy's IP address.`
        : `The proxy host name ${proxy.host} does not resolve: check its spelling in the proxy URL, or use the proxy's IP address.`;
    case 'tcp':
      if (cause.code === 'ECONNREFUSED')
        return `Nothing accepts connections on ${gw}: wrong port, or the proxy service is down; check the port in the proxy URL and that the gateway runs.`;
      if (cause.code === 'EHOSTUNREACH' || cause.code === 'ENETUNREACH')
        return `No route to ${proxy.host}: check this machine's network connection and any VPN or firewall.`;
      return `Cannot open a TCP connection to ${gw} (${cause.code}): check host, port and outbound firewall rules.`;
    case 'closed':
      return stage === 'auth'
        ? `The proxy closed the connection ${cause.during}: this port may speak another protocol (HTTP vs SOCKS5: check the URL scheme), or the gateway refused the connection (connection limit, PROXY-protocol rules).`
        : `The connection was closed ${cause.during}: retry; if it persists the proxy or the target drops the connection.`;
    case 'not_http_proxy':
      return `${gw} does not answer like an HTTP proxy: check the port, or use socks5h:// if it is a SOCKS5 port.`;
    case 'not_socks5':
      return `${gw} does not answer like a SOCKS5 proxy: check the port, or use http:// if it is an HTTP proxy port.`;
    case 'proxy_auth_required':
      return cause.withCredentials
        ? `The proxy rejected the username or password (${cause.status ?? 407}): check the proxy user's credentials (reset the password in the console), and that the account is active.`
        : `Your source IP is not whitelisted (${cause.status ?? 407} without credentials): add this machine's public IP with \`proxyctl whitelist add --current\` (allow up to a second), or put proxy credentials in the URL.`;
    case 'socks_no_method':
      return cause.withCredentials
        ? 'The SOCKS5 proxy accepts none of the offered methods (0xFF): it may not support username/password; check the proxy address.'
        : `Your source IP is not whitelisted (SOCKS5 method 0xFF without credentials): add this machine's public IP with \`proxyctl whitelist add --current\`, or put proxy credentials in the URL.`;
    case 'socks_auth_failed':
      return `The SOCKS5 proxy rejected the username or password (RFC 1929 status ${hex(cause.status)}): check the proxy user's credentials (reset the password in the console), and that the account is active.`;
    case 'http_connect_status': {
      const said = cause.body ? `: "${cause.body}"` : '';
      // What the proxy said in a header (Proxy-Status, X-Squid-Error) outranks what its status usually means.
      switch (cause.proxyError) {
        case 'refused':
          return `The target ${target.hostHeader} refused the proxy's connection (${cause.status}${said}): nothing listens there; check the target port.`;
        case 'dns':
          return `The target name ${target.host} does not resolve at the proxy (${cause.status}${said}): check its spelling in the target URL.`;
        case 'timeout':
          return `The proxy timed out reaching ${target.hostHeader} (${cause.status}${said}): the target is slow or filtered; try another target.`;
        case 'unreachable':
          return `The proxy could not reach ${target.hostHeader} (${cause.status}${said}): the target is down or unroutable from the proxy; check the target.`;
        case 'unavailable':
          return `The proxy has no way to ${target.hostHeader} now (${cause.status}${said}): with -country-/-city- in the username, no exit serves that location (check the targeting); otherwise retry later.`;
      }
      if (cause.status === 403) return refused403(target.host, cause.body ?? '', said);
      if (cause.status === 502)
        return `The proxy could not reach ${target.hostHeader} (502${said}): the target is down, refuses connections or its name does not resolve at the proxy; check the target URL and port.`;
      if (cause.status === 504)
        return `The proxy timed out reaching ${target.hostHeader} (504${said}): the target is slow or filtered; try another target.`;
      if (cause.status === 429 || cause.status === 503)
        return `The proxy is busy or limits this account (${cause.status}${said}): too many connections at once; retry later or close idle connections.`;
      return `The proxy answered the CONNECT with ${cause.status}${cause.reason ? ` ${cause.reason}` : ''}${said}: check the target host and port.`;
    }
    case 'socks_reply':
      switch (cause.code) {
        // SOCKS5 has one code for every refusal of policy: the connection log has the reason.
        case 0x02:
          return `The proxy does not allow this connection to ${target.host} (SOCKS5 reply 0x02, not allowed): a private, loopback or reserved target, the account's or the provider's target rules, an expired plan, a used-up traffic limit, or too many connections at once; the reason is in the connection log (console, Connections page), or try over http:// for the proxy's own words.`;
        case 0x03:
        case 0x04:
          return `The proxy could not reach ${target.hostHeader} (SOCKS5 reply ${hex(cause.code)}, ${socksReplyName(cause.code)}): the name may not resolve at the proxy or the host is down; check the target.`;
        case 0x05:
          return `The target ${target.hostHeader} refused the proxy's connection (SOCKS5 reply 0x05): nothing listens there; check the target port.`;
        case 0x06:
          return `The proxy timed out reaching ${target.hostHeader} (SOCKS5 reply 0x06): the target is slow or filtered; try another target.`;
        case 0x07:
        case 0x08:
          return `The SOCKS5 proxy does not support this request (reply ${hex(cause.code)}, ${socksReplyName(cause.code)}): use socks5h:// with a host name, or an IPv4 target.`;
        default:
          return `The SOCKS5 proxy failed the CONNECT (reply ${hex(cause.code)}, ${socksReplyName(cause.code)}): retry; if it persists, report it to the provider.`;
      }
    case 'target_dns':
      return `The target ${target.host} does not resolve on this machine (socks5:// resolves locally): use socks5h:// to let the proxy resolve it, or fix local DNS.`;
    case 'tls':
      switch (cause.reason) {
        case 'expired':
          return `The target's TLS certificate has expired: the target site must renew it (or check this machine's clock); the proxy is working.`;
        case 'not_yet_valid':
          return `The target's TLS certificate is not valid yet: check this machine's clock; the proxy is working.`;
        case 'wrong_host':
          return `The target's certificate does not name ${target.host}: wrong host name in the target URL, or something intercepts TLS; use the host name the certificate is issued for.`;
        case 'self_signed':
          return `The target uses a self-signed certificate: trust it with --ca FILE if it is yours, otherwise something may intercept TLS; the proxy tunnel itself works.`;
        case 'untrusted':
          return `The target's certificate is issued by an untrusted CA: add that CA with --ca FILE if it is a private CA, otherwise something may intercept TLS; the proxy tunnel itself works.`;
        case 'handshake':
          return `The TLS handshake with the target failed: the target port may not speak TLS (try an http:// target) or its TLS setup is broken; the proxy tunnel itself works.`;
        default:
          return `TLS with the target failed (${cause.code}): see the detail; the proxy tunnel itself works.`;
      }
    case 'not_a_proxy':
      return `${gw} is not a proxy: it answered ${cause.status} without the Via header a proxy adds, so the answer came from a web server or API (the API port, perhaps). Use the HTTP proxy port (or the SOCKS5 port with socks5h://) in --proxy.`;
    case 'target_status':
      return `The proxy works; the target itself answered ${cause.status}: try another target (an IP echo service such as proxyd's /ip).`;
    case 'protocol':
      return `Unexpected answer from the proxy (${cause.message}): check that the URL scheme matches the port (http:// vs socks5h://).`;
    case 'bad_option':
      return cause.message;
  }
}

export function diagnose(input: DiagnosisInput): string {
  if (input.failed) return failureLine(input.failed.stage, input.failed.cause, input.proxy, input.target);
  const { egressIp, directIp } = input;
  if (!egressIp)
    return `All stages passed, but the target's answer holds no IP, so the egress cannot be compared: use an IP echo target (JSON {"ip":…} or a plain-text IP).`;
  if (input.viaMissing) {
    return `Warning: the answer carries no Via header, so it may not have come through a proxy: ${formatHostPort(input.proxy.host, input.proxy.port)} may be a web server or the API rather than the proxy port (a few proxies hide themselves; proxyd always adds Via).`;
  }
  if (input.direct === 'skipped')
    return `All stages passed: traffic leaves the proxy as ${egressIp} (direct comparison skipped).`;
  if (typeof input.direct === 'object')
    return `All stages passed: traffic leaves the proxy as ${egressIp}; the direct request failed (${input.direct.error}), so the egress was not compared.`;
  if (!directIp)
    return `All stages passed: traffic leaves the proxy as ${egressIp}; the direct answer held no IP, so the egress was not compared.`;
  if (egressIp === directIp)
    return `Warning: the egress IP ${egressIp} equals your direct IP: traffic may not be going through the proxy (or the proxy exits from this machine's own address); check the proxy settings of the client.`;
  return `All stages passed: traffic leaves the proxy as ${egressIp} (direct: ${directIp}).`;
}

/**
 * What a gateway's 403 says it is about: its text (proxyd's `Proxy-Status` details, repeated in the body) names the
 * cause, each with its own remedy (docs/support.md, the reasons). Another proxy's 403 reads as the usual one.
 */
function refused403(host: string, text: string, said: string): string {
  if (/denied by account policy/i.test(text))
    return `The account's target rules deny ${host} (403${said}): the account owner can change them in the console (Account, Target rules); or use another target. The proxy works.`;
  if (/denied by service policy/i.test(text))
    return `The provider's own target rules deny ${host} (403${said}): this target is not allowed on the service; use another target. The proxy works.`;
  if (/plan has expired/i.test(text))
    return `The account's plan has expired (403${said}): renew the plan (the console's Usage page shows it); nothing else is wrong.`;
  if (/traffic limit/i.test(text))
    return `The account has used up its traffic for this period (403${said}): wait for the next period or raise the plan's limit (the console's Usage page shows it).`;
  return `The proxy refuses to reach ${host} (403${said}): it blocks private, loopback and reserved addresses and its own listeners; use a public target.`;
}
