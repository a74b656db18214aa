// Whose usage a byte counts as: an account's subject (`user:NAME` for a proxy user, `ip:A.B.C.D` for traffic admitted
// by the whitelist), and the one map key of an account and subject. The gateway's counters and connection slots,
// the daemon's meter, plans and limits, and the store's domain cap all key by `usageKey`; the store's rows hold the
// subject text.

/** The subject of a proxy user's traffic. */
export const userSubject = (username: string): string => `user:${username}`;

/** The subject of traffic admitted by its source address (the whitelist). */
export const ipSubject = (sourceIp: string): string => `ip:${sourceIp}`;

/** The proxy user a subject names, or null for whitelist traffic (`ip:…`) and anything else. */
export const subjectUser = (subject: string | null | undefined): string | null =>
  subject?.startsWith('user:') ? subject.slice(5) : null;

/** The source address a subject names (whitelist traffic), or null. */
export const subjectIp = (subject: string | null | undefined): string | null =>
  subject?.startsWith('ip:') ? subject.slice(3) : null;

/** One key per account and subject: NUL cannot occur in a subject, so no two pairs share a key. */
export const usageKey = (accountId: number, subject: string): string => `${accountId}\0${subject}`;

/** The account and subject of a `usageKey`: the account before the first NUL, the subject after it. */
export function splitUsageKey(key: string): { accountId: number; subject: string } {
  const nul = key.indexOf('\0');
  return { accountId: Number(key.slice(0, nul)), subject: key.slice(nul + 1) };
}

/** One key per account, subject and target domain: a `usageKey` and the domain after one more NUL. */
export const usageTargetKey = (accountId: number, subject: string, target: string): string =>
  `${usageKey(accountId, subject)}\0${target}`;
