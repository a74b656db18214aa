// The audit log's records and their per-account hash chain (docs/security.md, "Audit log"): what a record holds,
// its canonical JSON, how it is sealed onto the chain, and how a chain is checked. Pure: both backends and
// `proxyd admin audit verify` use it, so a record is hashed one way only.
import { hash } from 'node:crypto';

export const AUDIT_ACTOR_TYPES = ['console', 'token', 'key', 'operator', 'system'] as const;
/** Who did it: the account owner in the console, the API token, an API key, the operator (`proxyd admin`), or the service itself. */
export type AuditActorType = (typeof AUDIT_ACTOR_TYPES)[number];

export interface AuditActor {
  type: AuditActorType;
  /** A console session's handle, a token's access key, a key's id, the operator's OS user, the node; null when none. */
  id: string | null;
}

/** One account-changing action, as the edge describes it; the store adds id, seq, time and the hashes in the action's own transaction. */
export interface AuditEntry {
  accountId: number;
  actor: AuditActor;
  sourceIp: string | null;
  requestId: string | null;
  action: string;
  target: string | null;
  /** Never a secret (password, token, key, TOTP secret, recovery code). */
  details: Record<string, unknown>;
}

/** A record as stored: its place in its account's chain (`seq`, from 1), its time, and the hashes that chain it. */
export interface AuditRecord extends AuditEntry {
  id: number;
  seq: number;
  timeMs: number;
  prevHash: string;
  hash: string;
}

/**
 * An account's chain head (its last record's seq and hash) and anchor: where verification starts, the genesis
 * (seq 0, GENESIS_HASH) until retention removes records, then the last removed record's seq and hash.
 */
export interface AuditHead {
  accountId: number;
  seq: number;
  hash: string;
  anchorSeq: number;
  anchorHash: string;
}

/** What the first record of every chain follows. */
export const GENESIS_HASH = '0'.repeat(64);

/** JSON with object keys sorted (recursively) and no white space: one text for one value. */
export function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v ?? null);
  if (Array.isArray(v)) return `[${v.map((x) => canonicalJson(x === undefined ? null : x)).join(',')}]`;
  const keys = Object.keys(v as Record<string, unknown>)
    .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((v as Record<string, unknown>)[k])}`).join(',')}}`;
}

const str = (s: string | null): string => (s === null ? 'null' : JSON.stringify(s));

/**
 * A record's canonical JSON: its keys in order, `details` as stored (the canonical text written with it), so a
 * check over a million records parses nothing. Everything a record says is in it, its id and seq too.
 */
export function recordJson(r: Omit<AuditRecord, 'details' | 'prevHash' | 'hash'>, detailsJson: string): string {
  return (
    `{"account":${r.accountId},"action":${str(r.action)},"actor":{"id":${str(r.actor.id)},"type":${str(r.actor.type)}},` +
    `"details":${detailsJson},"id":${r.id},"request_id":${str(r.requestId)},"seq":${r.seq},"source_ip":${str(r.sourceIp)},` +
    `"target":${str(r.target)},"time":${r.timeMs}}`
  );
}

/** SHA-256 (hex) of the previous record's hash and this record's canonical JSON. */
export function chainHash(prevHash: string, json: string): string {
  return hash('sha256', prevHash + json, 'hex');
}

/** The record `entry` becomes on top of `head`: the next seq, and its hashes. `detailsJson` is what the row stores. */
export function sealRecord(
  head: { seq: number; hash: string },
  id: number,
  timeMs: number,
  entry: AuditEntry,
): { record: AuditRecord; detailsJson: string } {
  const detailsJson = canonicalJson(entry.details);
  const base = { ...entry, id, seq: head.seq + 1, timeMs };
  return {
    record: { ...base, prevHash: head.hash, hash: chainHash(head.hash, recordJson(base, detailsJson)) },
    detailsJson,
  };
}

/** A stored row as the check reads it: the record's fields with `details` still as its stored text. */
export type AuditChainRow = Omit<AuditRecord, 'details'> & { detailsJson: string };

export type ChainProblemKind = 'edited' | 'deleted' | 'reordered' | 'head';

