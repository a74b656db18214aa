// A proxy user as the customer API takes it (docs/api.md, "Proxy users"): the fields of a create, a batch item or a
// change, checked one by one so a refusal names the field. Two kinds of refusal: `shape` (not an object, an unknown
// field, a value of the wrong JSON type: the request is malformed, nothing is processed) and `value` (a username,
// size, rate, time or rule item that is not one: a batch refuses that item only).
import { passwordProblem } from '../../contract/password.js';
import { newProxyUsernameProblem } from '../../contract/proxy-username.js';
import { parseRate } from '../../contract/rate.js';
import { API_TIME_EXPECTED, parseApiTime } from '../../contract/schemas.js';
import { parseSize } from '../../contract/size.js';
import { parseRuleList } from '../../gateway/index.js';
import type { ProxyUserPatch, ProxyUserSettings } from '../store/index.js';
import { describeProblems } from './target-rules.js';

export interface UserInputProblem {
  kind: 'shape' | 'value';
  /** The field as the caller wrote it (`items.3.traffic_limit`). */
  field: string;
  problem: string;
}

export interface NewUserInput {
  username: string;
  password: string | null;
  status: 'active' | 'disabled';
  settings: ProxyUserSettings;
}

const SETTINGS_FIELDS = ['traffic_limit', 'max_connections', 'rate_limit', 'expires_at', 'allow', 'deny'] as const;
const CREATE_FIELDS = new Set<string>(['username', 'password', 'status', ...SETTINGS_FIELDS]);
const PATCH_FIELDS = new Set<string>(['status', ...SETTINGS_FIELDS]);
/** Above any count a proxy user needs; keeps the value an exact integer everywhere. */
const MAX_CONNECTIONS = 1_000_000_000;
const MAX_BYTES = Number.MAX_SAFE_INTEGER;
/** A user's own rule lists are for a handful of targets; the account's lists hold the big ones. */
export const MAX_USER_RULE_ITEMS = 1_000;

type Result<T> = { ok: true; value: T } | { ok: false; problem: UserInputProblem };

const shape = (field: string, problem: string): { ok: false; problem: UserInputProblem } => ({
  ok: false,
  problem: { kind: 'shape', field, problem },
});
const value = (field: string, problem: string): { ok: false; problem: UserInputProblem } => ({
  ok: false,
  problem: { kind: 'value', field, problem },
});

/**
 * An unknown field's name fit to echo back: one shaped like a field (`colour`, `max_conns`), else a placeholder. A
 * client that put a secret where a name goes (a password as a key) must not read it back in an error or a log.
 */
