// What a customer needs to build proxy URLs (docs/api.md, "Gateway"): the addresses customers reach (`--public-host`
// when set, else the listeners' own host), whether SOCKS5 UDP is served, and where connections can exit: the fleet's
// live exits by country and city (an entry node), or this node's own `--location` (a node that dials itself).
import { formatHostPort, type HostPort } from '../../rules/host-port.js';
import type { GatewayData } from '../../contract/proxy-schemas.js';
import { EXIT_STALE_MS } from '../../gateway/index.js';
import type { Store } from '../store/index.js';

/** The node's gateway as serve started it (filled in once its listeners are bound). */
export interface GatewayFacts {
  role: 'both' | 'entry' | 'exit';
  /** `--public-host`: the host customers reach; null: the listeners' own. */
  publicHost: string | null;
  http: HostPort | null;
  socks5: HostPort | null;
  location: { country: string; city: string | null } | null;
}

export const NO_GATEWAY: GatewayFacts = { role: 'both', publicHost: null, http: null, socks5: null, location: null };

function reached(hp: HostPort | null, publicHost: string | null): string | null {
  return hp && formatHostPort(publicHost ?? hp.host, hp.port);
}

export async function gatewayInfo(store: Store, g: GatewayFacts): Promise<GatewayData> {
  const byCountry = new Map<string, { cities: Set<string>; exits: number }>();
  const add = (country: string | null, city: string | null): void => {
    if (!country) return;
    let c = byCountry.get(country);
    if (!c) byCountry.set(country, (c = { cities: new Set(), exits: 0 }));
    c.exits++;
    if (city) c.cities.add(city);
  };
  if (g.role === 'entry' && store.exits) {
    for (const e of await store.exits.list(EXIT_STALE_MS)) add(e.country, e.city);
  } else if (g.role === 'both' && g.location) add(g.location.country, g.location.city);
  return {
    http: reached(g.http, g.publicHost),
    socks5: reached(g.socks5, g.publicHost),
    udp: g.socks5 !== null,
    locations: [...byCountry]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([country, c]) => ({ country, cities: [...c.cities].sort(), exits: c.exits })),
  };
}
