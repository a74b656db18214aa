// An exit's hop certificate, kept in its data dir: made at the first start, renewed at two thirds of its
// lifetime or when an operator asks (`proxyd admin fleet rotate-cert`), without a failed tunnel:
//   1. the new one is written beside the current one (hop-identity.next.pem) and registered next to it, so
//      entries accept either;
//   2. after entries have read that (ANNOUNCE_MS), it becomes the current one and is served; the old one stays
//      registered for SETTLE_MS (workers of this exit that have not switched yet still serve it);
//   3. then only the new one is registered.
// Every worker of an exit reads the files each second, so they serve and register the same certificates; the
// worker that wrote the next one drives the steps (another finishes them if it died half-way).
import { linkSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { makeHopIdentity, readHopIdentity, type HopIdentity } from '../../gateway/index.js';

const CURRENT = 'hop-identity.pem';
const NEXT = 'hop-identity.next.pem';
const PREVIOUS = 'hop-identity.previous.pem';
/** How long a next certificate is registered beside the current one before it is served. */
const ANNOUNCE_MS = 3_000;
/** How long the replaced certificate stays registered after the switch. */
const SETTLE_MS = 3_000;
/** A next certificate older than this was left by a worker that died half-way: any worker finishes its steps. */
const ORPHAN_MS = 15_000;

interface Held {
  id: HopIdentity;
  mtimeMs: number;
}

export class HopIdentityKeeper {
  private current!: Held;
  /** This worker wrote the next certificate and drives the rotation. */
  private driving = false;

  constructor(
    private readonly dir: string,
    private readonly o: {
      lifetimeMs: number;
      onChange: (id: HopIdentity) => void;
      log?: { info(obj: object, msg?: string): void; warn(obj: object, msg?: string): void };
      /** Tests shorten the phases (defaults ANNOUNCE_MS, SETTLE_MS). */
      announceMs?: number;
      settleMs?: number;
    },
  ) {}

  private file(name: string): string {
    return path.join(this.dir, name);
  }

  /** The identity to serve at start: the one kept, or a new one when there is none (or it cannot be used). */
  load(): HopIdentity {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const kept = this.read(CURRENT);
    if (kept && kept.id.notAfter.getTime() > Date.now()) return (this.current = kept).id;
    if (kept)
      this.o.log?.warn(
        { event: 'hop_certificate_expired', fingerprint: kept.id.fingerprint },
        'the kept hop certificate has expired; making a new one',
      );
    const fresh = makeHopIdentity(this.o.lifetimeMs);
    // Replaces an expired one; else only if none is there (another worker of this exit may have made it first).
    this.write(CURRENT, fresh, kept !== null);
    const now = this.read(CURRENT);
    if (now === null)
      throw new Error(
        `${this.file(CURRENT)}: the hop certificate file is there but cannot be used (see the log line before); move it away and start again`,
      );
    this.current = now;
    this.o.log?.info(
      {
        event: 'hop_certificate_made',
        fingerprint: this.current.id.fingerprint,
        not_after: this.current.id.notAfter.toISOString(),
      },
      'hop certificate made',
    );
    return this.current.id;
  }

  /** What the registry row names now: the served certificate, then the next or the replaced one while they settle. */
  fingerprints(): string[] {
    const out = [this.current.id.fingerprint];
    const next = this.read(NEXT);
    if (next) out.push(next.id.fingerprint);
    const prev = this.read(PREVIOUS);
    if (prev && Date.now() - prev.mtimeMs < (this.o.settleMs ?? SETTLE_MS)) out.push(prev.id.fingerprint);
    return [...new Set(out)];
  }

  /** Once a second (before the heartbeat): follow the files, renew when due or asked (`requested`). */
  tick(requested: boolean): void {
    const now = Date.now();
    const onDisk = this.read(CURRENT);
    if (onDisk && onDisk.id.fingerprint !== this.current.id.fingerprint) {
      this.current = onDisk;
      this.o.onChange(onDisk.id);
    }
    const next = this.read(NEXT);
    const life = this.current.id.notAfter.getTime() - this.current.id.notBefore.getTime();
    const due = now > this.current.id.notBefore.getTime() + (life * 2) / 3;
    if (next === null && (requested || due)) {
      const made = makeHopIdentity(this.o.lifetimeMs);
      // O_EXCL by link(): one worker's next certificate, never two.
      if (this.write(NEXT, made, false)) {
        this.driving = true;
        this.o.log?.info(
          { event: 'hop_certificate_next', fingerprint: made.fingerprint, why: requested ? 'asked' : 'renewal' },
          'new hop certificate announced',
        );
      }
      return;
    }
    if (
      next &&
      (this.driving || now - next.mtimeMs > ORPHAN_MS) &&
      now - next.mtimeMs >= (this.o.announceMs ?? ANNOUNCE_MS)
    ) {
      // Keep the replaced one (registered for SETTLE_MS), then serve the new one.
      this.write(PREVIOUS, this.current.id, true);
      try {
        renameSync(this.file(NEXT), this.file(CURRENT));
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') return; // another worker moved it first
        throw e;
      }
      this.driving = false;
      this.current = this.read(CURRENT)!;
      this.o.onChange(this.current.id);
      this.o.log?.info(
        { event: 'hop_certificate_rotated', fingerprint: this.current.id.fingerprint },
        'hop certificate now served',
      );
      return;
    }
    const prev = this.read(PREVIOUS);
    if (prev && now - prev.mtimeMs > (this.o.settleMs ?? SETTLE_MS)) rmSync(this.file(PREVIOUS), { force: true });
  }

  private read(name: string): Held | null {
    try {
      const st = statSync(this.file(name));
      if (name === CURRENT && this.current?.mtimeMs === st.mtimeMs) return this.current;
      return { id: readHopIdentity(readFileSync(this.file(name), 'utf8')), mtimeMs: st.mtimeMs };
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT')
        this.o.log?.warn(
          {
            event: 'hop_certificate_unreadable',
            file: this.file(name),
            detail: e instanceof Error ? e.message : String(e),
          },
          'hop certificate file not usable',
        );
      return null;
    }
  }

  /** Writes `id` to `name` atomically (a temp file linked into place); false when `name` exists and `replace` is not set. */
  private write(name: string, id: HopIdentity, replace: boolean): boolean {
    const tmp = this.file(`.${name}.${process.pid}.${Date.now()}`);
    writeFileSync(tmp, id.pem, { mode: 0o600, flag: 'wx' });
    try {
      if (replace) renameSync(tmp, this.file(name));
      else linkSync(tmp, this.file(name));
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw e;
    } finally {
      rmSync(tmp, { force: true });
    }
  }
}