export function plainField(key: string): string {
  return /^[a-z][a-z0-9_]{0,31}$/.test(key) ? key : '(a name not shown)';
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function unknownField(
  o: Record<string, unknown>,
  allowed: Set<string>,
  at: string,
): { ok: false; problem: UserInputProblem } | null {
  for (const k of Object.keys(o)) if (!allowed.has(k)) return shape(`${at}${plainField(k)}`, 'unknown field');
  return null;
}

/** A proxy password a customer chooses: the console's rule for chosen passwords, and no control characters. */
export function proxyPasswordProblem(p: string): string | null {
  if (/[\u0000-\u001f\u007f]/.test(p)) return 'no control characters';
  return passwordProblem(p);
}

/** One settings field (null clears it where it is a limit). */
function setting(
  o: Record<string, unknown>,
  key: (typeof SETTINGS_FIELDS)[number],
  at: string,
): Result<number | null | string[]> | null {
  if (!(key in o)) return null;
  const v = o[key];
  const field = `${at}${key}`;
  switch (key) {
    case 'traffic_limit': {
      if (v === null) return { ok: true, value: null };
      if (typeof v === 'number')
        return Number.isSafeInteger(v) && v >= 1
          ? { ok: true, value: v }
          : value(field, `a whole number of bytes, 1 to ${MAX_BYTES} (2^53 - 1)`);
      if (typeof v !== 'string') return shape(field, 'a number of bytes, a size such as "50GiB", or null');
      const n = parseSize(v);
      return n !== null && n >= 1 && n <= MAX_BYTES
        ? { ok: true, value: n }
        : value(field, `a size such as 50GiB, 500MB or a number of bytes, up to ${MAX_BYTES} bytes`);
    }
    case 'max_connections': {
      if (v === null) return { ok: true, value: null };
      if (typeof v !== 'number') return shape(field, 'a whole number or null');
      return Number.isInteger(v) && v >= 1 && v <= MAX_CONNECTIONS
        ? { ok: true, value: v }
        : value(field, `a whole number from 1 to ${MAX_CONNECTIONS}`);
    }
    case 'rate_limit': {
      if (v === null) return { ok: true, value: null };
      if (typeof v === 'number')
        return Number.isInteger(v) && v >= 8 && v <= 1e12
          ? { ok: true, value: v }
          : value(field, 'bits per second, at least 8');
      if (typeof v !== 'string') return shape(field, 'a rate such as "10mbit", or null');
      const n = parseRate(v);
      return n !== null
        ? { ok: true, value: n }
        : value(field, 'a rate such as 10mbit, 1gbit or 500kbit (powers of 1000, bits per second)');
    }
    case 'expires_at': {
      if (v === null) return { ok: true, value: null };
      if (typeof v !== 'string') return shape(field, 'a time as a string, or null');
      const t = parseApiTime(v);
      return t !== null ? { ok: true, value: t } : value(field, API_TIME_EXPECTED);
    }
    case 'allow':
    case 'deny': {
      if (!Array.isArray(v) || v.some((i) => typeof i !== 'string')) return shape(field, 'an array of strings');
      const items = v as string[];
      if (items.length === 0) return { ok: true, value: [] };
      if (items.length > MAX_USER_RULE_ITEMS) return value(field, `at most ${MAX_USER_RULE_ITEMS} items`);
      const withComma = items.find((i) => i.includes(','));
      if (withComma !== undefined)
        return value(field, `"${withComma.slice(0, 80)}": one domain pattern or CIDR per item`);
      // As the only item, the text forms' `none` would empty the list (an allow list emptied lets every target through).
      if (items.length === 1 && items[0]!.trim().toLowerCase() === 'none')
        return value(field, '"none": write [] to empty the list');
      const r = parseRuleList(items.join(','));
      return r.ok
        ? { ok: true, value: r.items }
        : value(field, describeProblems(r.problems.map((p) => ({ ...p, item: p.item.slice(0, 80) }))));
    }
  }
}

function settingsPatch(o: Record<string, unknown>, at: string): Result<Partial<ProxyUserSettings>> {
  const out: Partial<ProxyUserSettings> = {};
  // Shape refusals first, in field order: a malformed request is refused as a whole before any value is judged.
  const results: Array<[(typeof SETTINGS_FIELDS)[number], Result<number | null | string[]>]> = [];
  for (const key of SETTINGS_FIELDS) {
    const r = setting(o, key, at);
    if (r) results.push([key, r]);
  }
  const bad = results.find(([, r]) => !r.ok && r.problem.kind === 'shape') ?? results.find(([, r]) => !r.ok);
  if (bad) return bad[1] as { ok: false; problem: UserInputProblem };
  for (const [key, r] of results) {
    const v = (r as { ok: true; value: number | null | string[] }).value;
    if (key === 'traffic_limit') out.trafficLimit = v as number | null;
    else if (key === 'max_connections') out.maxConnections = v as number | null;
    else if (key === 'rate_limit') out.rateLimit = v as number | null;
    else if (key === 'expires_at') out.expiresAt = v as number | null;
    else out[key] = v as string[];
  }
  return { ok: true, value: out };
}

function status(o: Record<string, unknown>, at: string): Result<'active' | 'disabled' | undefined> {
  if (!('status' in o)) return { ok: true, value: undefined };
  const v = o.status;
  if (typeof v !== 'string') return shape(`${at}status`, 'a string: active or disabled');
  return v === 'active' || v === 'disabled' ? { ok: true, value: v } : value(`${at}status`, 'active or disabled');
}

/** A new user (a create's body, or a batch item at `at`, e.g. `items.3.`). */
export function parseNewUser(body: unknown, at = ''): Result<NewUserInput> {
  if (!isObject(body)) return shape(at ? at.slice(0, -1) : 'body', 'a JSON object');
  const unknown = unknownField(body, CREATE_FIELDS, at);
  if (unknown) return unknown;
  if (!('username' in body)) return shape(`${at}username`, 'required');
  if (typeof body.username !== 'string') return shape(`${at}username`, 'a string');
  if ('password' in body && body.password !== null && typeof body.password !== 'string')
    return shape(`${at}password`, 'a string, or null to have one generated');
  const st = status(body, at);
  const settings = settingsPatch(body, at);
  if (!st.ok && st.problem.kind === 'shape') return st;
  if (!settings.ok && settings.problem.kind === 'shape') return settings;
  const nameProblem = newProxyUsernameProblem(body.username);
  if (nameProblem) return value(`${at}username`, nameProblem);
  const password = typeof body.password === 'string' ? body.password : null;
  if (password !== null) {
    const p = proxyPasswordProblem(password);
    if (p) return value(`${at}password`, p);
  }
  if (!st.ok) return st;
  if (!settings.ok) return settings;
  return {
    ok: true,
    value: {
      username: body.username,
      password,
      status: st.value ?? 'active',
      settings: {
        trafficLimit: null,
        maxConnections: null,
        rateLimit: null,
        expiresAt: null,
        allow: [],
        deny: [],
        ...settings.value,
      },
    },
  };
}

/** A change (PATCH): any field but username and password; null clears a limit. */
export function parsePatch(body: unknown): Result<ProxyUserPatch> {
  if (!isObject(body)) return shape('body', 'a JSON object');
  for (const k of ['username', 'password']) {
    if (k in body)
      return shape(k, k === 'password' ? 'not changed here: POST …/password rotates it' : 'cannot be changed');
  }
  const unknown = unknownField(body, PATCH_FIELDS, '');
  if (unknown) return unknown;
  const st = status(body, '');
  const settings = settingsPatch(body, '');
  if (!st.ok && st.problem.kind === 'shape') return st;
  if (!settings.ok) return settings;
  if (!st.ok) return st;
  return { ok: true, value: { ...settings.value, ...(st.value !== undefined ? { status: st.value } : {}) } };
}

/** A password rotation's body: `{}` or `{"password": "…"}` (null: generated). */
export function parsePasswordBody(body: unknown): Result<string | null> {
  if (!isObject(body)) return shape('body', 'a JSON object');
  const unknown = unknownField(body, new Set(['password']), '');
  if (unknown) return unknown;
  const p = body.password;
  if (p === undefined || p === null) return { ok: true, value: null };
  if (typeof p !== 'string') return shape('password', 'a string, or null to have one generated');
  const problem = proxyPasswordProblem(p);
  return problem ? value('password', problem) : { ok: true, value: p };
}
