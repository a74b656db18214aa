// An exit's side of the exit registry: heartbeat its row (hop address, location, certificate fingerprints)
// every second, take the operator's requests for a new certificate, and leave the registry at stop. The
// entries' side (reading the registry, probing, picking an exit) is the gateway's (src/gateway/hop/).
import { EXIT_STALE_MS } from '../../gateway/index.js';
import type { ExitStore } from '../store/types.js';
import type { HopIdentityKeeper } from './hop-identity.js';

export { EXIT_STALE_MS as STALE_MS };

export class ExitHeartbeat {
  private timer: NodeJS.Timeout | null = null;
  private lastFailureLog = 0;
  private registered = false;
  private beating = false;

  constructor(
    private readonly store: ExitStore,
    private readonly me: { node: string; hop: string; country: string | null; city: string | null },
    private readonly identity: HopIdentityKeeper,
    private readonly log?: { warn(obj: object, msg?: string): void },
  ) {}

  /**
   * The first heartbeat (the exit is registered before its ready line), then one every second. Another live
   * exit of the same name (a fresh heartbeat from another hop address) stops the start: the two would
   * overwrite each other's row.
   */
  async start(): Promise<void> {
    const twin = (await this.store.list(EXIT_STALE_MS)).find((r) => r.node === this.me.node && r.hop !== this.me.hop);
    if (twin)
      throw new Error(
        `--node-name ${this.me.node}: another exit of that name is running (hop ${twin.hop}); give each exit its own name`,
      );
    await this.store.heartbeat({ ...this.me, fingerprints: this.identity.fingerprints() });
    this.registered = true;
    this.timer = setInterval(() => void this.beat(), 1_000);
    this.timer.unref();
  }

  private async beat(): Promise<void> {
    if (this.beating) return;
    this.beating = true;
    try {
      // The database's answer, if it gives one: an operator's request for a new certificate.
      const asked = await this.store.claimCertRotation(this.me.node).catch((e: unknown) => {
        this.failed('exit_heartbeat_failed', e);
        return false;
      });
      // The certificate files are followed (and renewed) whether or not the database answers: a worker must
      // serve what another worker of this exit switched to.
      try {
        this.identity.tick(asked);
      } catch (e) {
        this.failed('hop_certificate_renewal_failed', e);
      }
      await this.store
        .heartbeat({ ...this.me, fingerprints: this.identity.fingerprints() })
        .catch((e: unknown) => this.failed('exit_heartbeat_failed', e));
    } finally {
      this.beating = false;
    }
  }

  private failed(event: string, e: unknown): void {
    const now = Date.now();
    if (now - this.lastFailureLog < 10_000) return;
    this.lastFailureLog = now;
    this.log?.warn(
      { event, detail: e instanceof Error ? e.message : String(e) },
      event === 'exit_heartbeat_failed' ? 'exit heartbeat not written' : 'hop certificate not renewed',
    );
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    // Only its own row: a start refused for a name in use must not take the other exit's registration.
    if (this.registered) await this.store.remove(this.me.node).catch(() => {});
  }
}
