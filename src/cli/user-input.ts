// Proxy users as a customer writes them (docs/cli.md "Proxy users"): the flags of `users create|set`, and the file of
// `users create --file` (CSV with a header, or JSON lines), checked here with the contract's rules so a typo is a
// usage error naming the line and field, before anything is sent.
import { findDuplicateKey } from '../contract/json.js';
import { parseApiTime, API_TIME_EXPECTED } from '../contract/schemas.js';
import { newProxyUsernameProblem } from '../contract/proxy-username.js';
import { passwordProblem } from '../contract/password.js';
import { formatRate, parseRate } from '../contract/rate.js';
import { parseSize } from '../contract/size.js';
import type { UserFields } from './customer-api.js';
import { looksLikeToken, UsageError } from './errors.js';
import { isApiKeyShaped } from './key-format.js';

export const CSV_COLUMNS = [
  'username',
  'password',
  'traffic_limit',
  'max_connections',
  'rate_limit',
  'expires_at',
  'allow',
  'deny',
] as const;
type Column = (typeof CSV_COLUMNS)[number];

export interface NewUser extends UserFields {
  username: string;
}

/** The word that clears a limit in `users set` (the API's null). */
export const NONE = 'none';

/** A field's value as text (a flag, a CSV cell): what the API takes, or a UsageError naming `where`. */
export function fieldFromText(
  field: Exclude<Column, 'username'>,
  value: string,
  where: string,
  clearable: boolean,
): UserFields {
  const v = value.trim();
  const cleared = clearable && v.toLowerCase() === NONE;
  switch (field) {
    case 'password': {
      const why = passwordProblem(value);
      if (why) throw new UsageError(`${where}: the password must be ${why}`);
      return { password: value };
    }
    case 'traffic_limit': {
      if (cleared) return { traffic_limit: null };
      const n = parseSize(v);
      if (n === null || n <= 0)
        throw new UsageError(
          `${where}: not a size: "${v}" (e.g. 50GiB, 500MB, or bytes${clearable ? `; ${NONE} clears it` : ''})`,
        );
      return { traffic_limit: n };
    }
    case 'max_connections': {
      if (cleared) return { max_connections: null };
      if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > 1_000_000)
        throw new UsageError(
          `${where}: not a whole number from 1 to 1000000: "${v}"${clearable ? ` (${NONE} clears it)` : ''}`,
        );
      return { max_connections: Number(v) };
    }
    case 'rate_limit': {
      if (cleared) return { rate_limit: null };
      const bits = parseRate(v);
      if (bits === null)
        throw new UsageError(
          `${where}: not a rate: "${v}" (e.g. 10mbit, 500kbit${clearable ? `; ${NONE} clears it` : ''})`,
        );
      return { rate_limit: formatRate(bits) };
    }
    case 'expires_at': {
      if (cleared) return { expires_at: null };
      if (parseApiTime(v) === null)
        throw new UsageError(
          `${where}: expected ${API_TIME_EXPECTED}, got "${v}"${clearable ? ` (${NONE} clears it)` : ''}`,
        );
      return { expires_at: v };
    }
    case 'allow':
    case 'deny':
      // `none` empties a list as it clears a limit (the API takes [] for that, and refuses ["none"]).
      return { [field]: cleared ? [] : splitList(v) };
  }
}

/** A rule list: items separated by `,` or `;`, blanks dropped. */
export function splitList(v: string): string[] {
  return v
    .split(/[;,]/)
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** A name that names an existing user: any the API has, but never a pasted key or token (it would go in the path). */
export function checkNotSecret(name: string, where: string): void {
  // A key (pxk_<id>_<secret>) even passes the username rule: a pasted secret must not become a user's name.
  if (looksLikeToken(name) || isApiKeyShaped(name))
    throw new UsageError(`${where}: an API key or token was given where a username belongs; it was not sent`);
}

export function checkUsername(name: string, where: string): void {
  checkNotSecret(name, where);
  const why = newProxyUsernameProblem(name);
  if (why) throw new UsageError(`${where}: username "${name}": ${why}`);
}

/** RFC 4180 records: quoted fields may hold commas, quotes ("") and line breaks. Returns rows with their line numbers. */
export function parseCsv(text: string): Array<{ line: number; cells: string[] }> {
  const rows: Array<{ line: number; cells: string[] }> = [];
  let cells: string[] = [];
  let cell = '';
  let quoted = false;
  let line = 1;
  let start = 1;
  let any = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          cell += '"';
          i++;
        } else quoted = false;
      } else {
        if (c === '\n') line++;
        cell += c;
      }
      continue;
    }
    if (c === '"' && cell.trim() === '') {
      quoted = true;
      cell = '';
      any = true;
    } else if (c === ',') {
      cells.push(cell);
      cell = '';
      any = true;
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      cells.push(cell);
      if (any || cells.some((x) => x.trim() !== '')) rows.push({ line: start, cells });
      cells = [];
      cell = '';
      any = false;
      line++;
      start = line;
    } else {
      cell += c;
      if (c.trim() !== '') any = true;
    }
  }
  if (quoted) throw new UsageError(`line ${start}: a quoted field is not closed`);
  cells.push(cell);
  if (any || cells.some((x) => x.trim() !== '')) rows.push({ line: start, cells });
  return rows;
}

/**
 * A users file: JSON lines when its first non-blank line starts with `{`, else CSV whose first line is a header of
 * CSV_COLUMNS (any order, `username` required). Every problem is a UsageError naming `name`, the line and the field.
 */
