// IP lists from arguments, a file or stdin: one per line, `#` comments, blanks ignored, duplicates folded.
import { readFile } from 'node:fs/promises';
import type { BatchItem } from './batch.js';
import { looksLikeApiKey, looksLikeToken, UsageError } from './errors.js';
import { decodeText, readAll } from './io.js';

interface ParsedEntry {
  ip: string;
  /** Present when the entry said `IP=REMARK`. */
  remark?: string;
}

/**
 * One entry: `IP` or `IP=REMARK`. Returns null for blank and comment lines.
 * Without `=`, anything from `#` on is a comment; after `=`, the rest of the line is the remark as written.
 */
export function parseEntry(raw: string): ParsedEntry | null {
  const line = raw.replace(/\r$/, '');
  const trimmed = line.trim();
  if (trimmed === '' || trimmed.startsWith('#')) return null;
  const eq = line.indexOf('=');
  if (eq >= 0) {
    const ip = line.slice(0, eq).trim();
    if (ip === '') return null;
    return { ip, remark: line.slice(eq + 1).trim() };
  }
  const hash = line.indexOf('#');
  const ip = (hash >= 0 ? line.slice(0, hash) : line).trim();
  return ip === '' ? null : { ip };
}

export function parseLines(text: string): ParsedEntry[] {
  const out: ParsedEntry[] = [];
  for (const l of text.split('\n')) {
    const e = parseEntry(l);
    if (e) out.push(e);
  }
  return out;
}

interface CollectOptions {
  args: string[];
  /** `--file`, once or more (`-` = stdin); read in the order given. */
  files?: string[];
  /** Remark for entries that carry none (add only). */
  defaultRemark?: string;
  /** Whether `IP=REMARK` makes sense; delete ignores remarks. */
  remarks: boolean;
  stdin: NodeJS.ReadableStream;
  readTextFile?: (path: string) => Promise<string>;
}

interface Collected {
  items: BatchItem[];
  /** How many repeated IPs were folded into their first occurrence. */
  duplicates: number;
}

/** Why a file could not be read, in words (the errno code after them). */
export function fileProblem(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  const words: Record<string, string> = {
    ENOENT: 'no such file',
    EACCES: 'permission denied',
    EISDIR: 'it is a directory',
  };
  return code === undefined ? String(err) : words[code] ? `${words[code]} (${code})` : code;
}

/** Arguments first, then the files in order (`-` = stdin); the first occurrence of an IP wins. */
export async function collectItems(opts: CollectOptions): Promise<Collected> {
  const entries: ParsedEntry[] = [];
  let stdinUsed = false;
  const fromStdin = async () => {
    if (stdinUsed) throw new UsageError('standard input ("-") can be read only once');
    stdinUsed = true;
    return parseLines(await readAll(opts.stdin));
  };
  for (const a of opts.args) {
    if (a === '-') entries.push(...(await fromStdin()));
    else {
      const e = parseEntry(a);
      if (e) entries.push(e);
    }
  }
  for (const file of opts.files ?? []) {
    if (file === '-') entries.push(...(await fromStdin()));
    else {
      let text: string;
      try {
        text = await (opts.readTextFile ?? (async (p) => decodeText(await readFile(p))))(file);
      } catch (err) {
        throw new UsageError(`cannot read ${file}: ${fileProblem(err)}`);
      }
      entries.push(...parseLines(text));
    }
  }
  const seen = new Set<string>();
  const items: BatchItem[] = [];
  let duplicates = 0;
  for (const e of entries) {
    // Sent as an IP it would come back in the failed items (and reach the server's request): stop before that.
    const text = `${e.ip} ${e.remark ?? opts.defaultRemark ?? ''}`;
    if (looksLikeToken(text))
      throw new UsageError(
        looksLikeApiKey(text)
          ? 'an API key was given where an IP or a remark belongs; it was not sent (keep it with `proxyctl key set`, which reads it from a prompt or stdin)'
          : 'an API token was given where an IP or a remark belongs; it was not sent (log in with `proxyctl login`, which reads the token from a prompt or stdin)',
      );
    if (seen.has(e.ip)) {
      duplicates++;
      continue;
    }
    seen.add(e.ip);
    if (!opts.remarks) items.push({ ip: e.ip });
    else {
      const remark = e.remark ?? opts.defaultRemark;
      items.push(remark !== undefined && remark !== '' ? { ip: e.ip, remark } : { ip: e.ip });
    }
  }
  return { items, duplicates };
}
