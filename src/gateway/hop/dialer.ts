// The entry's dialer: every target through an exit's hop (an entry node dials nothing itself).
import {
  NO_DEDICATED_EXIT,
  type AssociateOutcome,
  type AssociateRequest,
  type Dialer,
  type DialOutcome,
  type DialRequest,
  type ExitWish,
} from '../dial/dialer.js';
import type { ExitDirectory, ExitDirectoryOptions } from './directory.js';
import type { HopLink } from './link.js';
import { HopUdpCarrier } from './udp-carrier.js';

/** What choosing an exit reads of a request (a connection's or a UDP association's). */
type Route = Pick<DialRequest, 'session' | 'exitWish' | 'onlyExits' | 'stillWanted'>;

export class HopDialer implements Dialer {
  constructor(
    private readonly dir: ExitDirectory,
    private readonly log?: ExitDirectoryOptions['log'],
  ) {}

  dial(req: DialRequest): Promise<DialOutcome> {
    return this.through(req, (link) => link.dial(req));
  }

  /**
   * A UDP association: the exit is chosen as for a connection (targeting, the session's exit); its datagrams travel
   * on the stream the exit answered on (hop/udp-carrier.ts).
   */
  async associate(req: AssociateRequest): Promise<AssociateOutcome> {
    const out = await this.through(req, (link) => link.associate(req));
    if (out === null || !out.ok) return out;
    const carrier = new HopUdpCarrier(out.socket, req);
    const { via, egress } = out;
    return { ok: true, carrier, ...(via ? { via } : {}), ...(egress ? { egress } : {}) };
  }

  private async through(req: Route, ask: (link: HopLink) => Promise<DialOutcome | 'retry'>): Promise<DialOutcome> {
    const want = req.exitWish ?? null;
    const avoid = new Set<string>();
    // An account with dedicated addresses: only exits holding them (none matching → 502 / 0x03 saying so).
    const only = req.onlyExits ?? null;
    if (only !== null) for (const e of this.dir.candidates(want)) if (!only.has(e.row.node)) avoid.add(e.row.node);
    // A hop connection that fails before the exit answers (the exit just died) is tried once more elsewhere.
    for (let attempt = 0; attempt < 3; attempt++) {
      const e = this.dir.pick(want, req.session?.key ?? null, avoid);
      if (e === null) break;
      const out = await ask(e.link);
      if (out !== 'retry') {
        if (out === null) return out;
        // The exit answered (a tunnel, or the target's failure as the exit saw it): the record names it either way.
        const movedFrom = req.session ? this.dir.notePlacement(req.session.key, e.row.node, req.session.minutes) : null;
        if (movedFrom !== null)
          this.log?.info(
            { event: 'session_moved', from: movedFrom, to: e.row.node },
            'a session moved to another exit',
          );
        return { ...out, via: { exit: e.row.node, movedFrom } };
      }
      avoid.add(e.row.node);
      if (!req.stillWanted()) return null;
    }
    return { ok: false, failure: 'no_exit', detail: only !== null ? NO_DEDICATED_EXIT : this.noExitDetail(want) };
  }

  /** What the 502 names: the country when no exit is there, else the city (as a `both` node says it). */
  private noExitDetail(want: ExitWish | null): string {
    if (want?.country && want.city && this.dir.candidates({ country: want.country, city: null }).length > 0)
      return `no exit for city ${want.city}`;
    if (want?.country) return `no exit for country ${want.country}`;
    if (want?.city) return `no exit for city ${want.city}`;
    return 'no exit available';
  }
}
