// `--egress-pool`: parsing the list, the bind check at start, and where sticky sessions live. With
// `--workers N` the primary holds the one session table and workers ask it over IPC (caching each answer
// until the session ends), so a session leaves from one address whichever worker takes its connection.
import cluster, { type Worker } from 'node:cluster';
import net from 'node:net';
import { isStrictIPv4 } from '../../contract/ipv4.js';
import { SessionTable, type StickyAssignment, type StickySessions } from '../../gateway/sticky-sessions.js';

/** A CIDR block larger than this (/22) is refused: it is almost surely a typo for a smaller one. */
const MAX_BLOCK = 1024;
/** All items of one pool together. */
const MAX_POOL = 65_536;

const toInt = (ip: string): number => ip.split('.').reduce((n, o) => n * 256 + Number(o), 0);
const toIp = (n: number): string => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');

/** `a,b`, ranges `a-b`, CIDR `a/n` (n ≥ 22), IPv4 only; duplicates dropped, order kept. An error names the item. */
export function parseEgressPool(list: string): string[] | { error: string } {
  const out = new Set<string>();
  for (const item of list.split(',').map((x) => x.trim())) {
    if (!item) continue;
    let from: number;
    let to: number;
    const range = /^([^-/]+)-([^-/]+)$/.exec(item);
    const cidr = /^([^-/]+)\/(\d{1,2})$/.exec(item);
    if (range) {
      if (!isStrictIPv4(range[1]) || !isStrictIPv4(range[2])) return { error: `"${item}" is not an IPv4 range a-b` };
      [from, to] = [toInt(range[1]), toInt(range[2])];
      if (to < from) return { error: `"${item}": the range ends before it starts` };
    } else if (cidr) {
      const bits = Number(cidr[2]);
      if (!isStrictIPv4(cidr[1]) || bits > 32) return { error: `"${item}" is not an IPv4 CIDR block` };
      if (bits < 22) return { error: `"${item}": blocks larger than /22 (1,024 addresses) are refused` };
      const size = 2 ** (32 - bits);
      from = toInt(cidr[1]) - (toInt(cidr[1]) % size);
      to = from + size - 1;
    } else if (isStrictIPv4(item)) {
      from = to = toInt(item);
    } else return { error: `"${item}" is not an IPv4 address, range a-b or CIDR block` };
    if (to - from + 1 > MAX_BLOCK) return { error: `"${item}": ranges larger than ${MAX_BLOCK} addresses are refused` };
    for (let n = from; n <= to; n++) out.add(toIp(n));
    if (out.size > MAX_POOL) return { error: `more than ${MAX_POOL} addresses in the pool` };
  }
  if (out.size === 0) return { error: 'the pool is empty' };
  return [...out];
}

/** Every pool address must be ours: bind a socket to addr:0 and close it. Throws naming the first that fails. */
export async function checkBindable(addresses: readonly string[]): Promise<void> {
  const tryBind = (address: string) =>
    new Promise<string | null>((resolve) => {
      const s = net.createServer();
      s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
      s.listen({ host: address, port: 0, exclusive: true }, () => s.close(() => resolve(null)));
    });
  for (let i = 0; i < addresses.length; i += 64) {
    const batch = addresses.slice(i, i + 64);
    const errs = await Promise.all(batch.map(tryBind));
    const bad = errs.findIndex((e) => e !== null);
    if (bad >= 0) {
      const err = new Error(`--egress-pool: cannot bind ${batch[bad]} (${errs[bad]}): this host does not own it`) as NodeJS.ErrnoException;
      err.code = 'EGRESS_UNBINDABLE';
      throw err;
    }
  }
}

const ASK = 'proxyd:egress-session';
const ANSWER = 'proxyd:egress-session-res';
const ASK_TIMEOUT_MS = 2000;

type Ask = { type: typeof ASK; id: number; key: string; minutes: number };
type Answer = { type: typeof ANSWER; id: number; index: number; expiresAt: number };

/** The primary's side: one table for every worker. Call once, before forking. */
export function serveStickySessions(poolSize: number, now: () => number = Date.now): SessionTable {
  const table = new SessionTable(poolSize, { now });
  cluster.on('message', (worker: Worker, m: Ask) => {
    if (m?.type !== ASK || typeof m.key !== 'string' || typeof m.minutes !== 'number') return;
    const a = table.assign(m.key, m.minutes);
    if (worker.isConnected()) worker.send({ type: ANSWER, id: m.id, index: a.index, expiresAt: a.expiresAt } satisfies Answer);
  });
  return table;
}

/** A worker's side: ask the primary once per session, then answer from the cache until the session ends. */
class PrimarySessions implements StickySessions {
  private readonly cache: SessionTable;
  private readonly pending = new Map<string, Promise<StickyAssignment>>();
  private readonly waiting = new Map<number, (a: StickyAssignment | null) => void>();
  private nextId = 0;

  constructor(poolSize: number) {
    this.cache = new SessionTable(poolSize);
    process.on('message', (m: Answer) => {
      if (m?.type !== ANSWER) return;
      this.waiting.get(m.id)?.({ index: m.index, expiresAt: m.expiresAt });
    });
  }

  assign(key: string, minutes: number): StickyAssignment | Promise<StickyAssignment> {
    const hit = this.cache.get(key);
    if (hit) return hit;
    let p = this.pending.get(key);
    if (!p) {
      p = this.ask(key, minutes).finally(() => this.pending.delete(key));
      this.pending.set(key, p);
    }
    return p;
  }

  private ask(key: string, minutes: number): Promise<StickyAssignment> {
    const id = this.nextId++;
    return new Promise<StickyAssignment | null>((resolve) => {
      const timer = setTimeout(() => resolve(null), ASK_TIMEOUT_MS);
      this.waiting.set(id, (a) => {
        clearTimeout(timer);
        resolve(a);
      });
      process.send?.({ type: ASK, id, key, minutes } satisfies Ask);
    }).then((a) => {
      this.waiting.delete(id);
      // Primary unreachable (it is going away): stick within this worker rather than fail the connection.
      if (!a) return this.cache.assign(key, minutes);
      this.cache.remember(key, a);
      return a;
    });
  }
}

/** Where this serving process keeps sticky sessions: its own table, or (a cluster worker) the primary's. */
export function stickySessionsFor(poolSize: number): StickySessions {
  return cluster.isWorker ? new PrimarySessions(poolSize) : new SessionTable(poolSize);
}
