// What a serving node does for the audit log on its own: records the service's own actions (a plan that expired,
// once per expiry fleet-wide: the record's once-key decides which node writes it) and prunes records past
// `--audit-retention`, keeping every chain verifiable from its anchor.
import type { Store } from '../store/index.js';
import { DAY_MS } from '../../rules/time.js';
import { auditDraft, systemContext } from './audit.js';

export interface AuditKeeperOptions {
  node: string;
  retentionMs: number;
  nowMs?: () => number;
  checkEveryMs?: number;
  pruneEveryMs?: number;
  log?: { warn(obj: object, msg?: string): void };
}

/** A plan that expired longer ago than this is not recorded again (a node that was down for a week says nothing late). */
const EXPIRY_LOOKBACK_MS = 7 * DAY_MS;

export class AuditKeeper {
  private timers: NodeJS.Timeout[] = [];
  private running: Promise<unknown> | null = null;
  private readonly now: () => number;

  constructor(
    private readonly store: Store,
    private readonly o: AuditKeeperOptions,
  ) {
    this.now = o.nowMs ?? Date.now;
  }

  start(): void {
    const every = (ms: number, f: () => Promise<unknown>) => {
      const t = setInterval(() => void this.once(f), ms);
      t.unref();
      this.timers.push(t);
    };
    every(this.o.checkEveryMs ?? 10_000, () => this.recordExpiries());
    every(this.o.pruneEveryMs ?? 3_600_000, () => this.prune());
    void this.once(() => this.prune());
  }

  private once(f: () => Promise<unknown>): Promise<unknown> {
    return (this.running ??= f()
      .catch((e: unknown) =>
        this.o.log?.warn(
          { event: 'audit_keeper_failed', detail: String((e as Error)?.message ?? e) },
          'audit keeper round failed',
        ),
      )
      .finally(() => {
        this.running = null;
      }));
  }

  async stop(): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    await this.running;
  }

  /** One `plan.expired` record per account and expiry, by whichever node sees it first. */
  async recordExpiries(): Promise<number> {
    const now = this.now();
    let written = 0;
    const { plans } = await this.store.plans.all();
    for (const p of plans) {
      if (p.expiresAt === null || p.expiresAt > now || p.expiresAt < now - EXPIRY_LOOKBACK_MS) continue;
      const expires = new Date(p.expiresAt).toISOString();
      const entry = {
        ...auditDraft(systemContext(this.o.node), 'plan.expired', null, { expires_at: expires }),
        accountId: p.accountId,
      };
      if (await this.store.audit.append(entry, `plan.expired:${p.expiresAt}`)) written++;
    }
    return written;
  }

  prune(): Promise<number> {
    return this.store.audit.prune(this.now() - this.o.retentionMs);
  }
}