export interface ChainProblem {
  accountId: number;
  /** The first record found broken (null: the chain's head names records that are gone). */
  recordId: number | null;
  seq: number;
  kind: ChainProblemKind;
  detail: string;
}

/**
 * Checks chains record by record in chain order (account, then seq), holding one account's position at a time.
 * `push` each row, then `end`; the first problem of each account is reported once.
 */
export class ChainVerifier {
  private account: number | null = null;
  private expectSeq = 1;
  private expectPrev = GENESIS_HASH;
  private broken = false;
  private readonly seen = new Set<number>();
  records = 0;
  readonly problems: ChainProblem[] = [];

  constructor(private readonly heads: ReadonlyMap<number, AuditHead>) {}

  private startAccount(accountId: number): void {
    this.account = accountId;
    this.seen.add(accountId);
    this.broken = false;
    const h = this.heads.get(accountId);
    this.expectSeq = (h?.anchorSeq ?? 0) + 1;
    this.expectPrev = h?.anchorHash ?? GENESIS_HASH;
    if (!h)
      this.fail({
        accountId,
        recordId: null,
        seq: 0,
        kind: 'head',
        detail: 'the chain has records but no head row (the head was deleted)',
      });
  }

  private fail(p: ChainProblem): void {
    if (this.broken) return;
    this.broken = true;
    this.problems.push(p);
  }

  push(r: AuditChainRow): void {
    if (r.accountId !== this.account) {
      if (this.account !== null) this.endAccount();
      this.startAccount(r.accountId);
    }
    this.records++;
    if (this.broken) return;
    const at = { accountId: r.accountId, recordId: r.id, seq: r.seq };
    if (r.seq > this.expectSeq) {
      const gone = r.seq - this.expectSeq;
      this.fail({
        ...at,
        kind: 'deleted',
        detail: `${gone === 1 ? `the record before it (seq ${this.expectSeq}) is missing` : `the ${gone} records before it (seq ${this.expectSeq}–${r.seq - 1}) are missing`}: deleted`,
      });
      return;
    }
    if (r.seq < this.expectSeq) {
      this.fail({
        ...at,
        kind: 'reordered',
        detail: `its seq ${r.seq} is at or before the chain's start or a record before it (expected seq ${this.expectSeq}): moved or copied`,
      });
      return;
    }
    if (r.prevHash !== this.expectPrev) {
      this.fail({
        ...at,
        kind: 'reordered',
        detail: 'it does not follow the record before it (reordered, or the one before it was replaced)',
      });
      return;
    }
    if (chainHash(r.prevHash, recordJson(r, r.detailsJson)) !== r.hash) {
      this.fail({ ...at, kind: 'edited', detail: 'its content does not match its hash: edited' });
      return;
    }
    this.expectPrev = r.hash;
    this.expectSeq++;
  }

  private endAccount(): void {
    const id = this.account!;
    const h = this.heads.get(id);
    if (!this.broken && h && (h.seq !== this.expectSeq - 1 || h.hash !== this.expectPrev)) {
      this.fail({
        accountId: id,
        recordId: null,
        seq: this.expectSeq,
        kind: h.seq >= this.expectSeq ? 'deleted' : 'head',
        detail:
          h.seq >= this.expectSeq
            ? `the chain's head names seq ${h.seq} but the last record is seq ${this.expectSeq - 1}: the newest records were deleted`
            : `the chain's head (seq ${h.seq}) does not name its last record (seq ${this.expectSeq - 1}): the head was edited`,
      });
    }
    this.account = null;
  }

  /** Chains checked so far (accounts with records). */
  get accounts(): number {
    return this.seen.size;
  }

  /** Call once after the last row; also checks heads of accounts whose every record is gone. */
  end(): void {
    if (this.account !== null) this.endAccount();
    for (const h of this.heads.values()) {
      if (this.seen.has(h.accountId) || h.seq === h.anchorSeq) continue;
      this.problems.push({
        accountId: h.accountId,
        recordId: null,
        seq: h.anchorSeq + 1,
        kind: 'deleted',
        detail: `the chain's head names seq ${h.seq} but no record is left after seq ${h.anchorSeq}: deleted`,
      });
    }
  }
}
