// The fleet's hop secret as this node knows it, read from the database every second. An entry proves the
// newest and the one before it (so an exit that has not read a rotation yet still accepts it); an exit
// accepts the newest, and the one before it for its --hop-grace after the rotation, then only the newest.
import { randomBytes } from 'node:crypto';
import { DAY_MS } from '../../rules/time.js';
import type { ExitStore, HopSecretState } from '../store/types.js';

const READ_EVERY_MS = 1_000;
/** An entry stops offering the replaced secret this long after a rotation (no exit's grace is longer). */
const OFFER_PREVIOUS_MS = 7 * DAY_MS;

export class HopSecrets {
  private state: HopSecretState | null = null;
  private readAt = 0;
  private timer: NodeJS.Timeout | null = null;
  private lastFailureLog = 0;

  constructor(
    private readonly store: ExitStore,
    private readonly o: { graceMs: number; log?: { warn(obj: object, msg?: string): void } },
  ) {}

  /** The first read (made by the first node of the fleet), then one every second. */
  async start(): Promise<void> {
    await this.read();
    this.timer = setInterval(() => void this.read().catch((e: unknown) => this.readFailed(e)), READ_EVERY_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** The secrets as bytes, decoded once per read (every new hop connection asks for them). */
  private current = Buffer.alloc(0);
  private previous: Buffer | null = null;
  private decoded: { current: string; previous: string | null } | null = null;

  private async read(): Promise<void> {
    const s = await this.store.hopSecret(randomBytes(32).toString('hex'));
    if (s.current !== this.decoded?.current || s.previous !== this.decoded.previous) {
      this.current = Buffer.from(s.current, 'hex');
      this.previous = s.previous === null ? null : Buffer.from(s.previous, 'hex');
      this.decoded = { current: s.current, previous: s.previous };
    }
    this.state = s;
    this.readAt = Date.now();
  }

  private readFailed(e: unknown): void {
    // The database away: keep the secrets last read (no exit or entry changes them without it).
    const now = Date.now();
    if (now - this.lastFailureLog < 10_000) return;
    this.lastFailureLog = now;
    this.o.log?.warn(
      { event: 'hop_secret_unavailable', detail: e instanceof Error ? e.message : String(e) },
      'hop secret not read; keeping the last one',
    );
  }

  private sinceRotation(): number {
    const s = this.state!;
    return s.rotatedAgoMs === null ? Infinity : s.rotatedAgoMs + (Date.now() - this.readAt);
  }

  /** What an entry proves on a new hop connection, the newest first. */
  readonly offered = (): readonly Buffer[] => this.withPrevious(OFFER_PREVIOUS_MS);

  /** What an exit accepts a proof of now. */
  readonly accepted = (): readonly Buffer[] => this.withPrevious(this.o.graceMs);

  /** The current secret, and the replaced one while the rotation is younger than `forMs`. */
  private withPrevious(forMs: number): readonly Buffer[] {
    return this.previous !== null && this.sinceRotation() < forMs ? [this.current, this.previous] : [this.current];
  }
}