export function parseUsersFile(text: string, name: string): NewUser[] {
  const body = text.replace(/^\uFEFF/, '');
  const first =
    body
      .split('\n')
      .find((l) => l.trim() !== '')
      ?.trim() ?? '';
  const users = first.startsWith('{') ? parseJsonLines(body, name) : parseCsvUsers(body, name);
  if (users.length === 0) throw new UsageError(`${name}: no users in it`);
  const seen = new Map<string, string>();
  for (const u of users) {
    const where = (u as NewUser & { [WHERE]?: string })[WHERE] ?? name;
    const before = seen.get(u.username);
    if (before !== undefined) throw new UsageError(`${where}: username "${u.username}" is also on ${before}`);
    seen.set(u.username, where);
    delete (u as NewUser & { [WHERE]?: string })[WHERE];
  }
  return users;
}

const WHERE = Symbol('where');

function parseCsvUsers(text: string, name: string): NewUser[] {
  let rows: ReturnType<typeof parseCsv>;
  try {
    rows = parseCsv(text);
  } catch (e) {
    // parseCsv knows the line, not the file: every other bad line names both.
    throw e instanceof UsageError ? new UsageError(`${name}: ${e.message}`) : e;
  }
  const header = rows.shift();
  if (!header) return [];
  const cols = header.cells.map((c) => c.trim().toLowerCase());
  for (const c of cols) {
    if (!(CSV_COLUMNS as readonly string[]).includes(c))
      throw new UsageError(
        `${name}: line ${header.line}: unknown column "${c}" (the header names columns of: ${CSV_COLUMNS.join(',')})`,
      );
  }
  if (!cols.includes('username'))
    throw new UsageError(
      `${name}: line ${header.line}: the header has no username column (expected a header such as ${CSV_COLUMNS.join(',')})`,
    );
  if (new Set(cols).size !== cols.length) throw new UsageError(`${name}: line ${header.line}: a column is named twice`);
  return rows.map(({ line, cells }) => {
    const where = `${name}: line ${line}`;
    if (cells.length > cols.length)
      throw new UsageError(
        `${where}: ${cells.length} fields, the header has ${cols.length} (quote a list that holds commas, or separate it with ;)`,
      );
    const user: Partial<NewUser> & { [WHERE]?: string } = { [WHERE]: where };
    cols.forEach((col, i) => {
      const raw = cells[i] ?? '';
      if (col === 'username') {
        user.username = raw.trim();
        return;
      }
      // An empty cell: the field is not given (the server's default).
      if (raw.trim() === '') return;
      Object.assign(
        user,
        fieldFromText(
          col as Exclude<Column, 'username'>,
          col === 'password' ? raw : raw.trim(),
          `${where}: ${col}`,
          false,
        ),
      );
    });
    if (!user.username) throw new UsageError(`${where}: username is empty`);
    checkUsername(user.username, where);
    noSecretsWhereNone(user as NewUser, where);
    return user as NewUser;
  });
}

function parseJsonLines(text: string, name: string): NewUser[] {
  const out: NewUser[] = [];
  text.split('\n').forEach((raw, i) => {
    const where = `${name}: line ${i + 1}`;
    const l = raw.trim();
    if (l === '') return;
    let obj: unknown;
    try {
      obj = JSON.parse(l);
    } catch {
      throw new UsageError(`${where}: not a JSON object`);
    }
    if (!obj || typeof obj !== 'object' || Array.isArray(obj)) throw new UsageError(`${where}: not a JSON object`);
    // JSON.parse keeps the last of two equal keys; the API refuses such a body, and so does the file.
    const dup = findDuplicateKey(l);
    if (dup !== null) throw new UsageError(`${where}: field "${dup}" given twice`);
    const user: Partial<NewUser> & { [WHERE]?: string } = { [WHERE]: where };
    for (const [k, v] of Object.entries(obj as Record<string, unknown>)) {
      if (!(CSV_COLUMNS as readonly string[]).includes(k))
        throw new UsageError(`${where}: unknown field "${k}" (fields: ${CSV_COLUMNS.join(', ')})`);
      if (v === null || v === undefined) continue;
      if (k === 'username') {
        if (typeof v !== 'string') throw new UsageError(`${where}: username must be a string`);
        user.username = v;
      } else if ((k === 'allow' || k === 'deny') && Array.isArray(v)) {
        if (!v.every((x) => typeof x === 'string')) throw new UsageError(`${where}: ${k} must be a list of strings`);
        user[k] = v.map((x: string) => x.trim()).filter((x) => x !== '');
      } else if (typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v))) {
        Object.assign(user, fieldFromText(k as Exclude<Column, 'username'>, String(v), `${where}: ${k}`, false));
      } else
        throw new UsageError(
          `${where}: ${k} must be a string${k === 'traffic_limit' || k === 'max_connections' ? ' or a number' : ''}`,
        );
    }
    if (!user.username) throw new UsageError(`${where}: username is missing`);
    checkUsername(user.username, where);
    noSecretsWhereNone(user as NewUser, where);
    out.push(user as NewUser);
  });
  return out;
}

/** An API token or key pasted into a users file would be sent: stop before that. */
function noSecretsWhereNone(u: NewUser, where: string): void {
  const fields = [u.username, u.rate_limit ?? '', u.expires_at ?? '', ...(u.allow ?? []), ...(u.deny ?? [])];
  if (fields.some((f) => looksLikeToken(f)))
    throw new UsageError(`${where}: an API token or key was given where a user's field belongs; it was not sent`);
}
